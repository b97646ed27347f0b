"""Hostile strings walked over every screen (issue 15, items 2 and 3).

Device, GPU, NVMe and md names, event subjects and messages, alarm texts, an acknowledgement's
``by``, collector errors, node names and a refusal's reason carry Rich markup, OSC title and
clipboard writes, CSI clears, C1 controls and bidi overrides. On the cluster, node, alarms
(wide and narrow, with the detail panel), help and command-palette screens, in toasts and in
a replay: the dashboard keeps running, the markup reads literally, the controls read as
escapes, and nothing but Textual's own colours and cursor moves is written to the terminal.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace
from textual.pilot import Pilot

from rigmon.cluster import export
from rigmon.cluster.client import AgentClient, Backoff
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.replay import Replay
from rigmon.schema import Event
from rigmon.snapshot.bundle import NodePart, frames_gzip, write_bundle
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.alarms import AlarmsScreen
from rigmon.tui.screens.help import HelpScreen
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.widgets.alarm_detail import AlarmDetail
from rigmon.tui.widgets.alarm_table import AlarmTable
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import START_AT, FakeAgent, FakeClock
from tests.tui.snapshot_apps.hostile import (
    ALARM_MESSAGE,
    ALARM_SUBJECT,
    BY,
    NODE,
    PAYLOAD,
    REASON,
    VISIBLE,
    HostileAgent,
    RefusingAgent,
    assert_clean,
    hostile_alarm,
    hostile_alarms,
    hostile_frames,
)

WIDE = (200, 60)
#: Tall enough for every box of the node screen at once.
TALL = (200, 220)


def dashboard(*agents: FakeAgent, control_token: str | None = None,
              export_dir: Path | None = None) -> tuple[RigmonApp, FakeClock]:
    by_url = {a.url: a for a in agents}
    clock = FakeClock()

    def client(target: NodeTarget) -> AgentClient:
        return AgentClient(target.url, control_token=target.control_token, transport=by_url[target.url].transport,
                           backoff=Backoff(0.01, 0.02), backfill_frames=200)

    targets = [NodeTarget(a.url, control_token=control_token) for a in agents]
    return RigmonApp(targets, clock=clock, client_factory=client, refresh_s=3600, alarm_poll_s=3600,
                     export_dir=export_dir), clock


def notices(app: RigmonApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def shown(app: RigmonApp, pilot: Pilot[None], *names: str, also: tuple[str, ...] = ()) -> str:
    """Redraw, wait until the screen shows the `VISIBLE` form of each of ``names`` (and the
    ``also`` strings), check it, and return its text."""
    wanted = [VISIBLE[name] for name in names] + list(also)
    app.refresh_screen()
    for _ in range(100):
        await pilot.pause(0.05)
        text = assert_clean(app)
        missing = [w for w in wanted if w not in text]
        if not missing:
            return text
    raise AssertionError(f"not on screen: {missing!r}\n{text}")


async def test_hostile_strings_on_every_screen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    frames = hostile_frames()
    agent = HostileAgent(frames)
    agent.alarms = hostile_alarms()
    agent.control_token = "ctl"
    refusing = RefusingAgent("refusing")
    app, clock = dashboard(agent, refusing, control_token="ctl", export_dir=tmp_path)
    async with app.run_test(size=WIDE, notifications=True) as pilot:
        store = app.cluster.nodes[agent.url]
        await wait_for(lambda: store.latest is not None and store.latest.seq == len(frames)
                       and store.alarm_list is not None and app.cluster.nodes[refusing.url].error is not None)
        clock.advance(20)  # the refusing node turns unreachable: its reason is on its row
        agent.publish()
        await wait_for(lambda: store.latest is not None and store.latest.seq == len(frames) + 1)

        await shown(app, pilot, "node", "reason")  # the cluster screen

        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert_clean(app)
        await pilot.press("escape")

        app.open_node(agent.url)
        await pilot.resize_terminal(*TALL)
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        await shown(app, pilot, "node", "tb_name", "tb_vendor", "gpu_name", "event_subject", "event_message",
                    "collector_error", "nvme_model", "md_name")
        await pilot.resize_terminal(80, 24)
        await shown(app, pilot)

        await pilot.resize_terminal(*WIDE)
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlarmsScreen)
        await shown(app, pilot, "node", "alarm_message", "alarm_subject", "by")

        # 80 columns: the ack and message columns are off-screen, the detail panel shows them.
        await pilot.resize_terminal(80, 24)
        await shown(app, pilot, "by", "alarm_message")
        detail = app.screen.query_one(AlarmDetail)
        assert detail.display and detail.row is not None and detail.row.alarm.acknowledged_by is not None

        # A new critical alarm: the toast and the bell.
        bells: list[int] = []
        monkeypatch.setattr(app, "bell", lambda: bells.append(1))
        news = hostile_alarm(9, "gpu_lost" + PAYLOAD, "critical", "gpu:[/]3" + PAYLOAD, "GPU lost " + PAYLOAD)
        alarms = hostile_alarms()
        agent.alarms = replace(alarms, active=(news, *alarms.active))
        app.followers.alarm_wake[agent.url].set()
        # At 80x24 the toast is one line, title and all; at the wide size the usual toast again.
        await wait_for(lambda: any(n.startswith(": CRITICAL ") for n in notices(app)))
        assert bells
        await pilot.resize_terminal(*WIDE)
        await shown(app, pilot, also=("▌ CRITICAL", "▌ gpu_lost[/]"))  # the toast

        # Acknowledge the pending alarm: the agent answers with a hostile `by`.
        app.ack_by = BY
        table = app.screen.query_one("#active-alarms", AlarmTable)
        table.focus()
        target = next(i for i, r in enumerate(table.alarms) if r.source == "node" and r.alarm.state == "pending")
        table.move_cursor(row=target)
        await pilot.press("x")
        await wait_for(lambda: any(n.startswith("Acknowledged") for n in notices(app)))
        acknowledged = next(n for n in notices(app) if n.startswith("Acknowledged"))
        assert VISIBLE["by"] in acknowledged and "\x1b" not in acknowledged
        await shown(app, pilot, "by", also=("Acknowledged",))

        # The export's notifications name nodes it waits for (a busy agent) and whose pull failed, and why.
        async def failed_pull(targets: object, since_s: float, note: Any = None) -> list[NodePart]:
            note(NODE, "the agent is busy with other exports (503); asking again in 5 s (retry 1 of 4)")
            return [NodePart(node=NODE, source=agent.url, error=REASON)]

        # The export code is imported when the key is pressed: patch it where it lives.
        monkeypatch.setattr(export, "pull_targets", failed_pull)
        await pilot.press("e")
        await wait_for(lambda: any(n.startswith("Exported") for n in notices(app)), timeout_s=20)
        exported = next(n for n in notices(app) if n.startswith("Exported"))
        assert VISIBLE["reason"] in exported and "\x1b" not in exported
        waited = next(n for n in notices(app) if "busy with other exports" in n)
        assert VISIBLE["node"] in waited and "\x1b" not in waited
        assert_clean(app)

        # The command palette lists every node by name: offered with nothing typed, then found.
        await pilot.press("ctrl+p")
        await shown(app, pilot, also=("Open node rig[/]01",))
        await pilot.press(*"rig")
        await shown(app, pilot, also=("Open node rig[/]01",))
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running


async def test_hostile_replay_bundle(tmp_path: Path) -> None:
    frames = [replace(f, node=NODE) for f in hostile_frames(30)]
    # An alarm that fires in the recording (a replay rebuilds alarms from these events).
    firing = Event(id="a1", at=frames[10].taken_at, kind="alarm_firing", severity="critical", subject=ALARM_SUBJECT,
                   message="psu_rail_low_critical firing: " + ALARM_MESSAGE,
                   data={"alarm_id": "a1", "rule": "psu_rail_low_critical", "severity": "critical",
                         "state": "firing", "value": None})
    frames[10] = replace(frames[10], events=frames[10].events + (firing,))
    part = NodePart(node=NODE, source=f"http://x.test/{PAYLOAD}", from_at=frames[0].taken_at,
                    to_at=frames[-1].taken_at, latest=frames[-1], frames_gz=frames_gzip(frames),
                    frame_count=len(frames))
    path = write_bundle(tmp_path / "evil[-]\x1b]0;t\x07.tar.gz", [part], 600.0, "# report\n",
                        created_at=START_AT + 100)
    replay = Replay.open(path)
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=WIDE, notifications=True) as pilot:
        await pilot.press("space")  # pause
        replay.seek(app.cluster, replay.end_at)
        await shown(app, pilot, "node", also=(r"replay evil[-]\x1b]0;t\x07.tar.gz",))
        key = next(iter(app.cluster.nodes))
        app.open_node(key)
        await pilot.resize_terminal(*TALL)
        await pilot.pause()
        await shown(app, pilot, "tb_name", "gpu_name", "event_message", "md_name",
                    also=(r"http://x.test/[/]\x1b]0;pwned\x07",))
        await pilot.resize_terminal(*WIDE)
        await pilot.press("a")
        await pilot.pause()
        await shown(app, pilot, "node", "alarm_message", "alarm_subject")
        assert app.is_running
