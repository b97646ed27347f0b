"""Pilot tests of the alarms screen, critical news and acknowledging, against real agents on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.cluster.alarm_board import AlarmRow
from rigmon.cluster.client import AgentClient
from rigmon.cluster.config import NodeTarget
from rigmon.schema import AlarmList
from rigmon.sim.rig import running_rig
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.alarms import AlarmsScreen
from rigmon.tui.widgets.alarm_table import AlarmTable
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent, FakeClock, make_alarm

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
        assert any(n.startswith("CRITICAL gpu_lost") for n in notices(app))
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
