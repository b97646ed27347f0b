"""AlarmTable as alarms come and go: the newest rows stay in view unless the operator chose another."""

from __future__ import annotations

from textual.app import App, ComposeResult

from rigmon.cluster.alarm_board import AlarmRow
from rigmon.tui.widgets.alarm_table import AlarmTable
from tests.tui.snapshot_apps.fake_agent import START_AT, make_alarm


def resolved(n: int) -> AlarmRow:
    alarm = make_alarm("node01", n, f"rule{n}", "warning", "s", f"alarm {n}", at=START_AT + n, resolved=True)
    return AlarmRow("n1", "node01", "node", alarm)


class Host(App[None]):
    """The alarms screen's two tables, the active one focused (as the screen starts)."""

    def compose(self) -> ComposeResult:
        yield AlarmTable(id="active")
        yield AlarmTable(resolved=True, id="recent")

    def on_mount(self) -> None:
        self.query_one("#active", AlarmTable).focus()


async def test_newer_resolved_alarms_stay_in_view_in_the_table_the_operator_is_not_in() -> None:
    # Before: the resolved table's cursor (on its first row, never moved) followed that row down as
    # newer alarms resolved, and scrolled with it: at 80x24 the newest resolutions (a link back at
    # full speed a moment ago) were above the visible rows, and the list read as if they had not come.
    app = Host()
    async with app.run_test(size=(80, 16)) as pilot:
        recent = app.query_one("#recent", AlarmTable)
        recent.alarms = (resolved(1),)
        await pilot.pause()
        recent.alarms = tuple(resolved(n) for n in range(12, 0, -1))  # newest first, as the board sorts them
        await pilot.pause()
        await pilot.pause()
        assert recent.size.height < 12  # the table scrolls
        assert recent.cursor_row == 0 and recent.scroll_y == 0
        selected = recent.selected()
        assert selected is not None and selected.alarm.rule == "rule12"
        # The table the operator is in keeps the cursor on the alarm they moved it to (`x` must not
        # land on another); left on the first row, it stays on the first row: a critical alarm that
        # fires above it is the one shown, not scrolled out of view over the incident.
        active = app.query_one("#active", AlarmTable)
        active.alarms = (resolved(1),)
        await pilot.pause()
        active.alarms = tuple(resolved(n) for n in range(12, 0, -1))
        await pilot.pause()
        await pilot.pause()
        assert active.has_focus and active.cursor_row == 0 and active.scroll_y == 0
        active.move_cursor(row=1)
        await pilot.pause()
        active.alarms = (resolved(13), *active.alarms)
        await pilot.pause()
        selected = active.selected()
        assert selected is not None and selected.alarm.rule == "rule11"
