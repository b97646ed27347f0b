"""A dashboard over fake agents replaying recorded frames (real collectors on simulator trees), frozen clock."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace
from textual.pilot import Pilot

from rigmon.cluster.client import AgentClient, Backoff
from rigmon.cluster.config import NodeTarget
from rigmon.collectors.psu import RailState
from rigmon.config import PsuSection
from rigmon.schema import Event, Frame
from rigmon.tui.app import RigmonApp
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent, FakeClock
from tests.tui.snapshot_apps.record_frames import load_frames


class RecordedFleet:
    """Fake agents by URL, each holding the first ``count`` of its recorded frames."""

    def __init__(self, nodes: Sequence[tuple[str, Sequence[Frame], int]]) -> None:
        self.agents = {a.url: a for a in (FakeAgent(name, recorded=frames, frames=count)
                                          for name, frames, count in nodes)}

    def client(self, target: NodeTarget) -> AgentClient:
        agent = self.agents[target.url]
        return AgentClient(target.url, transport=agent.transport, backoff=Backoff(0.05, 0.05),
                           backfill_frames=max(len(agent.frames), 1))


def build(nodes: Sequence[tuple[str, str | Sequence[Frame], int]],
          theme: str = "rigmon-dark") -> tuple[RigmonApp, RecordedFleet, FakeClock]:
    """The app over ``(node name, fixture name or frames, frames held)``; nothing moves until `settle` runs."""
    fleet = RecordedFleet([(name, load_frames(source) if isinstance(source, str) else source, count)
                           for name, source, count in nodes])
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


#: An RM1 window whose minimum is 11.384 V (from the PSU collector's tests: a real sag line).
SAG_LINE = ("$RM1,seq=1841,up=1843520,win=1000,n=892,v=11712/11384/11790,i=98250/96100/131400,"
            "vpsu=11902/11655/11960,flags=4*09")


def with_sag(frame: Frame) -> Frame:
    """``frame`` whose rail reading is what the PSU collector makes of `SAG_LINE`."""
    port = frame.readings.psu_rail.port if frame.readings.psu_rail else "/dev/ttyACM0"
    state = RailState(PsuSection(port=port, protocol="rm1"))
    state.opened()
    # The first line after an open is dropped as partial, as on a real port.
    state.feed(b"cut line\r\n" + SAG_LINE.encode() + b"\r\n", 0.0, frame.taken_at)
    return replace(frame, readings=replace(frame.readings, psu_rail=state.reading(0.0, reset=True)))


def v100_frames(count: int = 60) -> list[Frame]:
    """The V100 node: GPU 3 lost, and the last frame a sag to 11.384 V."""
    frames = load_frames("v100-gpu-lost-rail-sag")[:count]
    return frames[:-1] + [with_sag(frames[-1])]


#: Frame (seq) of `ddp_frames` that carries the job's mark.
MARK_SEQ = 16


def ddp_frames(count: int = 46) -> list[Frame]:
    """The V100 node running a DDP job: one worker per GPU from frame 12, HW slowdown and power
    brake while the rail sags, GPU 3 lost at 21 and its worker exiting at 22; frame `MARK_SEQ`
    carries the job's mark "epoch 3 checkpoint" (as POST /v1/marks puts it)."""
    frames = load_frames("v100-ddp-gpu-3-lost")[:count]
    out = []
    for frame in frames:
        if frame.seq == MARK_SEQ:
            mark = Event(id=f"{frame.run_id}-mark", at=frame.taken_at, kind="mark", severity="info",
                         subject=f"node:{frame.node}", message="epoch 3 checkpoint",
                         data={"text": "epoch 3 checkpoint", "by": "train.py"})
            frame = replace(frame, events=(*frame.events, mark))
        out.append(frame)
    return out
