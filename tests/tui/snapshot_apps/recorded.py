"""A dashboard over fake agents replaying recorded frames (real collectors on simulator trees), frozen clock."""

from __future__ import annotations

from collections.abc import Sequence

from textual.pilot import Pilot

from rigmon.cluster.client import AgentClient, Backoff
from rigmon.cluster.config import NodeTarget
from rigmon.schema import Frame
from rigmon.tui.app import RigmonApp
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent, FakeClock
from tests.tui.snapshot_apps.record_frames import load_frames


class RecordedFleet:
    """Fake agents by URL, each replaying the first ``count`` frames of its fixture."""

    def __init__(self, nodes: Sequence[tuple[str, Sequence[Frame], int]]) -> None:
        self.agents = {a.url: a for a in (FakeAgent(name, recorded=frames, frames=count)
                                          for name, frames, count in nodes)}

    def client(self, target: NodeTarget) -> AgentClient:
        agent = self.agents[target.url]
        return AgentClient(target.url, transport=agent.transport, backoff=Backoff(0.05, 0.05),
                           backfill_frames=max(len(agent.frames), 1))


def build(nodes: Sequence[tuple[str, str, int]], theme: str = "rigmon-dark") -> tuple[RigmonApp, RecordedFleet, FakeClock]:
    """The app over ``(node name, fixture name, frames)``; nothing moves until `settle` runs."""
    fleet = RecordedFleet([(name, load_frames(fixture), count) for name, fixture, count in nodes])
    clock = FakeClock()
    app = RigmonApp([NodeTarget(url) for url in fleet.agents], clock=clock, theme_name=theme,
                    client_factory=fleet.client, refresh_s=3600)
    return app, fleet, clock


async def settle(app: RigmonApp, fleet: RecordedFleet, pilot: Pilot[None]) -> None:
    """Wait until every node holds all its agent's frames, then draw."""
    nodes = app.cluster.nodes
    await wait_for(lambda: all(nodes[url].latest is not None and nodes[url].latest.seq == len(agent.frames)
                               for url, agent in fleet.agents.items()))
    app.refresh_screen()
    await pilot.pause()


async def open_node(app: RigmonApp, url: str, pilot: Pilot[None]) -> None:
    """Show the node screen of ``url`` and let its boxes draw."""
    app.open_node(url)
    await pilot.pause()
    app.refresh_screen()
    await pilot.pause()
    await pilot.pause()
