"""AlarmDetail: everything about the alarm under the cursor, for a terminal too narrow for the alarm tables."""

from __future__ import annotations

from typing import ClassVar, TypeGuard

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.alarms.message_values import reading_text
from rigmon.cluster.alarm_board import AlarmRow
from rigmon.cluster.incident import state_now
from rigmon.tui.text import plain
from rigmon.tui.widgets.alarm_table import utc_clock


class AlarmDetail(Widget):
    """Three lines or more, the message wrapping whole::

        critical firing  node01  gpu_lost  gpu:3
        since 11-22 08:52:02 UTC  acknowledged by alice 11-22 08:52:30 UTC
        GPU 3 is lost (fell off the bus)
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "alarm-detail--label",
        "alarm-detail--critical",
        "alarm-detail--warning",
        "alarm-detail--info",
        "alarm-detail--pending",
        "alarm-detail--acked",
    }
    DEFAULT_CSS = """
    AlarmDetail {
        height: auto;
    }
    """

    row: reactive[AlarmRow | None] = reactive(None, layout=True)
    """The alarm to describe; ``None``: no alarm under the cursor."""

    def _style(self, name: str) -> str:
        return str(self.get_component_rich_style(f"alarm-detail--{name}", partial=True))

    def render(self) -> RenderableType:
        row = self.row
        if row is None:
            return Text("no alarm under the cursor", style=self._style("label"))
        a = row.alarm
        label = self._style("label")
        head = Text.assemble(
            (a.severity, self._style(a.severity)), " ",
            (a.state, self._style(a.severity if a.state == "firing" else "pending")),
            (f" as last heard {utc_clock(row.as_of)} UTC ({row.as_of_why})" if row.as_of is not None else "",
             self._style("label")),
            "  ", plain(row.node), "  ", plain(", ".join(x.rule for x in row.alarms)),
            (" (cluster)" if row.source == "cluster" else "", label),
            "  ", plain(a.subject))
        times = Text()
        if a.state == "resolved":
            times.append("fired ", style=label).append(f"{utc_clock(a.fired_at or a.started_at)} UTC")
            times.append("  resolved ", style=label).append(f"{utc_clock(a.resolved_at)} UTC")
        else:
            times.append("since ", style=label).append(f"{utc_clock(a.fired_at or a.started_at)} UTC")
        if a.acknowledged_at is not None:
            times.append("  acknowledged", style=self._style("acked"))
            if a.acknowledged_by:
                times.append(" by ", style=self._style("acked")).append(plain(a.acknowledged_by, self._style("acked")))
            times.append(f" {utc_clock(a.acknowledged_at)} UTC")
        elif a.state != "resolved":
            times.append("  not acknowledged", style=label)
        if _number(a.value) and _number(a.value_now) and a.value_now != a.value and a.state != "resolved":
            # The alarm keeps its worst reading; say where the reading is now.
            times.append("  now ", style=label).append(reading_text(a, a.value_now))
        elif a.state != "resolved" and (now := state_now(a)) is not None:
            # A state alarm held while its subject is back (an RDMA port up again): say so.
            times.append("  now ", style=label).append(plain(now))
        return Text("\n").join([head, times, plain(row.message)])


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
