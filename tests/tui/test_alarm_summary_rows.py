"""The line above the alarms tables counts what the tables list: rows, one per incident."""

from __future__ import annotations

from rigmon.cluster.alarm_board import AlarmBoardView, AlarmRow
from rigmon.cluster.client import AgentClient
from rigmon.cluster.config import NodeTarget
from rigmon.schema import AlarmList
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.alarms import summary_line
from rigmon.tui.widgets.alarm_table import AlarmTable
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent, FakeClock, make_alarm


async def test_the_header_counts_the_rows_the_table_lists() -> None:
    # Before: "3 firing: 2 critical, 1 warning" above two rows: the rail warning and the critical it
    # escalated to are one row (one incident), but the header counted them as two alarms.
    agent = FakeAgent("node01", frames=3)
    agent.alarms = AlarmList(node="node01", active=(
        make_alarm("node01", 1, "psu_rail_low_warning", "warning", "psu", "12 V rail minimum 11.62 V"),
        make_alarm("node01", 2, "psu_rail_low_critical", "critical", "psu", "12 V rail minimum 11.41 V"),
        make_alarm("node01", 3, "gpu_hot", "warning", "gpu:0", "GPU 0 at 91 °C"),
        make_alarm("node01", 4, "gpu_hot", "warning", "gpu:1", "GPU 1 at 88 °C", state="pending"),
    ), recent=())
    app = RigmonApp([NodeTarget(agent.url)], clock=FakeClock(), refresh_s=3600,
                    client_factory=lambda t: AgentClient(t.url, transport=agent.transport))
    async with app.run_test(size=(120, 30)) as pilot:
        store = app.cluster.nodes[agent.url]
        await wait_for(lambda: store.alarm_list is not None)
        await pilot.press("a")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()
        table = app.screen.query_one("#active-alarms", AlarmTable)
        assert table.row_count == 3
        summary = str(app.screen.query_one("#alarm-summary").render())
        assert summary.startswith("3 rows · 2 firing (3 alarms): 1 critical, 1 warning · 1 pending")


def _board(*states: str) -> AlarmBoardView:
    """A board of one node's warnings on drives nvme0, nvme1, ... in ``states`` (one row each)."""
    rows = tuple(AlarmRow("http://node01:9871", "node01", "node",
                          make_alarm("node01", n, "nvme_temp_over_warning", "warning", f"nvme:nvme{n}",
                                     f"nvme{n} at 83 °C", state=state))
                 for n, state in enumerate(states))
    firing = sum(1 for s in states if s == "firing")
    return AlarmBoardView(active=rows, recent=(), firing={"warning": firing} if firing else {}, firing_alarms=firing)


def test_the_header_first_counts_every_row_listed_pending_ones_too() -> None:
    # A replay of nvme-thermal-throttle: "2 firing rows: 2 warning · 1 pending" above three rows read as a miscount.
    assert summary_line(_board("firing", "firing", "pending")).plain == "3 rows · 2 firing: 2 warning · 1 pending"
    assert summary_line(_board("firing", "firing")).plain == "2 firing rows: 2 warning"
    assert summary_line(_board("pending", "pending")).plain == "nothing firing · 2 pending"
    assert summary_line(_board()).plain == "nothing firing"
