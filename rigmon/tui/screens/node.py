"""NodeScreen: one node's incident timeline first, then everything it reports grouped by source
(sources in trouble first, absent ones folded into one line), collector health and events."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.scrollbar import ScrollBarRender
from textual.widgets import Header, Static

from rigmon.cluster.incident import Problem, timeline
from rigmon.cluster.node_view import OUT_OF_TOUCH, NodeView
from rigmon.schema import Event, Frame, Info
from rigmon.tui import format as fmt
from rigmon.tui.event_merge import merge_xid_events
from rigmon.tui.key_line import KeyLine
from rigmon.tui.messages import HistoryWanted
from rigmon.tui.recording_end import ended_text
from rigmon.tui.widgets.collector_health import CollectorHealth
from rigmon.tui.widgets.event_list import EventList
from rigmon.tui.widgets.gpu_group import GpuGroup
from rigmon.tui.widgets.guard_line import GuardLine
from rigmon.tui.widgets.host_group import HostGroup
from rigmon.tui.widgets.link_group import LinkGroup
from rigmon.tui.widgets.node_status import NodeStatus
from rigmon.tui.widgets.peer_path_group import PeerPathGroup
from rigmon.tui.widgets.rail_group import RailGroup
from rigmon.tui.widgets.rdma_group import RdmaGroup
from rigmon.tui.widgets.replay_bar import ReplayBar
from rigmon.tui.widgets.source_group import SourceGroup
from rigmon.tui.widgets.storage_group import StorageGroup
from rigmon.tui.widgets.timeline import IncidentTimeline

#: Which source box shows the subject of a problem, by the subject's prefix.
SUBJECT_GROUPS: dict[str, type[SourceGroup]] = {
    "gpu": GpuGroup, "gpus": GpuGroup, "psu": RailGroup, "md": StorageGroup, "nvme": StorageGroup,
    "disk": StorageGroup, "link": LinkGroup, "rdma": RdmaGroup,
    "peer": PeerPathGroup,
}


#: The source boxes in their order when none is in trouble.
SOURCE_ORDER: tuple[type[SourceGroup], ...] = (GpuGroup, RailGroup, StorageGroup, LinkGroup, RdmaGroup, PeerPathGroup,
                                                HostGroup)


def troubled_groups(problems: tuple[Problem, ...]) -> set[type[SourceGroup]]:
    """The source boxes that show a current problem."""
    out: set[type[SourceGroup]] = set()
    for problem in problems:
        group = SUBJECT_GROUPS.get(problem.subject.split(":", 1)[0])
        if group is not None:
            out.add(group)
        if "after rail" in problem.text:
            out.add(RailGroup)  # the sag that caused a loss
    return out


def out_of_touch(view: NodeView, ended_at: float | None = None,
                 stopped_cleanly: bool | None = None) -> tuple[Problem, ...]:
    """What is wrong now with a node the dashboard has lost (its readings are the last it had):
    ``unreachable, last data 24s ago: cannot connect: ...`` (red), ``stale, last data 8s ago``
    (amber), as its cluster row says; in a replay, ``recording ended 00:01:30: ...`` (amber) once
    the cursor is past its last frame (``ended_at``, see `rigmon.tui.recording_end`), with how its
    agent's run ended where the bundle says (``stopped_cleanly``); nothing while it is live."""
    if ended_at is not None:
        why = {None: "its agent stopped, or its clock ran behind the others'",
               True: "its agent stopped cleanly",
               False: "its agent did not stop cleanly: killed, crashed or the node lost power"}[stopped_cleanly]
        return (Problem("warn", f"{ended_text(ended_at)}: nothing of it after its last frame ({why})", "node"),)
    if view.state not in OUT_OF_TOUCH:
        return ()
    text = view.state + (", no data yet" if view.age_s is None else f", last data {fmt.age(view.age_s)} ago")
    if view.reason:
        text += f": {view.reason}"
    return (Problem("warn" if view.state == "stale" else "bad", text, "node"),)


class WholeCellScrollBarRender(ScrollBarRender):
    """A scrollbar whose thumb ends on whole cells: Textual's default draws the thumb's ends as
    eighth-cell blocks (``▁▂▅``), which beside the boxes' borders read as stray sparkline bars."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8


def _failing_states(group: SourceGroup, frame: Frame | None, states: tuple[str, ...] = ("error", "hung")) -> str:
    """``gpu: error`` for each of ``group``'s collectors in one of ``states`` in ``frame`` ("" if none)."""
    if frame is None:
        return ""
    return ", ".join(f"{name}: {frame.collectors[name].state}" for name in group.COLLECTORS
                     if name in frame.collectors and frame.collectors[name].state in states)


class NodeScreen(Screen[None]):
    """The node the app has selected: status, one box per source, collectors, events."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("h", "history", "History"),
        Binding("g", "guard('hold')", "Hold guard", show=False),
        Binding("G", "guard('release')", "Release guard", show=False),
    ]

    class Back(Message):
        """The operator wants the cluster screen again."""

    class GuardCommand(Message):
        """The operator holds or releases the shown node's undervolt guard."""

        def __init__(self, key: str, action: str) -> None:
            super().__init__()
            self.key = key
            self.action = action

    def __init__(self) -> None:
        super().__init__()
        self._shown_key: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="node-body"):
            yield IncidentTimeline()
            yield NodeStatus()
            yield GuardLine()
            yield GpuGroup()
            yield RailGroup()
            yield StorageGroup()
            yield LinkGroup()
            yield RdmaGroup()
            yield PeerPathGroup()
            yield HostGroup()
            yield Static(id="not-present")
            yield CollectorHealth()
            yield EventList()
        yield ReplayBar()
        yield KeyLine()

    def on_mount(self) -> None:
        # Per instance (Textual's documented way), so no other scrollbar changes.
        self.query_one("#node-body", VerticalScroll).vertical_scrollbar.renderer = WholeCellScrollBarRender  # type: ignore[misc]

    def show(self, view: NodeView, info: Info | None, frame: Frame | None, events: tuple[Event, ...],
             ended_at: float | None = None, stopped_cleanly: bool | None = None, note: str | None = None) -> None:
        """Draw one node; an Xid reported by NVML and by the kernel log is listed once. ``ended_at``: in
        a replay, when the node's recording ended before the cursor (`rigmon.tui.recording_end`);
        ``stopped_cleanly``: whether its agent did, where the bundle says (`Replay.stopped_cleanly`);
        ``note``: another agent answers at its URL now (`rigmon.cluster.identity.AgentNames`)."""
        events = merge_xid_events(events)
        state = view.state if ended_at is None else ended_text(ended_at, stopped_cleanly)
        self.sub_title = f"{view.label or view.name} · {state}"
        if view.key != self._shown_key:
            # Another node: start at its top, not where the last one was left. The refresh
            # timer re-shows the same node every second and keeps the scroll position.
            self._shown_key = view.key
            self.query_one("#node-body", VerticalScroll).scroll_home(animate=False, immediate=True)
        story = self.query_one(IncidentTimeline)
        story.steps = timeline(events, view.sags, now=view.problems,
                               now_at=frame.taken_at if frame is not None else None, frame=frame)
        story.now = (*out_of_touch(view, ended_at, stopped_cleanly), *view.problems)
        status = self.query_one(NodeStatus)
        status.stopped_cleanly = stopped_cleanly
        status.ended_at = ended_at
        status.note = note
        status.view = view
        status.info = info
        for group in self.query(SourceGroup):
            group.frame = frame
            group.trends = view.trends
            group.details = view.details
            group.events = events
            group.span_s = view.trend_span_s
        self.query_one(RailGroup).rail_worst_volts = view.summary.rail_worst_volts if view.summary else None
        self.query_one(GuardLine).guard = frame.readings.guard if frame else None
        health = self.query_one(CollectorHealth)
        health.collectors = dict(frame.collectors) if frame else {}
        # Out of touch, the boxes hold its last frame's figures: faint, as its cluster row draws them,
        # so they do not read as current (the status above says since when).
        old = ended_at is not None or view.state in OUT_OF_TOUCH
        for box in (*self.query(SourceGroup), self.query_one(GuardLine), health):
            box.set_class(old, "-old")
        event_list = self.query_one(EventList)
        event_list.events = events
        # Their layout reactives do not fire when the values equal the last ones (a frozen
        # clock, a paused replay); a first show racing the screen's first layout then left
        # them one line high for good. Measuring again is cheap.
        for widget in (story, status, health, event_list):
            widget.refresh(layout=True)
        self._arrange(frame, view.problems)

    def start_at_top(self) -> None:
        """The next show starts at the top, at the incident: the node is being opened (from the
        cluster, an alarm, the link matrix), not redrawn, even if it is the node shown last."""
        self._shown_key = None

    def _arrange(self, frame: Frame | None, problems: tuple[Problem, ...]) -> None:
        """Sources with a current problem first; sources the node does not have leave the
        page for one "not present" line under the others."""
        body = self.query_one("#node-body", VerticalScroll)
        groups = list(self.query(SourceGroup))
        absent = [g for g in groups if frame is not None and g.body(frame) is None and not g.has_parts(frame)]
        # Peer paths are configuration, not hardware: an agent that probes no peer runs no
        # probe collector, or one that says "absent" (no [[peers]] configured), and the node
        # screen does not list them as missing.
        unconfigured = [g for g in absent if isinstance(g, PeerPathGroup) and frame is not None
                        and all(frame.collectors[name].state == "absent"
                                for name in g.COLLECTORS if name in frame.collectors)]
        for group in groups:
            group.display = group not in absent
        absent = [g for g in absent if g not in unconfigured]
        # A source with no reading because its collector fails is not "not present": a node whose
        # NVML broke (or whose driver did not load) has GPUs. Said apart, in the bad style.
        failing = {g: states for g in absent if (states := _failing_states(g, frame))}
        # Nor is one whose collector is starting (NVML's slow first init): not known yet.
        starting = {g: states for g in absent if g not in failing
                    and (states := _failing_states(g, frame, ("pending",)))}
        absent = [g for g in absent if g not in failing and g not in starting]
        # And parts of the boxes shown (no md arrays beside the disks, no Thunderbolt beside the NICs).
        missing = [g.TITLE for g in absent] + [part for g in groups if g not in absent and g not in failing
                                               and g not in starting and frame is not None
                                               for part in g.absent_parts(frame)]
        note = self.query_one("#not-present", Static)
        text = Text("not present on this node: " + ", ".join(missing)) if missing else Text()
        if starting:
            if text:
                text.append("\n")
            text.append("not read yet, collector starting (see Collectors): "
                        + "; ".join(f"{g.TITLE} ({states})" for g, states in starting.items()))
        if failing:
            if text:
                text.append("\n")
            unread = "; ".join(f"{g.TITLE} ({states})" for g, states in failing.items())
            bad = next(iter(failing)).style_of("bad")
            text.append(f"not read, collector failing (see Collectors): {unread}", style=bad)
        note.display = bool(text)
        note.update(text)
        troubled = troubled_groups(problems)
        order = sorted(groups, key=lambda g: (type(g) not in troubled, SOURCE_ORDER.index(type(g))))
        if order != groups:
            # After the guard's line, which stays under the status (moving the boxes after the
            # status pushed it down under the last box moved).
            body.move_child(order[0], after=self.query_one(GuardLine))
            for before, group in zip(order, order[1:]):
                body.move_child(group, after=before)

    def action_guard(self, action: str) -> None:
        """Hold or release the shown node's guard (the app sends it with the node's control token)."""
        if self._shown_key is not None:
            self.post_message(self.GuardCommand(self._shown_key, action))

    def action_back(self) -> None:
        """Back to the cluster screen."""
        self.post_message(self.Back())

    def action_history(self) -> None:
        """Open the history view of this node."""
        self.post_message(HistoryWanted())
