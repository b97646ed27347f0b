"""RigmonApp: wiring of the dashboard (modes, keys, themes, follow workers, refresh timer)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from rigmon.clock import Clock, SystemClock
from rigmon.cluster.client import AgentClient, Connected, Failed, GapReported, Sampled
from rigmon.cluster.config import DEFAULT_THEME, NodeTarget
from rigmon.cluster.store import ClusterStore
from rigmon.tui.messages import NodeConnected, NodeFailed, NodeGap, NodeSampled
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.help import HelpScreen
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.themes import builtin_theme_dir, load_themes

ClientFactory = Callable[[NodeTarget], AgentClient]
#: Seconds between redraws of the current screen (states age even without new data).
REFRESH_S = 1.0
#: Seconds before a follow worker that crashed on a bug starts again.
WORKER_RESTART_S = 5.0


def default_client(target: NodeTarget) -> AgentClient:
    """A real HTTP client for ``target``."""
    return AgentClient(target.url, target.token, ca_file=target.ca_file)


class RigmonApp(App[None]):
    """The dashboard over a set of agents.

    Args:
        targets: agents to follow.
        clock: time source of the node stores (tests freeze it).
        theme_name: theme to start with; unknown names fall back to the default with a notice.
        client_factory: builds each node's client (tests inject fake transports).
        theme_dir: directory of theme files (default: rigmon's own).
        refresh_s: seconds between redraws.
    """

    CSS_PATH = "rigmon.tcss"
    TITLE = "rigmon"
    MODES: ClassVar[dict[str, str | Callable[[], Screen[None]]]] = {"cluster": ClusterScreen, "node": NodeScreen}
    DEFAULT_MODE = "cluster"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
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
    ) -> None:
        super().__init__()
        self.targets = list(targets)
        self.cluster = ClusterStore(clock or SystemClock())
        for target in self.targets:
            self.cluster.add(target.url, target.url)
        self.client_factory = client_factory
        self.selected: str | None = None
        self.refresh_s = refresh_s
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
            self.notify(f"theme file {failure.path.name}: {failure.reason}", title="Theme not loaded",
                        severity="error", timeout=10)
        if self._unknown_theme:
            self.notify(f"no theme named {self._unknown_theme!r}; using {self.theme}", severity="warning")
        for target in self.targets:
            self.run_worker(self._follow(target), name=f"follow {target.url}", group="follow", exit_on_error=False)
        self.set_interval(self.refresh_s, self.refresh_screen)
        self.refresh_screen()

    async def _follow(self, target: NodeTarget) -> None:
        """Follow one agent and post what happens; never touches widgets."""
        key = target.url
        while True:
            client = self.client_factory(target)
            try:
                async for update in client.follow():
                    if isinstance(update, Sampled):
                        self.post_message(NodeSampled(key, update.frames))
                    elif isinstance(update, Connected):
                        self.post_message(NodeConnected(key, update.info))
                    elif isinstance(update, GapReported):
                        self.post_message(NodeGap(key, update.gap))
                    elif isinstance(update, Failed):
                        self.post_message(NodeFailed(key, update.reason, update.retry_in_s))
            except Exception as exc:  # noqa: BLE001 - a bug in one node's client must not end the dashboard
                self.post_message(NodeFailed(key, f"internal error: {type(exc).__name__}: {exc}", WORKER_RESTART_S))
                await asyncio.sleep(WORKER_RESTART_S)
            finally:
                await client.aclose()

    def on_node_connected(self, message: NodeConnected) -> None:
        self.cluster.nodes[message.key].connected(message.info)

    def on_node_sampled(self, message: NodeSampled) -> None:
        store = self.cluster.nodes[message.key]
        first = store.latest is None
        store.add_frames(message.frames)
        if first:
            self.refresh_screen()

    def on_node_gap(self, message: NodeGap) -> None:
        self.cluster.nodes[message.key].add_gap(message.gap)

    def on_node_failed(self, message: NodeFailed) -> None:
        self.cluster.nodes[message.key].failed(message.reason)

    def refresh_screen(self) -> None:
        """Draw the current screen from the stores."""
        screen = self.screen
        if isinstance(screen, ClusterScreen):
            screen.show(self.cluster.views())
        elif isinstance(screen, NodeScreen) and self.selected in self.cluster.nodes:
            store = self.cluster.nodes[self.selected]
            screen.show(store.view(points=None, buckets=240), store.info, store.latest, tuple(store.events))

    def open_node(self, key: str) -> None:
        """Show the node screen of ``key``."""
        self.selected = key
        self.switch_mode("node")
        self.call_after_refresh(self.refresh_screen)

    def on_cluster_screen_open_node(self, message: ClusterScreen.OpenNode) -> None:
        self.open_node(message.key)

    def on_node_screen_back(self, message: NodeScreen.Back) -> None:
        self.switch_mode("cluster")
        self.call_after_refresh(self.refresh_screen)

    def action_help(self) -> None:
        """Show keys and states."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_cycle_theme(self) -> None:
        """Switch to the next of rigmon's themes."""
        names = self.theme_names or [self.theme]
        index = names.index(self.theme) + 1 if self.theme in names else 0
        self.theme = names[index % len(names)]
        self.notify(f"theme {self.theme}", timeout=2)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Cycle theme", "Switch to the next rigmon theme", self.action_cycle_theme)
        yield SystemCommand("Cluster", "Show every node", lambda: self.on_node_screen_back(NodeScreen.Back()))
        for store in self.cluster.nodes.values():
            key = store.key
            yield SystemCommand(f"Open node {store.name}", store.url, lambda key=key: self.open_node(key))
