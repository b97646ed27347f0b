"""Pilot tests of the alarms screen, critical news and acknowledging, against real agents on loopback."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from msgspec.structs import replace
from rich.console import Console

from rigmon.cluster.alarm_board import AlarmRow
from rigmon.cluster.client import AgentClient
from rigmon.cluster.config import NodeTarget
from rigmon.schema import AlarmList
from rigmon.sim.rig import running_rig
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.alarms import AlarmsScreen
from rigmon.tui.widgets.alarm_detail import AlarmDetail
from rigmon.tui.widgets.alarm_table import AlarmTable
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import START_AT, FakeAgent, FakeClock, make_alarm

SIZE = (160, 50)
CONTROL_TOKEN = "control-s3cret"


def control_token_file(tmp_path: Path) -> Path:
    path = tmp_path / "control.token"
    path.write_text(CONTROL_TOKEN + "\n")
    path.chmod(0o600)
    return path


def active_rows(app: RigmonApp) -> tuple[AlarmRow, ...]:
    return app.screen.query_one("#active-alarms", AlarmTable).alarms


def firing(app: RigmonApp, rule: str) -> AlarmRow | None:
    return next((r for r in active_rows(app) if r.alarm.rule == rule and r.alarm.state == "firing"), None)


def notices(app: RigmonApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


@pytest.fixture
async def rig(tmp_path: Path):  # type: ignore[no-untyped-def]
    extra = {"agent": {"control_token_file": str(control_token_file(tmp_path))}}
    async with running_rig("undervolt-bus-drop", 1, base_port=0, speed=5, workdir=tmp_path / "rig",
                           extra_config=extra) as running:
        yield running


async def test_alarms_screen_rings_for_critical_and_acknowledges(rig, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    url = rig.urls[0]
    app = RigmonApp([NodeTarget(url, control_token=CONTROL_TOKEN)], refresh_s=0.2, alarm_poll_s=0.5)
    bells: list[int] = []
    monkeypatch.setattr(app, "bell", lambda: bells.append(1))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlarmsScreen)
        await wait_for(lambda: firing(app, "gpu_lost") is not None, timeout_s=40)
        rules = {r.alarm.rule for r in active_rows(app)}
        assert rules & {"psu_rail_low_warning", "psu_rail_low_critical"}
        assert bells, "a critical alarm rang the bell"
        # The lost GPU's alarm is announced, alone or in one toast with the others of the incident.
        assert any(n.startswith("CRITICAL") and "GPU 3 is lost" in n for n in notices(app))
        # The cluster screen counts the node's firing alarms in its ⚠ column.
        store = app.cluster.nodes[url]
        view = next(v for v in app.cluster.views() if v.key == url)
        assert view.summary is not None and view.summary.alarms is not None and view.summary.alarms >= 1
        assert store.alarm_list is not None and store.alarm_list.control

        table = app.screen.query_one("#active-alarms", AlarmTable)
        target = firing(app, "gpu_lost")
        assert target is not None
        table.move_cursor(row=list(active_rows(app)).index(target))
        await pilot.press("x")
        await wait_for(lambda: any(a.id == target.alarm.id and a.acknowledged_at is not None
                                   for a in store.alarm_list.active + store.alarm_list.recent))  # type: ignore[union-attr]
        assert any(n.startswith("Acknowledged") for n in notices(app))


async def test_acknowledge_refused_is_a_notification_saying_why(rig) -> None:  # type: ignore[no-untyped-def]
    url = rig.urls[0]
    app = RigmonApp([NodeTarget(url, control_token="wrong")], refresh_s=0.2, alarm_poll_s=0.5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await wait_for(lambda: any(r.source == "node" for r in active_rows(app)), timeout_s=40)
        table = app.screen.query_one("#active-alarms", AlarmTable)
        await wait_for(lambda: table.selected() is not None)
        await pilot.press("x")
        await wait_for(lambda: any(n.startswith("Acknowledge refused") for n in notices(app)))
        assert any("401 unauthorized: missing or wrong control token" in n for n in notices(app))
        store = app.cluster.nodes[url]
        assert all(a.acknowledged_at is None for a in store.alarm_list.active)  # type: ignore[union-attr]


async def test_read_only_agent_and_cluster_alarm_acknowledgements() -> None:
    agent = FakeAgent("node01", frames=3)
    agent.alarms = AlarmList(node="node01", active=(make_alarm("node01", 1, "gpu_lost", "critical", "gpu:3", "lost"),),
                             recent=())
    down = FakeAgent("node02")
    down.down = True
    agents = {a.url: a for a in (agent, down)}
    clock = FakeClock()
    app = RigmonApp([NodeTarget(agent.url, control_token="ctl"), NodeTarget(down.url)], clock=clock, refresh_s=3600,
                    client_factory=lambda t: AgentClient(t.url, control_token=t.control_token,
                                                         transport=agents[t.url].transport))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.cluster.nodes[agent.url].alarm_list is not None
                       and app.cluster.nodes[down.url].error is not None)
        app.refresh_screen()
        clock.advance(11)
        agent.publish()  # node01 keeps sampling; only node02 is in trouble
        await wait_for(lambda: app.cluster.nodes[agent.url].latest.seq == 4)  # type: ignore[union-attr]
        await pilot.press("a")
        await pilot.pause()
        assert [(r.source, r.alarm.rule) for r in active_rows(app)] == [
            ("cluster", "node_unreachable"), ("node", "gpu_lost")]
        await pilot.press("down", "x")  # the agent has no control token: 403
        await wait_for(lambda: any(n.startswith("Acknowledge refused") for n in notices(app)))
        assert any("403 forbidden: this agent is read-only" in n for n in notices(app))
        await pilot.press("up", "x")  # a cluster alarm is acknowledged in the dashboard
        await wait_for(lambda: any(n.startswith("Acknowledged") for n in notices(app)))
        assert app.cluster.rules.active()[0].acknowledged_by == app.ack_by


def detail_text(app: RigmonApp) -> str:
    detail = app.screen.query_one(AlarmDetail)
    console = Console(width=detail.content_size.width, color_system=None, file=io.StringIO(), record=True)
    console.print(detail.render())
    return console.export_text()


async def test_a_narrow_screen_shows_the_alarm_under_the_cursor_in_full() -> None:
    agent = FakeAgent("node02", frames=3)
    agent.alarms = AlarmList(node="node02", active=(
        make_alarm("node02", 1, "gpu_lost", "critical", "gpu:3", "GPU 3 is lost (fell off the bus)", at=START_AT + 140),
        replace(make_alarm("node02", 2, "psu_rail_low_warning", "warning", "psu",
                           "12 V rail minimum 11.62 V is below 11.7 V", at=START_AT + 120),
                acknowledged_at=START_AT + 130, acknowledged_by="alice"),
    ), recent=(make_alarm("node02", 3, "thunderbolt_degraded", "warning", "link:0-1",
                          "Thunderbolt/USB4 link link:0-1 is degraded: re-plug both ends", resolved=True,
                          at=START_AT + 30),))
    clock = FakeClock()
    app = RigmonApp([NodeTarget(agent.url)], clock=clock, refresh_s=3600,
                    client_factory=lambda t: AgentClient(t.url, transport=agent.transport))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: app.cluster.nodes[agent.url].alarm_list is not None)
        await pilot.press("a")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()
        detail = app.screen.query_one(AlarmDetail)
        assert detail.display, "at 80 columns the message and ack columns are off-screen"
        shown = detail_text(app)
        assert "critical firing  node02  gpu_lost  gpu:3" in shown
        assert "since 01-01 00:02:20 UTC  not acknowledged" in shown
        assert "GPU 3 is lost (fell off the bus)" in shown
        await pilot.press("down")
        shown = detail_text(app)
        assert "12 V rail minimum 11.62 V is below 11.7 V" in shown
        assert "acknowledged by alice 01-01 00:02:10 UTC" in shown
        await pilot.press("tab")  # the resolved alarms
        await pilot.pause()
        shown = detail_text(app)
        assert "warning resolved  node02  thunderbolt_degraded  link:0-1" in shown
        assert "fired 01-01 00:00:30 UTC  resolved 01-01 00:01:00 UTC" in shown
        assert "re-plug both ends" in shown
        # Wide enough for every column: the tables alone, as before.
        await pilot.resize_terminal(200, 40)
        await pilot.pause()
        await pilot.pause()
        assert not detail.display


async def test_an_incident_is_one_row_read_message_first_at_80_columns() -> None:
    agent = FakeAgent("node01", frames=3)
    agent.alarms = AlarmList(node="node01", active=(
        make_alarm("node01", 1, "psu_rail_low_warning", "warning", "psu", "12 V rail minimum 11.26 V is below 11.7 V",
                   at=START_AT + 100),
        make_alarm("node01", 2, "psu_rail_low_critical", "critical", "psu",
                   "12 V rail minimum 11.26 V is below 11.5 V: GPUs fall off the bus here", at=START_AT + 100),
        replace(make_alarm("node01", 3, "gpu_xid_fatal", "critical", "gpu:3",
                           "Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus", at=START_AT + 105),
                rule_kind="event"),
        make_alarm("node01", 4, "gpu_lost", "critical", "gpu:3", "GPU 3 is lost (fell off the bus)",
                   at=START_AT + 105.2),
    ), recent=())
    app = RigmonApp([NodeTarget(agent.url)], clock=FakeClock(), refresh_s=3600,
                    client_factory=lambda t: AgentClient(t.url, transport=agent.transport))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: app.cluster.nodes[agent.url].alarm_list is not None)
        await pilot.press("a")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()
        rows = active_rows(app)
        # The rail warning and its critical are one row, as are the Xid 79 and the GPU it lost.
        assert [(r.alarm.rule, [a.rule for a in r.also]) for r in rows] == [
            ("gpu_lost", ["gpu_xid_fatal"]), ("psu_rail_low_critical", ["psu_rail_low_warning"])]
        assert rows[0].message == ("GPU 3 is lost (fell off the bus); "
                                   "Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus")
        assert rows[1].message == "12 V rail minimum 11.26 V is below 11.5 V: GPUs fall off the bus here"
        table = app.screen.query_one("#active-alarms", AlarmTable)
        keys = [str(c.key.value) for c in table.ordered_columns]
        assert keys[:5] == ["severity", "state", "node", "since", "message"]
        widths = [c.get_render_width(table) for c in table.ordered_columns]
        # Severity, state, node and the whole time fit, and the message starts well inside 80 columns.
        assert sum(widths[:4]) <= 48
        assert "01-01 00:01:45" in str(table.get_cell_at((0, 3)))


async def test_the_cursor_stays_on_its_incident_when_the_row_s_lead_alarm_resolves() -> None:
    # The cursor on node01's rail row (critical leading, the warning under it), and the
    # critical resolves: the row is now led by the warning, sorted below node03's link
    # warning. `x` must still acknowledge the rail, not the link that moved under the cursor.
    from textual.app import App, ComposeResult

    gpu = make_alarm("node01", 1, "gpu_lost", "critical", "gpu:3", "GPU 3 is lost", at=START_AT + 106)
    critical = make_alarm("node01", 2, "psu_rail_low_critical", "critical", "psu", "rail below 11.5 V",
                          at=START_AT + 101)
    warning = make_alarm("node01", 3, "psu_rail_low_warning", "warning", "psu", "rail below 11.7 V",
                         at=START_AT + 100)
    link = make_alarm("node03", 4, "thunderbolt_degraded", "warning", "link:0-1", "link below its speed",
                      at=START_AT + 110)
    before = (AlarmRow("n1", "node01", "node", gpu), AlarmRow("n1", "node01", "node", critical, also=(warning,)),
              AlarmRow("n3", "node03", "node", link))
    after = (AlarmRow("n1", "node01", "node", gpu), AlarmRow("n3", "node03", "node", link),
             AlarmRow("n1", "node01", "node", warning))

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield AlarmTable()

    app = Host()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(AlarmTable)
        table.alarms = before
        await pilot.pause()
        table.move_cursor(row=1)
        selected = table.selected()
        assert selected is not None and selected.alarm.rule == "psu_rail_low_critical"
        table.alarms = after
        await pilot.pause()
        selected = table.selected()
        assert selected is not None and selected.alarm.rule == "psu_rail_low_warning"


async def test_pending_or_firing_is_on_every_row_at_80_columns() -> None:
    # Before, the state column came after the message: at 80 columns it was past the edge, and a
    # pending alarm read like a firing one except in the panel for the row under the cursor.
    agent = FakeAgent("gpu-node-05.lab", frames=3)
    agent.alarms = AlarmList(node=agent.node, active=(
        make_alarm(agent.node, 1, "gpu_lost", "critical", "gpu:3", "GPU 3 is lost (fell off the bus)",
                   at=START_AT + 140),
        make_alarm(agent.node, 2, "psu_rail_low_warning", "warning", "psu", "12 V rail minimum 11.62 V is below 11.7 V",
                   state="pending", at=START_AT + 120),
    ), recent=())
    app = RigmonApp([NodeTarget(agent.url)], clock=FakeClock(), refresh_s=3600,
                    client_factory=lambda t: AgentClient(t.url, transport=agent.transport))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: app.cluster.nodes[agent.url].alarm_list is not None)
        await pilot.press("a")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()
        table = app.screen.query_one("#active-alarms", AlarmTable)
        keys = [str(c.key.value) for c in table.ordered_columns]
        widths = [c.get_render_width(table) for c in table.ordered_columns]
        state = keys.index("state")
        assert sum(widths[:state + 1]) <= table.scrollable_content_region.width
        assert [table.get_cell_at((i, state)).plain for i in range(table.row_count)] == ["firing", "pending"]
        # ... and the message still starts well inside the screen.
        assert sum(widths[:keys.index("message")]) <= 56


async def test_acknowledging_a_grouped_row_is_one_toast_saying_how_many() -> None:
    # Before: one "Acknowledged" toast per alarm of the row (three for three NVLinks of one GPU).
    agent = FakeAgent("node01", frames=3)
    agent.control_token = "ctl"
    links = ("nvlink_crc_rising", "nvlink_replay_rising", "pcie_replay_rising")
    agent.alarms = AlarmList(node="node01", active=tuple(
        make_alarm("node01", n, rule, "warning", "gpu:0", f"{rule} on GPU 0", at=START_AT + 100 + n)
        for n, rule in enumerate(links, 1)) + tuple(
        make_alarm("node01", n, rule, "warning", "gpu:1", f"{rule} on GPU 1", at=START_AT + 200 + n)
        for n, rule in enumerate(links, 4)), recent=())
    app = RigmonApp([NodeTarget(agent.url, control_token="ctl")], clock=FakeClock(), refresh_s=3600,
                    client_factory=lambda t: AgentClient(t.url, control_token=t.control_token,
                                                         transport=agent.transport))
    app.ack_by = "alice"
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.cluster.nodes[agent.url].alarm_list is not None)
        await pilot.press("a")
        await pilot.pause()
        rows = active_rows(app)
        assert [(r.alarm.subject, len(r.alarms)) for r in rows] == [("gpu:1", 3), ("gpu:0", 3)]
        await pilot.press("x")
        await wait_for(lambda: any(n.startswith("Acknowledged") for n in notices(app)))
        await pilot.pause()
        assert all(a.acknowledged_by == "alice" for a in agent.alarms.active if a.subject == "gpu:1")
        assert [n for n in notices(app) if n.startswith("Acknowledged")] == [
            "Acknowledged: 3 alarms on node01 gpu:1 (nvlink_crc_rising, nvlink_replay_rising, pcie_replay_rising)"
            " by alice"]
        # One alarm of the other row is gone from its agent: its failure is said, the others are acknowledged.
        agent.alarms = replace(agent.alarms, active=tuple(a for a in agent.alarms.active if a.id != "node01-run1-a2"))
        app._notifications.clear()
        await pilot.press("down", "x")
        await wait_for(lambda: any(n.startswith("Acknowledged") for n in notices(app)))
        await pilot.pause()
        assert sorted(notices(app)) == [
            "Acknowledge failed: nvlink_replay_rising on node01 gpu:0: HTTP 404: no alarm node01-run1-a2",
            "Acknowledged: 2 alarms on node01 gpu:0 (nvlink_crc_rising, pcie_replay_rising) by alice"]
