"""How a resolved alarm ended, on the alarms screen: a reason this dashboard does not know (a newer
agent's) reads as a neutral ending naming it, as text, or as the agent's own ending, never both."""

from __future__ import annotations

import random

from msgspec.structs import replace
from textual.app import App, ComposeResult

from rigmon.cluster.alarm_board import AlarmRow, board_view, group_rows
from rigmon.cluster.alarm_events import with_alarm_events
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Alarm, AlarmList, Event
from rigmon.tui.widgets.alarm_table import AlarmTable
from tests.tui.snapshot_apps.fake_agent import START_AT, FakeClock, make_alarm, make_frame
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


async def test_a_newer_agents_own_ending_is_said_once() -> None:
    # Before: the agent's record ends in its own words and the row added the neutral ending after them:
    # "GPU 3 is lost; Xid 79 on GPU 3 (drained by the operator) (ended: drained)".
    cluster = ClusterStore(FakeClock())
    store = cluster.add("node01", "http://node01")
    store.add_frames([make_frame("node01", "node01-run1", 1, random.Random(1))])
    active = (firing(1, "gpu_lost", "GPU 3 is lost"), firing(2, "gpu_xid_fatal", "Xid 79 on GPU 3"))
    store.set_alarms(AlarmList(node="node01", active=active, recent=()))
    own = " (drained by the operator)"
    store.set_alarms(AlarmList(node="node01", active=(), recent=tuple(
        replace(a, state="resolved", resolved_at=START_AT + 200, resolve_reason="drained", message=a.message + own)
        for a in active)))
    app = Host()
    async with app.run_test(size=(200, 10)) as pilot:
        table = app.query_one(AlarmTable)
        table.alarms = board_view(cluster).recent
        for _ in range(3):
            await pilot.pause()
        assert table.row_count == 1
        message = [str(c.key.value) for c in table.ordered_columns].index("message")
        assert table.get_cell_at((0, message)).plain == "GPU 3 is lost; Xid 79 on GPU 3" + own
        lines, _ = screen_lines(app)
        assert any(line.rstrip().endswith("Xid 79 on GPU 3" + own) or own + "  " in line for line in lines)
        assert not any("(ended" in line for line in lines)
