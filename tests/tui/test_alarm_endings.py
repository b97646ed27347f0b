"""How a resolved alarm ended, on the alarms screen: a reason this dashboard does not know (a newer
agent's) reads as a neutral ending naming it, as text."""

from __future__ import annotations

from textual.app import App, ComposeResult

from rigmon.cluster.alarm_board import AlarmRow, group_rows
from rigmon.cluster.alarm_events import with_alarm_events
from rigmon.schema import Alarm, AlarmList, Event
from rigmon.tui.widgets.alarm_table import AlarmTable
from tests.tui.snapshot_apps.fake_agent import START_AT, make_alarm
from tests.tui.snapshot_apps.hostile import screen_lines

#: A newer agent's reason, with markup and a link in it: it must read as it is.
REASON = "[b]drained[/b] [@click=app.quit]"


class Host(App[None]):
    """A resolved alarms table alone."""

    def compose(self) -> ComposeResult:
        yield AlarmTable(resolved=True, id="recent")


def firing(n: int, rule: str, message: str) -> Alarm:
    return make_alarm("node01", n, rule, "critical", "gpu:3", message, at=START_AT + 100 + n)


async def test_a_reason_this_dashboard_does_not_know_reads_as_a_neutral_ending_in_text() -> None:
    # Before: the row read "GPU 3 is lost; Xid 79 on GPU 3", as if both had cleared.
    alarms = AlarmList(node="node01", active=(firing(1, "gpu_lost", "GPU 3 is lost"),
                                              firing(2, "gpu_xid_fatal", "Xid 79 on GPU 3")), recent=())
    events = [Event(id=f"e{n}", at=START_AT + 200, kind="alarm_resolved", severity="info", subject="gpu:3",
                    message=f"{a.rule} resolved", data={"alarm_id": a.id, "rule": a.rule, "reason": REASON})
              for n, a in enumerate(alarms.active)]
    rows = group_rows([AlarmRow("n1", "node01", "node", a) for a in with_alarm_events(alarms, events).recent])
    app = Host()
    async with app.run_test(size=(200, 10)) as pilot:
        table = app.query_one(AlarmTable)
        table.alarms = tuple(rows)
        for _ in range(3):
            await pilot.pause()
        assert table.row_count == 1
        message = [str(c.key.value) for c in table.ordered_columns].index("message")
        ending = f" (ended: {REASON})"
        assert table.get_cell_at((0, message)).plain.endswith("on GPU 3" + ending)
        lines, _ = screen_lines(app)
        assert any(ending in line for line in lines)
        assert app.is_running
