"""A dashboard over eight seeded fake agents on a frozen clock: six live, one stale, one refused, one 401;
optionally with alarms on some agents, or a replay of a fixed bundle.

node01 sends host-only frames; the others replay recorded frames of real collectors on
simulator trees (GPUs with one lost, rail sags, md arrays, Thunderbolt links), in turn.
"""

from __future__ import annotations

import asyncio

from msgspec.structs import replace
from textual.pilot import Pilot

from rigmon.cluster.client import AgentClient, Backoff
from rigmon.cluster.config import NodeTarget
from rigmon.schema import AlarmList
from rigmon.tui.app import RigmonApp
from tests.tui.snapshot_apps.fake_agent import (
    START_AT,
    FakeAgent,
    FakeClock,
    make_alarm,
)
from tests.tui.snapshot_apps.record_frames import load_frames

#: Frames each fake agent holds before the dashboard connects.
RECORDED_FRAMES = 150
#: Fixtures the nodes after node01 replay, in turn (a fixture shorter than the frames held
#: starts again; the dashboard files frames by arrival, so the wrap is only a jump in the trends).
FIXTURES = ("v100-gpu-lost-rail-sag", "enclosure-link-10g-array-lagging", "raid1-member-failed-recovering",
            "two-raid0-model-load", "strix-usb4-thunderbolt-net", "strix-amd-gpu")


class Fleet:
    """The fake agents of a snapshot dashboard, by URL."""

    def __init__(self, count: int = 8) -> None:
        recorded = {name: load_frames(name) for name in FIXTURES}
        self.agents = {a.url: a for a in (
            FakeAgent(f"node{i:02d}", seed=7, frames=RECORDED_FRAMES,
                      recorded=recorded[FIXTURES[(i - 2) % len(FIXTURES)]] if i > 1 else ())
            for i in range(1, count + 1))}
        self.stale = self.agents[FakeAgent("node03").url]
        refused = self.agents[FakeAgent("node05").url]
        refused.down = True
        locked = self.agents[FakeAgent("node07").url]
        locked.status = 401
        self.failing = (refused, locked)

    def client(self, target: NodeTarget) -> AgentClient:
        return AgentClient(target.url, transport=self.agents[target.url].transport,
                           backoff=Backoff(0.05, 0.05), backfill_frames=RECORDED_FRAMES)

    def targets(self) -> list[NodeTarget]:
        return [NodeTarget(url) for url in self.agents]


def build(theme: str = "rigmon-dark", count: int = 8) -> tuple[RigmonApp, Fleet, FakeClock]:
    """The app, its fake agents and its clock; nothing moves until `settle` runs."""
    fleet = Fleet(count)
    clock = FakeClock()
    # A long refresh interval: the test draws when the data is complete, not on a timer.
    app = RigmonApp(fleet.targets(), clock=clock, theme_name=theme, client_factory=fleet.client, refresh_s=3600)
    return app, fleet, clock


async def wait_for(condition, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """Poll ``condition`` until true (bounded)."""
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)
    await asyncio.wait_for(poll(), timeout_s)


async def settle(app: RigmonApp, fleet: Fleet, clock: FakeClock, pilot: Pilot[None]) -> None:
    """Let every node load its history, age all by 10 s, then give all but node03 one more frame."""
    nodes = app.cluster.nodes
    healthy = [url for url, a in fleet.agents.items() if a not in fleet.failing]
    await wait_for(lambda: all(nodes[u].latest is not None and nodes[u].latest.seq == RECORDED_FRAMES
                               for u in healthy))
    await wait_for(lambda: all(nodes[a.url].error is not None for a in fleet.failing))
    # The cluster rules see the failures now, so they have been failing for exactly 10 s below
    # (node_unreachable fires), however the workers' timing fell.
    app.refresh_screen()
    clock.advance(10)
    for url in healthy:
        if fleet.agents[url] is not fleet.stale:
            fleet.agents[url].publish()
    await wait_for(lambda: all(nodes[u].latest.seq == RECORDED_FRAMES + 1  # type: ignore[union-attr]
                               for u in healthy if fleet.agents[u] is not fleet.stale))
    app.refresh_screen()
    await pilot.pause()


def give_alarms(fleet: Fleet) -> None:
    """Alarms on node01 (critical, and a warning acknowledged by alice), node02 (pending, resolved), node04."""
    agents = {a.node: a for a in fleet.agents.values()}
    agents["node01"].alarms = AlarmList(node="node01", control=True, active=(
        make_alarm("node01", 4, "gpu_lost", "critical", "gpu:3", "GPU 3 is lost (fell off the bus)", at=START_AT + 140),
        replace(make_alarm("node01", 2, "psu_rail_low_warning", "warning", "psu",
                           "12 V rail minimum 11.62 V is below 11.7 V", at=START_AT + 120),
                acknowledged_at=START_AT + 130, acknowledged_by="alice"),
    ), recent=())
    agents["node02"].alarms = AlarmList(node="node02", active=(
        make_alarm("node02", 3, "collector_failing", "warning", "collector:nvme", "collector nvme is failing",
                   state="pending", at=START_AT + 145),
    ), recent=(make_alarm("node02", 1, "psu_rail_low_critical", "critical", "psu",
                          "12 V rail minimum 11.41 V is below 11.5 V", resolved=True, at=START_AT + 60),))
    agents["node04"].alarms = AlarmList(node="node04", active=(), recent=(
        make_alarm("node04", 1, "thunderbolt_degraded", "warning", "tb:0-1", "link 0-1 at 10 Gb/s of 20",
                   resolved=True, at=START_AT + 30),))


async def alarms_listed(app: RigmonApp, fleet: Fleet) -> None:
    """Wait until every agent that has alarms has had them fetched."""
    with_alarms = [a.url for a in fleet.agents.values() if a.alarms is not None]
    await wait_for(lambda: all(app.cluster.nodes[u].alarm_list is not None for u in with_alarms))
