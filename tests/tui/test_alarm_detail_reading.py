"""The panel under the alarms tables says where a firing alarm's reading is now in the unit and
decimals of its message."""

from __future__ import annotations

from msgspec.structs import replace
from textual.app import App, ComposeResult

from rigmon.cluster.alarm_board import AlarmRow
from rigmon.tui.widgets.alarm_detail import AlarmDetail
from tests.tui.snapshot_apps.fake_agent import START_AT, make_alarm
from tests.tui.snapshot_apps.hostile import screen_lines


class Host(App[None]):
    """The panel alone."""

    def compose(self) -> ComposeResult:
        yield AlarmDetail()


async def test_the_reading_now_has_the_unit_and_decimals_of_the_message() -> None:
    # Before: "now 11.6083", a bare number beside "12 V rail minimum 11.212 V is below 11.7 V".
    rail = replace(make_alarm("node04", 1, "psu_rail_low_warning", "warning", "psu",
                              "12 V rail minimum 11.212 V is below 11.7 V", at=START_AT),
                   value=11.212, value_now=11.6083)
    hot = replace(make_alarm("node04", 2, "gpu_hot", "warning", "gpu:1", "GPU 1 at 91 °C", at=START_AT),
                  value=91, value_now=88.4)
    count = replace(make_alarm("node02", 3, "gpu_pcie_replay", "warning", "gpu:2",
                               "GPU 2 PCIe replays rose by 11 in 26 s", at=START_AT), value=11, value_now=14)
    app = Host()
    async with app.run_test(size=(80, 6)) as pilot:
        detail = app.query_one(AlarmDetail)
        for alarm, now in ((rail, "now 11.608 V"), (hot, "now 88 °C"), (count, "now 14")):
            detail.row = AlarmRow("n", alarm.node, "node", alarm)
            await pilot.pause()
            lines, _ = screen_lines(app)
            assert any(line.rstrip().endswith(now) for line in lines), (now, lines)


async def test_a_held_state_alarm_says_its_subjects_state_now() -> None:
    # Before: nothing said the RDMA port was up again while its alarm was held for its clear hold.
    down = replace(make_alarm("node01", 1, "rdma_port_down", "warning", "rdma:mlx5_0/1",
                              "RDMA port mlx5_0/1 is down: check the cable", at=START_AT),
                   rule_kind="state", value="down", value_now="ok")
    app = Host()
    async with app.run_test(size=(80, 6)) as pilot:
        detail = app.query_one(AlarmDetail)
        detail.row = AlarmRow("n", "node01", "node", down)
        await pilot.pause()
        lines, _ = screen_lines(app)
        assert any(line.rstrip().endswith("not acknowledged  now ok") for line in lines), lines
