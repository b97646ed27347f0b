"""NodeStatus: the node screen's heading: state, reason, age of data, agent run and restarts."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.cluster.node_view import OUT_OF_TOUCH, NodeView
from rigmon.schema import Info
from rigmon.tui import format as fmt
from rigmon.tui.recording_end import ended_text
from rigmon.tui.text import plain
from rigmon.tui.widgets.alarm_table import utc_clock

#: Cells between the columns of the status grid.
GAP = 2


def grid_width(rows: list[tuple[str, Text, str, Text]]) -> int:
    """Cells the four-column grid of ``rows`` takes with no cell cut."""
    widths = [max(len(row[0]) for row in rows), max(row[1].cell_len for row in rows),
              max(len(row[2]) for row in rows), max(row[3].cell_len for row in rows)]
    return sum(widths) + GAP * (len(widths) - 1)


def last_data(view: NodeView) -> str:
    """``0s ago`` while live; out of touch, also when (``2h ago (11-28 01:34:25 UTC)``, the
    dashboard's clock): the short age alone grows coarse ("2h") while the node stays dead."""
    if view.age_s is None:
        return "never"
    age = f"{fmt.age(view.age_s)} ago"
    if view.state in OUT_OF_TOUCH and view.last_data_at is not None:
        age += f" ({utc_clock(view.last_data_at)} UTC)"
    return age


class NodeStatus(Widget):
    """Where the node's data comes from and how fresh it is."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "node-status--label",
        "node-status--live",
        "node-status--stale",
        "node-status--unreachable",
        "node-status--refused",
        "node-status--connecting",
        "node-status--ended",
        "node-status--note",
    }
    DEFAULT_CSS = """
    NodeStatus {
        height: auto;
    }
    """

    view: reactive[NodeView | None] = reactive(None, layout=True)
    """The node as the store sees it now."""
    info: reactive[Info | None] = reactive(None, layout=True)
    """The agent's /v1/info answer, if it gave one."""
    ended_at: reactive[float | None] = reactive(None, layout=True)
    """In a replay, when the node's recording ended before the cursor (its last frame's ``taken_at``,
    see `rigmon.tui.recording_end`); ``None`` live and while its frames go on."""
    stopped_cleanly: reactive[bool | None] = reactive(None, layout=True)
    """In a replay, whether the node's agent stopped cleanly when its bundle says (a journal's bundle):
    said after "recording ended"; ``None`` when it does not."""
    note: reactive[str | None] = reactive(None, layout=True)
    """Another agent answers at the node's URL than before (`rigmon.cluster.identity.AgentNames`): said on a
    line of its own, so that the data above and below is not read as the old node's; ``None``: none."""

    def render(self) -> RenderableType:
        view = self.view
        if view is None:
            return ""
        label = self.get_component_rich_style("node-status--label", partial=True)
        state = Text(view.state, style=self.get_component_rich_style(f"node-status--{view.state}", partial=True))
        if view.reason and view.state != "live":
            state.append(": ").append(plain(view.reason))
        age = last_data(view)
        if self.ended_at is not None:
            # Its age stops at its last frame (the replay cannot tell a dead node from a clock behind).
            state = Text(ended_text(self.ended_at, self.stopped_cleanly),
                         style=self.get_component_rich_style("node-status--ended", partial=True))
            age = "at the end of its recording"
        info = self.info
        run = f"{info.run_id} (rigmon {info.agent_version})" if info else fmt.MISSING
        seq = str(view.summary.seq) if view.summary else fmt.MISSING
        rows = [
            ("node", plain(view.name), "agent", plain(view.url)),
            ("state", state, "last data", Text(age)),
            ("run", plain(run), "seq", Text(seq)),
            ("restarts", Text(str(view.restarts)), "frames lost", Text(str(view.frames_lost))),
        ]
        if self.note:
            rows.append(("note", plain(self.note, self.get_component_rich_style("node-status--note", partial=True)),
                         "", Text("")))
        table = Table.grid(padding=(0, GAP))
        if grid_width(rows) <= self.content_size.width or self.content_size.width <= 0:
            for _ in range(4):
                table.add_column(no_wrap=True)
            for name, value, other, other_value in rows:
                table.add_row(Text(name, style=label), value, Text(other, style=label), other_value)
            return table
        # Too narrow for two pairs side by side (an 80-column terminal): each line's second
        # pair follows its first, and a long value (a failure reason) wraps instead of being cut.
        table.add_column(no_wrap=True)
        table.add_column(overflow="fold")
        room = self.content_size.width - max(len(row[0]) for row in rows) - GAP
        for name, value, other, other_value in rows:
            pair = Text.assemble((other, label), " ", other_value)
            table.add_row(Text(name, style=label), second_pair_after(self.app.console, value, pair, room))
        return table


def second_pair_after(console: Console, value: Text, pair: Text, room: int) -> Text:
    """``value`` then ``pair`` (``last data 25s ago``) in a column ``room`` cells wide: on the
    value's last line when the pair fits there whole, else on a line of its own, so that it
    never wraps between its words. A pair wider than the column folds as it must."""
    if room <= 0:
        return Text.assemble(value, " " * GAP, pair)
    # Where the value's last line ends once the column wraps it (as the table will: at spaces, folding).
    lines = Text(value.plain).wrap(console, room, overflow="fold")
    used = lines[-1].cell_len if lines else 0
    if used + GAP + pair.cell_len <= room:
        return Text.assemble(value, " " * GAP, pair)
    return Text.assemble(value, "\n", pair)
