"""RigmonApp: wiring of the dashboard (modes, keys, themes, follow and alarm workers, replay, refresh timer)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.notifications import Notify
from textual.screen import Screen

from rigmon.clock import Clock, SystemClock
from rigmon.cluster.alarm_board import AlarmBoardView, CriticalWatch, board_view
from rigmon.cluster.config import DEFAULT_THEME, NodeTarget, default_export_dir
from rigmon.cluster.identity import AgentNames
from rigmon.cluster.recording_end import recording_ends
from rigmon.cluster.store import ClusterStore
from rigmon.tui import operations
from rigmon.tui.critical_toast import CriticalToast, fit_toasts
from rigmon.tui.following import ClientFactory, Followers, default_client
from rigmon.tui.gc_tuning import tune_gc as tune_gc  # re-exported: `rigmon dash` and benchmarks call it from here
from rigmon.tui.messages import (
    HistoryWanted,
    NodeAlarms,
    NodeAlarmsFailed,
    NodeConnected,
    NodeFailed,
    NodeGap,
    NodeSampled,
    NodeSummarized,
)
from rigmon.tui.navigation import Navigation
from rigmon.tui.redraws import Redraws
from rigmon.tui.replay_keys import REPLAY_TICK_S, ReplayKeys
from rigmon.tui.screens.alarms import AlarmsScreen
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.links import LinkScreen
from rigmon.tui.node_commands import NodeCommands
from rigmon.tui.screen_drawing import draw, shows_frames_of
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.text import notify
from rigmon.tui.themes import builtin_theme_dir, load_themes

if TYPE_CHECKING:
    from rigmon.schema import Frame

    # Types only: a replay is built by `rigmon dash --replay` before the app (see `rigmon.cli_dash`).
    from rigmon.cluster.replay import Replay

#: Seconds between redraws of the current screen (states age even without new data).
REFRESH_S = 1.0
#: Seconds between /v1/alarms polls of a node (an ``alarm_*`` event in a frame fetches at once).
ALARM_POLL_S = 10.0


class RigmonApp(Navigation, ReplayKeys):
    """The dashboard over a set of agents (moving between its screens: `Navigation`; replay keys: `ReplayKeys`).

    Args:
        targets: agents to follow.
        clock: time source of the node stores (tests freeze it).
        theme_name: theme to start with; unknown names fall back to the default with a notice.
        client_factory: builds each node's client (tests inject fake transports).
        theme_dir: directory of theme files (default: rigmon's own).
        refresh_s: seconds between redraws.
        replay: a bundle to play back instead of following agents (its clock replaces ``clock``).
        export_dir: where the export key writes (default: `default_export_dir`, the user's data dir).
        alarm_poll_s: seconds between /v1/alarms polls of each node.
    """

    CSS_PATH = "rigmon.tcss"
    TITLE = "rigmon"
    MODES: ClassVar[dict[str, str | Callable[[], Screen[None]]]] = {
        "cluster": ClusterScreen, "node": NodeScreen, "alarms": AlarmsScreen, "links": LinkScreen}
    DEFAULT_MODE = "cluster"
    COMMANDS = App.COMMANDS | {NodeCommands}
    # The replay keys (`ReplayKeys`) come first, so the footer shows them ahead of these.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("a", "show_mode('alarms')", "Alarms"),
        Binding("c", "show_mode('cluster')", "Cluster", show=False),
        Binding("l", "show_mode('links')", "Links"),
        Binding("e", "export", "Export"),
        Binding("t", "cycle_theme", "Theme"),
    ]

    def __init__(
        self,
        targets: Sequence[NodeTarget],
        *,
        clock: Clock | None = None,
        theme_name: str | None = None,
        client_factory: ClientFactory = default_client,
        theme_dir: Path | None = None,
        refresh_s: float = REFRESH_S,
        replay: Replay | None = None,
        export_dir: Path | None = None,
        alarm_poll_s: float = ALARM_POLL_S,
    ) -> None:
        super().__init__()
        self.targets = list(targets) if replay is None else []
        self.replay = replay
        self.cluster = ClusterStore(replay.clock if replay is not None else clock or SystemClock())
        for target in self.targets:
            self.cluster.add(target.url, target.url)
        if replay is not None:
            replay.attach(self.cluster)
            self.add_class("-replaying")
        self.client_factory = client_factory
        self.selected: str | None = None
        self.refresh_s = refresh_s
        self.export_dir = export_dir or default_export_dir()
        self.alarm_poll_s = alarm_poll_s
        self.critical = CriticalWatch()
        # The node each followed URL says it is: a note when another agent answers at a node's URL.
        self.agent_names = AgentNames()
        self.critical_toast = CriticalToast()
        self.followers = Followers(client_factory, alarm_poll_s, self.post_message, self.run_worker)
        self.redraws = Redraws(self.set_timer, self.refresh_screen, self._redraw_frames_of)
        # Whether any node has reported peer paths: the link matrix's key is offered from then on.
        self.paths_seen = False
        self.ack_by = operations.login_name()
        loaded = load_themes(theme_dir or builtin_theme_dir())
        self.theme_failures = loaded.failed
        self.theme_names = [t.name for t in loaded.themes]
        for theme in loaded.themes:
            self.register_theme(theme)
        wanted = theme_name or DEFAULT_THEME
        self._unknown_theme = None if wanted in self.available_themes else wanted
        fallback = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
        self.theme = fallback if self._unknown_theme else wanted

    def on_mount(self) -> None:
        for failure in self.theme_failures:
            notify(self, f"theme file {failure.path.name}: {failure.reason}", title="Theme not loaded",
                   severity="error", timeout=10)
        if self._unknown_theme:
            notify(self, f"no theme named {self._unknown_theme!r}; using {self.theme}", severity="warning")
        if self.replay is not None and self.replay.bundle.cut_short:
            stop = self.replay.bundle.cut_short
            # The reader says which: a bundle that ends early ("cut short") or whose bytes fail their check.
            title = "Bundle damaged" if stop.startswith("the bundle is damaged") else "Bundle cut short"
            notify(self, f"{stop}: replaying what it holds", title=title, severity="warning", timeout=15)
        for target in self.targets:
            self.run_worker(self.followers.follow(target), name=f"follow {target.url}", group="follow",
                            exit_on_error=False)
            self.followers.alarm_wake[target.url] = asyncio.Event()
            self.followers.poll_alarms(target, self.cluster.nodes[target.url].generation)
        self.set_interval(self.refresh_s, self.refresh_screen)
        if self.replay is not None:
            self.set_interval(REPLAY_TICK_S, self._replay_tick)
        self.refresh_screen()

    def on_resize(self, event: Resize) -> None:
        fit_toasts(self, event.size)
        self.critical_toast.refit(self, event.size)

    def _refresh_notifications(self) -> None:
        # Toasts added, cleared or shown on another screen: the lines kept for them follow.
        super()._refresh_notifications()
        self.critical_toast.keep_room(self)

    def on_notify(self, event: Notify) -> None:
        # Runs before Textual adds the toast (the App's own handler comes later in the MRO): the
        # critical strip goes back under it once it is in.
        self.call_later(self.critical_toast.keep_bottom, self)

    def on_node_alarms(self, message: NodeAlarms) -> None:
        # An answer asked for before another agent took the node's URL is not the new agent's: dropped.
        store = self.cluster.current(message.key, message.generation)
        # Most polls bring the same list: redraw (and announce) only on a change.
        if store is not None and store.set_alarms(message.alarms):
            self.redraws.refresh_soon()

    def on_node_alarms_failed(self, message: NodeAlarmsFailed) -> None:
        store = self.cluster.current(message.key, message.generation)
        if store is not None:
            store.alarms_failed(message.reason)

    def on_node_connected(self, message: NodeConnected) -> None:
        store = self.cluster.nodes[message.key]
        note = self.agent_names.answered(message.key, store.url, message.info.node)
        if note is not None:
            # Its frames from now on are the other node's, on the same row (the dashboard follows URLs):
            # into a store of their own, so that no trend, history or alarm runs on across two machines.
            store = self.cluster.start_afresh(message.key)
            # The old agent's alarm answers (a poll in flight) are dropped; the new one's are asked for now.
            self.followers.poll_alarms(next(t for t in self.targets if t.url == message.key), store.generation)
            operations.reopen_history(self, message.key, note)
            notify(self, note, title="Another agent at a node's address", severity="warning", timeout=30)
            self.redraws.refresh_soon()
        store.connected(message.info)
        # A node back (or new) is asked for its alarms now, not after the back-off of the
        # fetches that failed while it was away: the alarms screen said "alarms unknown" meanwhile.
        wake = self.followers.alarm_wake.get(message.key)
        if wake is not None:
            wake.set()

    def on_node_sampled(self, message: NodeSampled) -> None:
        store = self.cluster.nodes[message.key]
        first = store.latest is None
        store.add_frames(message.frames)
        self._filed(message.key, message.frames, first)

    def on_node_summarized(self, message: NodeSummarized) -> None:
        store = self.cluster.nodes[message.key]
        first = store.latest is None
        store.add_summaries(message.records)
        self._filed(message.key, tuple(r.frame for r in message.records), first)

    def _filed(self, key: str, frames: tuple[Frame, ...], first: bool) -> None:
        """Frames (whole or of summary records) of ``key`` are in its store: offer the link
        matrix once a node reports peer paths, fetch its alarms at once when they bring alarm
        events, and redraw soon."""
        store = self.cluster.nodes[key]
        if not self.paths_seen and store.summary is not None and store.summary.paths is not None:
            self._paths_found()
        wake = self.followers.alarm_wake.get(key)
        if wake is not None and any(e.kind.startswith("alarm_") for f in frames for e in f.events):
            wake.set()
        if first:
            operations.reopen_history(self, key)  # a history view waiting for the node's first frame charts it
        self.redraws.frames_filed(key, first)

    def _redraw_frames_of(self, keys: set[str]) -> None:
        """Draw the current screen if new frames of ``keys`` change it (see `Redraws`)."""
        try:
            screen = self.screen
        except ScreenStackError:
            # The timer fired while the app shuts down.
            return
        if shows_frames_of(screen, keys, self.selected):
            self.draw_screen()

    def on_node_gap(self, message: NodeGap) -> None:
        self.cluster.nodes[message.key].add_gap(message.gap)

    def on_node_failed(self, message: NodeFailed) -> None:
        self.cluster.nodes[message.key].failed(message.reason)

    def refresh_screen(self) -> None:
        """Run the cluster rules, announce new critical alarms, and draw the current screen."""
        if not self.paths_seen and any(s.summary is not None and s.summary.paths is not None
                                       for s in self.cluster.nodes.values()):
            self._paths_found()  # a replay files its frames without `NodeSampled`
        self.cluster.evaluate_alarms()
        replay = self.replay
        if replay is None:
            board = board_view(self.cluster)
        else:
            # A node whose recording ended before the cursor: its alarms are as of its last frame.
            board = board_view(self.cluster, replay.notes, recording_ends(replay, self.cluster))
        listed = [key for key, store in self.cluster.nodes.items() if store.alarm_list is not None]
        self.critical_toast.announce(self, self.critical.news(board.active, listed))
        self.draw_screen(board)

    def draw_screen(self, board: AlarmBoardView | None = None) -> None:
        """Draw the current screen from the stores (the alarms screen needs the ``board``)."""
        try:
            screen = self.screen
        except ScreenStackError:
            # The refresh timer fired while the app shuts down (its screens are gone).
            return
        names = self.agent_names
        draw(screen, self.cluster, self.selected, self.replay, board, names.notes, names.short_notes)

    def on_history_wanted(self, message: HistoryWanted) -> None:
        key = message.key if message.key is not None else self.selected
        if key in self.cluster.nodes:
            self.push_screen(operations.history_screen(self, key))
            # Its time cursor at once in a replay, as the other screens' (then on every redraw).
            self.call_after_refresh(self.draw_screen)

    def on_alarms_screen_acknowledge(self, message: AlarmsScreen.Acknowledge) -> None:
        self.run_worker(operations.acknowledge(self, message.row), group="ack", exit_on_error=False)

    def on_node_screen_guard_command(self, message: NodeScreen.GuardCommand) -> None:
        self.run_worker(operations.guard_command(self, message.key, message.action), group="guard",
                        exit_on_error=False)

    def action_export(self) -> None:
        """Write a bundle of the followed nodes (or of the replay) and an SVG of the screen."""
        # Not exclusive: a second press while the first export still pulls is a second export (of
        # the later moment), never the end of the first, whose screenshot is already written.
        self.run_worker(operations.export(self), group="export", exit_on_error=False)

    def action_cycle_theme(self) -> None:
        """Switch to the next of rigmon's themes."""
        names = self.theme_names or [self.theme]
        index = names.index(self.theme) + 1 if self.theme in names else 0
        self.theme = names[index % len(names)]
        notify(self, f"theme {self.theme}", timeout=2)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Cycle theme", "Switch to the next rigmon theme", self.action_cycle_theme)
        yield SystemCommand("Cluster", "Show every node", lambda: self.action_show_mode("cluster"))
        yield SystemCommand("Alarms", "Active and resolved alarms of every node", lambda: self.action_show_mode("alarms"))
        yield SystemCommand("Links", "Round trips of every node to its peers", lambda: self.action_show_mode("links"))
        yield SystemCommand("Export", "Write a snapshot bundle and an SVG of the screen", self.action_export)
        # "Open node NAME" comes from `NodeCommands`: system commands are read as markup.

