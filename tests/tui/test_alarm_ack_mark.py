"""Acknowledged alarms are marked in the alarms table at every width: ``firing ✓`` beside the
ack column at 200 columns, ``firing ✓alice`` at 80 columns, where the ack column is past the edge
(``firing ✓`` alone there when the name would leave the message too little room)."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from rigmon.cluster.client import AgentClient
from rigmon.cluster.config import NodeTarget
from rigmon.schema import Alarm, AlarmList
from rigmon.tui.app import RigmonApp
from rigmon.tui.widgets.alarm_table import AlarmTable
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import (
    START_AT,
    FakeAgent,
    FakeClock,
    make_alarm,
)
from tests.tui.snapshot_apps.hostile import screen_lines

#: Rows of the active table, worst and newest first, and how each state cell reads at 80 and 200 columns.
#: The times tell the rows apart on screen.
EXPECTED: tuple[tuple[str, str, str], ...] = (
    ("00:02:20", "firing", "firing"),                       # nobody on it
    ("00:02:00", "firing ✓alice", "firing ✓"),
    ("00:01:50", "firing ✓operati…", "firing ✓"),           # a long name is cut; the panel has it whole
    ("00:01:40", "firing ✓", "firing ✓"),                   # acknowledged, by nobody named
    ("00:01:30", "pending ✓ops[/]", "pending ✓"),           # markup in a name reads as it is
)


def acked(alarm: Alarm, by: str | None) -> Alarm:
    return replace(alarm, acknowledged_at=alarm.started_at + 5, acknowledged_by=by)


def alarms(node: str = "node01") -> AlarmList:
    return AlarmList(node=node, active=(
        make_alarm(node, 1, "gpu_lost", "critical", "gpu:3", "GPU 3 is lost (fell off the bus)",
                   at=START_AT + 140),
        acked(make_alarm(node, 2, "psu_rail_low_warning", "warning", "psu",
                         "12 V rail minimum 11.62 V is below 11.7 V", at=START_AT + 120), "alice"),
        acked(make_alarm(node, 3, "thunderbolt_degraded", "warning", "link:0-1",
                         "Thunderbolt/USB4 link 0-1 runs below its expected speed", at=START_AT + 110),
              "operations-team"),
        acked(make_alarm(node, 4, "disk_smart_failing", "warning", "disk:sda",
                         "disk sda SMART says failing", at=START_AT + 100), None),
        acked(make_alarm(node, 5, "gpu_power_low", "warning", "gpus", "node01 GPU power is below its peers'",
                      state="pending", at=START_AT + 90), "ops[/]"),
    ), recent=())


def dashboard(node: str = "node01") -> RigmonApp:
    agent = FakeAgent(node, frames=3)
    agent.alarms = alarms(node)
    return RigmonApp([NodeTarget(agent.url)], clock=FakeClock(), refresh_s=3600,
                     client_factory=lambda t: AgentClient(t.url, transport=agent.transport))


def table(app: RigmonApp) -> AlarmTable:
    return app.screen.query_one("#active-alarms", AlarmTable)


def column_ends(app: RigmonApp) -> dict[str, int]:
    """Where each column of the active table ends, in cells from its left edge."""
    t, end, out = table(app), 0, {}
    for column in t.ordered_columns:
        end += column.get_render_width(t)
        out[str(column.key.value)] = end
    return out


def screen_rows(app: RigmonApp) -> list[str]:
    """The screen line of each expected row, found by its time."""
    lines, _ = screen_lines(app)
    return [next(line for line in lines if f"01-01 {at}" in line) for at, _, _ in EXPECTED]


async def open_alarms(app: RigmonApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await wait_for(lambda: app.cluster.nodes[next(iter(app.cluster.nodes))].alarm_list is not None)
    await pilot.press("a")
    await pilot.pause()
    app.refresh_screen()
    await pilot.pause()
    await wait_for(lambda: table(app).row_count == len(EXPECTED))


async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        await pilot.pause()


def check_narrow(app: RigmonApp) -> None:
    t = table(app)
    state = [str(c.key.value) for c in t.ordered_columns].index("state")
    assert [t.get_cell_at((i, state)).plain for i in range(t.row_count)] == [n for _, n, _ in EXPECTED]
    ends = column_ends(app)
    width = t.scrollable_content_region.width
    assert ends["ack"] > width, "at 80 columns the ack column is past the edge"
    # Severity, state, node and since stay whole on screen, and the message starts inside it.
    assert ends["since"] <= 56 and ends["message"] > ends["since"]
    for line, (_, narrow, _) in zip(screen_rows(app), EXPECTED):
        assert f" {narrow} " in line and "node01" in line
        assert ("✓" in line) == ("✓" in narrow)


def check_wide(app: RigmonApp) -> None:
    t = table(app)
    state = [str(c.key.value) for c in t.ordered_columns].index("state")
    assert [t.get_cell_at((i, state)).plain for i in range(t.row_count)] == [w for _, _, w in EXPECTED]
    assert column_ends(app)["ack"] <= t.scrollable_content_region.width, "at 200 columns the ack column is seen"
    rows = screen_rows(app)
    assert "alice" in rows[1] and "operations-team" in rows[2] and "ops[/]" in rows[4]
    assert "✓" not in rows[0] and "✓" in rows[3]


@pytest.mark.parametrize("wide_first", [False, True], ids=["80-then-200", "200-then-80"])
async def test_acknowledged_alarms_are_marked_at_80_columns_and_named_in_the_ack_column_at_200(
        wide_first: bool) -> None:
    # Before: the ack column came after the message; at 80 columns a handled alarm read like
    # one nobody was on, except in the panel for the row under the cursor. Resized either way, the
    # names move between the state column and the ack column as it goes out of view or comes in.
    sizes = [((80, 24), check_narrow), ((200, 50), check_wide)]
    if wide_first:
        sizes.reverse()
    app = dashboard()
    (first, check_first), (then, check_then) = sizes
    async with app.run_test(size=first) as pilot:
        await open_alarms(app, pilot)
        await settle(pilot)
        check_first(app)
        await pilot.resize_terminal(*then)
        await settle(pilot)
        check_then(app)


async def test_a_long_node_name_leaves_the_message_its_room() -> None:
    # With a 15-cell node name, the since column before the message left the message 22 cells
    # at 80 columns, and names in the state cells fewer still: the since column goes after the
    # message (the panel has the time), which keeps its room and the names beside the marks.
    app = dashboard("gpu-node-05.lab")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_alarms(app, pilot)
        await settle(pilot)
        t = table(app)
        keys = [str(c.key.value) for c in t.ordered_columns]
        assert keys[:4] == ["severity", "state", "node", "message"]
        state = keys.index("state")
        assert [t.get_cell_at((i, state)).plain for i in range(t.row_count)] == [n for _, n, _ in EXPECTED]
        ends = column_ends(app)
        assert ends["since"] > t.scrollable_content_region.width
        assert t.scrollable_content_region.width - ends["node"] >= 25
        lines, _ = screen_lines(app)
        assert any("gpu-node-05.lab  Thunderbolt/USB4 link 0-1" in line for line in lines)
        # Wide enough for the since column before the message: it comes back there.
        await pilot.resize_terminal(100, 24)
        await settle(pilot)
        keys = [str(c.key.value) for c in t.ordered_columns]
        assert keys[:5] == ["severity", "state", "node", "since", "message"]
        assert [t.get_cell_at((i, state)).plain for i in range(t.row_count)] == [n for _, n, _ in EXPECTED]
