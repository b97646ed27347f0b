"""The alarms tables at 80 columns beside a long node name (a fully qualified host name, two agents of
one name told apart by URL): the node column is cut with an ellipsis and, where that is not enough, the
since (fired) column goes after the message, so the message keeps its room and the resolved table's
header its "message"; the panel under the tables names the node whole. At 200 columns nothing gives way."""

from __future__ import annotations

from msgspec.structs import replace

from rigmon.cluster.client import AgentClient
from rigmon.cluster.config import NodeTarget
from rigmon.schema import Alarm, AlarmList
from rigmon.tui.app import RigmonApp
from rigmon.tui.widgets.alarm_detail import AlarmDetail
from rigmon.tui.widgets.alarm_table import NODE_CUT_CELLS, AlarmTable
from tests.tui.snapshot_apps.fake_agent import FakeAgent, FakeClock
from tests.tui.snapshot_apps.hostile import screen_lines
from tests.tui.test_alarm_columns_fit import (
    alarms_screen,
    cells,
    column_ends,
    lost_gpu,
    rail_alarms,
    xid_resolved,
)

#: A node name from an agent: long, and with markup in it that must read as it is.
LONG = "collector-gpu-node-07.rack3[/]lab"


def renamed(alarm: Alarm) -> Alarm:
    return replace(alarm, node=LONG)


class LongNamedAgent(FakeAgent):
    """A `FakeAgent` whose node name is `LONG` (its URL stays a valid one)."""

    @property
    def url(self) -> str:
        return "http://long.test:9871"


def dashboard() -> RigmonApp:
    agent = LongNamedAgent(LONG, frames=3)
    agent.alarms = AlarmList(node=LONG, active=tuple(renamed(a) for a in (*rail_alarms(), lost_gpu())),
                             recent=(renamed(xid_resolved()),))
    return RigmonApp([NodeTarget(agent.url)], clock=FakeClock(), refresh_s=3600,
                     client_factory=lambda t: AgentClient(t.url, transport=agent.transport))


def keys(table: AlarmTable) -> list[str]:
    return [str(column.key.value) for column in table.ordered_columns]


async def test_at_80_columns_a_long_node_name_is_cut_and_the_message_keeps_its_room() -> None:
    app = dashboard()
    async with app.run_test(size=(80, 24)) as pilot:
        active, recent = await alarms_screen(app, pilot, active_rows=2)
        lines, _ = screen_lines(app)
        for table in (active, recent):
            width = table.scrollable_content_region.width
            ends = column_ends(table)
            assert ends["node"] - ends[keys(table)[keys(table).index("node") - 1]] == NODE_CUT_CELLS + 2
            # The message starts with 25 cells or more to the edge; the columns it pushed past are after it.
            assert width - ends[keys(table)[keys(table).index("message") - 1]] >= 25
            assert keys(table).index("since") > keys(table).index("message")
        cut = LONG[:NODE_CUT_CELLS - 1] + "…"
        assert any(f"{cut}  12 V rail minimum 11.255 V" in line for line in lines)
        assert any(f"{cut}  GPU 3 is lost (fell off the bus)" in line for line in lines)
        header = next(line for line in lines if "resolved UTC" in line)
        assert "message" in header.split()
        xid = next(line for line in lines if "Xid 79 on GPU 3" in line)
        assert "01-01 00:01:30 ✓" in xid  # the fired column is past the edge: the resolved time has its date
        # The panel names the node whole, as text.
        detail = app.screen.query_one(AlarmDetail)
        assert detail.display and any(LONG in line for line in lines)


async def test_at_200_columns_a_long_node_name_is_whole_before_the_since_column() -> None:
    app = dashboard()
    async with app.run_test(size=(200, 50)) as pilot:
        active, recent = await alarms_screen(app, pilot, active_rows=2)
        for table in (active, recent):
            assert cells(table, "node") == [LONG] * table.row_count
            assert keys(table).index("since") < keys(table).index("message")
            assert column_ends(table)["rule"] <= table.scrollable_content_region.width
