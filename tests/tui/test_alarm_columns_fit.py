"""The alarms tables at any width: beside a long message the columns after it stay on screen at 200
columns (the message cut with an ellipsis, whole in the panel), the resolved table says who
acknowledged, and the room of a long message that went is given back."""

from __future__ import annotations

import re

from msgspec.structs import replace
from textual.app import App, ComposeResult

from rigmon.cluster.alarm_board import AlarmRow
from rigmon.cluster.client import AgentClient
from rigmon.cluster.config import NodeTarget
from rigmon.schema import Alarm, AlarmList
from rigmon.tui.app import RigmonApp
from rigmon.tui.widgets.alarm_detail import AlarmDetail
from rigmon.tui.widgets.alarm_table import RULE_CUT_CELLS, AlarmTable
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import (
    START_AT,
    FakeAgent,
    FakeClock,
    make_alarm,
)
from tests.tui.snapshot_apps.hostile import screen_lines

RAIL = "12 V rail minimum 11.255 V is below 11.5 V: GPUs fall off the bus here"
LATCHED = "the rail ADC's under-voltage comparator latched (it also catches a sag between samples)"


def acked(alarm: Alarm, by: str) -> Alarm:
    return replace(alarm, acknowledged_at=alarm.started_at + 5, acknowledged_by=by)


def rail_alarms() -> tuple[Alarm, ...]:
    """The lab demo's rail incident: one row whose joined message is about 190 cells, acknowledged by alice."""
    return (
        acked(make_alarm("node01", 1, "psu_rail_low_critical", "critical", "psu", RAIL, at=START_AT + 120), "alice"),
        make_alarm("node01", 2, "psu_rail_undervoltage_latched", "critical", "psu", LATCHED, at=START_AT + 121),
        make_alarm("node01", 3, "psu_rail_low_warning", "warning", "psu",
                   "12 V rail minimum 11.255 V is below 11.7 V", at=START_AT + 100),
    )


def lost_gpu() -> Alarm:
    return acked(make_alarm("node01", 4, "gpu_lost", "critical", "gpu:3", "GPU 3 is lost (fell off the bus)",
                            at=START_AT + 140), "bob")


def xid_resolved() -> Alarm:
    return acked(make_alarm("node01", 5, "gpu_xid_fatal", "critical", "gpu:3",
                            "Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus", at=START_AT + 60,
                            resolved=True), "carol")


def dashboard() -> RigmonApp:
    agent = FakeAgent("node01", frames=3)
    agent.alarms = AlarmList(node="node01", active=(*rail_alarms(), lost_gpu()), recent=(xid_resolved(),))
    return RigmonApp([NodeTarget(agent.url)], clock=FakeClock(), refresh_s=3600,
                     client_factory=lambda t: AgentClient(t.url, transport=agent.transport))


def column_ends(table: AlarmTable) -> dict[str, int]:
    """Where each column of ``table`` ends, in cells from its left edge."""
    end, out = 0, {}
    for column in table.ordered_columns:
        end += column.get_render_width(table)
        out[str(column.key.value)] = end
    return out


def cells(table: AlarmTable, column: str) -> list[str]:
    index = [str(c.key.value) for c in table.ordered_columns].index(column)
    return [table.get_cell_at((i, index)).plain for i in range(table.row_count)]


def line_with(app: App[None], text: str) -> str:
    lines, _ = screen_lines(app)
    return next(line for line in lines if text in line)


async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        await pilot.pause()


async def alarms_screen(app, pilot, active_rows: int | None = None) -> tuple[AlarmTable, AlarmTable]:  # type: ignore[no-untyped-def]
    """The alarms screen (``a``) once the node's alarms are in: its active and resolved tables, the
    resolved one holding the lab's one row (and the active one ``active_rows``, when given)."""
    await wait_for(lambda: app.cluster.nodes[next(iter(app.cluster.nodes))].alarm_list is not None)
    await pilot.press("a")
    await pilot.pause()
    app.refresh_screen()
    active = app.screen.query_one("#active-alarms", AlarmTable)
    recent = app.screen.query_one("#recent-alarms", AlarmTable)
    await wait_for(lambda: recent.row_count == 1 and active_rows in (None, active.row_count))
    await settle(pilot)
    return active, recent


async def test_at_200_columns_the_ack_column_is_on_screen_beside_a_long_message_and_names_fold_at_80() -> None:
    # Before: the rail row's message took its whole ~190 cells, so at 200 columns the ack column (and
    # the subject and rule) were past the right edge; the state cell said "firing ✓alice", cut to 8.
    app = dashboard()
    async with app.run_test(size=(200, 50)) as pilot:
        active, recent = await alarms_screen(app, pilot, active_rows=2)
        assert len(cells(active, "message")[1]) > 180  # the lab's rail incident, joined
        for table in (active, recent):
            ends = column_ends(table)
            assert ends["ack"] <= ends["rule"] <= table.scrollable_content_region.width
        assert cells(active, "state") == ["firing ✓", "firing ✓"]  # the names are in the ack column
        rail = line_with(app, "12 V rail minimum 11.255 V")
        assert "alice" in rail and "psu_rail_low_critical" in rail
        assert "…" in rail and "samples" not in rail  # the message is cut; the panel has it whole
        assert "bob" in line_with(app, "GPU 3 is lost")
        assert "carol" in line_with(app, "Xid 79 on GPU 3")  # who acknowledged a resolved alarm
        detail = app.screen.query_one(AlarmDetail)
        active.move_cursor(row=1)
        await settle(pilot)
        assert detail.display and detail.row is not None and detail.row.message.endswith("samples) (a warning "
                                                                                         "since 00:01:40 UTC)")
        # At 80 columns the ack column is past the edge: the state cells name who acknowledged.
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        assert column_ends(active)["ack"] > active.scrollable_content_region.width
        assert cells(active, "state") == ["firing ✓bob", "firing ✓alice"]
        assert " firing ✓alice " in line_with(app, "firing ✓alice")
        # And back at 200 the ack column says it again.
        await pilot.resize_terminal(200, 50)
        await settle(pilot)
        assert cells(active, "state") == ["firing ✓", "firing ✓"]
        assert column_ends(active)["ack"] <= active.scrollable_content_region.width
        assert "alice" in line_with(app, "12 V rail minimum 11.255 V")


class Host(App[None]):
    """An active alarms table alone."""

    def compose(self) -> ComposeResult:
        yield AlarmTable(id="active")


async def test_the_room_of_a_long_message_that_went_is_given_back() -> None:
    # Before: Textual's column as wide as its content keeps the widest content it ever held; once the
    # rail's row left, the message column stayed ~190 cells wide, and at 200 columns the ack column was
    # past the edge while the state cells named nobody (every column fitted, by the widths of what was listed).
    app = Host()
    async with app.run_test(size=(80, 20)) as pilot:
        table = app.query_one(AlarmTable)
        rail = AlarmRow("n1", "node01", "node", rail_alarms()[0], also=rail_alarms()[1:])
        lost = AlarmRow("n1", "node01", "node", lost_gpu())
        table.alarms = (lost, rail)
        await settle(pilot)
        table.alarms = (lost,)
        await settle(pilot)
        await pilot.resize_terminal(200, 20)
        await settle(pilot)
        ends = column_ends(table)
        assert ends["message"] - ends["since"] == len("GPU 3 is lost (fell off the bus)") + 2
        assert ends["ack"] <= table.scrollable_content_region.width
        assert "bob" in line_with(app, "GPU 3 is lost")


async def test_a_grouped_rows_rules_are_cut_before_its_message() -> None:
    # Before: the rail row's three rules (~75 cells) stayed whole at 200 columns and the message was
    # cut to ~47 cells; the rules are cut first (the panel has them whole), the message keeps the rest.
    app = Host()
    async with app.run_test(size=(200, 20)) as pilot:
        table = app.query_one(AlarmTable)
        table.alarms = (AlarmRow("n1", "node01", "node", rail_alarms()[0], also=rail_alarms()[1:]),)
        await settle(pilot)
        ends = column_ends(table)
        width = table.scrollable_content_region.width
        assert ends["rule"] <= width and ends["rule"] - ends["subject"] == RULE_CUT_CELLS + 2
        assert ends["message"] - ends["since"] == width - (ends["rule"] - ends["message"]) - ends["since"]
        assert cells(table, "rule")[0].startswith("psu_rail_low_critical, ")
        line = line_with(app, "12 V rail minimum")
        assert "psu_rail_low_critical" in line and "psu_rail_low_warning" not in line and "…" in line
        # Wide enough for the whole message, the rules keep what is left (and at least their cut).
        await pilot.resize_terminal(300, 20)
        await settle(pilot)
        ends = column_ends(table)
        assert ends["message"] - ends["since"] == len(cells(table, "message")[0]) + 2
        assert RULE_CUT_CELLS + 2 <= ends["rule"] - ends["subject"] and ends["rule"] <= table.scrollable_content_region.width


async def test_at_80_columns_the_resolved_table_names_who_acknowledged_in_its_resolved_cells() -> None:
    # Before: the resolved table had no state column to fold the name into, so at 80 columns its ack
    # column was past the edge and a resolved row did not say whether anyone had been on it.
    app = dashboard()
    async with app.run_test(size=(80, 24)) as pilot:
        _, recent = await alarms_screen(app, pilot)
        width = recent.scrollable_content_region.width
        ends = column_ends(recent)
        assert ends["ack"] > width and ends["resolved"] + 25 <= width  # the message keeps its 25 cells
        assert cells(recent, "resolved") == ["00:01:30 ✓carol"]  # the date is the fired column's
        assert "00:01:30 ✓carol  Xid 79 on GPU 3" in line_with(app, "Xid 79 on GPU 3")
        # At 200 columns the ack column says who, and the resolved cell keeps only the mark.
        await pilot.resize_terminal(200, 50)
        await settle(pilot)
        assert cells(recent, "resolved") == ["00:01:30 ✓"]
        assert column_ends(recent)["ack"] <= recent.scrollable_content_region.width
        assert "carol" in line_with(app, "Xid 79 on GPU 3")


async def test_with_nothing_firing_the_panel_tells_the_newest_resolved_alarm() -> None:
    # Before: at 80 columns, nothing firing, the panel said "no alarm under the cursor" while the
    # resolved rows' messages were cut at the edge mid-figure ("link thunderbolt0 runs at 200").
    agent = FakeAgent("node01", frames=3)
    agent.alarms = AlarmList(node="node01", active=(), recent=(xid_resolved(),))
    app = RigmonApp([NodeTarget(agent.url)], clock=FakeClock(), refresh_s=3600,
                    client_factory=lambda t: AgentClient(t.url, transport=agent.transport))
    async with app.run_test(size=(80, 24)) as pilot:
        _, recent = await alarms_screen(app, pilot)
        detail = app.screen.query_one(AlarmDetail)
        assert detail.display and detail.row is not None and detail.row.alarm.rule == "gpu_xid_fatal"
        assert "GPU has fallen off the bus" in line_with(app, "fallen off")
        await pilot.press("x")  # a resolved alarm is not acknowledged
        await settle(pilot)
        assert app.is_running


#: A rail alarm whose message runs past the right edge at 80 columns, a figure where the edge falls.
FIGURES = "rail 12.061 V idling, minimum 11.608 V at 2.41 kW as 4 GPUs ramped (DDP start), below 11.7 V for 3.2 s"


async def test_at_80_columns_a_message_past_the_edge_ends_in_an_ellipsis_never_in_a_cut_figure() -> None:
    # Before: with the columns after the message past the edge, the message was whole and the edge cut
    # it anywhere, here inside a figure ("minimum 11.60" of "11.608 V"), with nothing to say it was cut.
    agent = FakeAgent("node01", frames=3)
    agent.alarms = AlarmList(node="node01", active=(make_alarm("node01", 1, "psu_rail_low_warning", "warning",
                                                               "psu", FIGURES, at=START_AT + 100),), recent=())
    app = RigmonApp([NodeTarget(agent.url)], clock=FakeClock(), refresh_s=3600,
                    client_factory=lambda t: AgentClient(t.url, transport=agent.transport))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: app.cluster.nodes[next(iter(app.cluster.nodes))].alarm_list is not None)
        await pilot.press("a")
        await pilot.pause()
        app.refresh_screen()
        active = app.screen.query_one("#active-alarms", AlarmTable)
        await wait_for(lambda: active.row_count == 1)
        await settle(pilot)
        row = line_with(app, "rail 12.061 V").rstrip()
        assert len(row) <= 80 and row.endswith("…")
        shown = row[row.index("rail 12.061 V"):-1]
        assert FIGURES.startswith(shown) and len(shown) >= 25
        # Every figure shown whole is one of the message's; only the one the ellipsis ends may be cut.
        assert set(re.findall(r"\d+(?:\.\d+)?(?![\d.…])", row[row.index("rail"):])) <= set(
            re.findall(r"\d+(?:\.\d+)?", FIGURES))
