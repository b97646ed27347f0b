"""The line above the alarms tables counts what the tables list: rows, one per incident."""

from __future__ import annotations

from rigmon.cluster.client import AgentClient
from rigmon.cluster.config import NodeTarget
from rigmon.schema import AlarmList
from rigmon.tui.app import RigmonApp
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
        assert summary.startswith("2 firing rows (3 alarms): 1 critical, 1 warning · 1 pending")
