"""Bundles made from journals (`rigmon snapshot --journal`) replayed: a journal holds only its node's
clock (frames, run records and the file's times alike), so such a bundle cannot date its pulls; a node
whose clock ran ahead then plays ahead of the others, and no node ages past its own last frame for it.

The journals are written by real agents sampling a simulated rig, one of them on a clock that runs
ahead of the others'.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rigmon.agent.agent import Agent
from rigmon.clock import Clock
from rigmon.cluster.replay import NOT_JUDGED, Replay
from rigmon.cluster.store import ClusterStore
from rigmon.sim.rig import SimRig, get_scenario, node_agent_config
from rigmon.snapshot.bundle import write_bundle
from rigmon.snapshot.pull import read_journal
from tests.cluster.test_replay_stale import play

#: How far node02's clock runs ahead of the others' (simulated seconds).
AHEAD_S = 40.0
#: Seconds between two frames: the agents tick on real time, so the rig runs at real speed (on a faster
#: one, frames would be many simulated seconds apart and read stale of their own).
INTERVAL_S = 0.5
#: Frames each agent journals before the rig stops.
FRAMES = 12


class AheadClock:
    """The rig's clock, its wall time ``ahead_s`` ahead (a node whose NTP is off)."""

    def __init__(self, clock: Clock, ahead_s: float) -> None:
        self.clock = clock
        self.ahead_s = ahead_s

    def time(self) -> float:
        return self.clock.time() + self.ahead_s

    def monotonic(self) -> float:
        return self.clock.monotonic()


async def journal_rig(workdir: Path, ahead: dict[str, float]) -> list[Path]:
    """Run a healthy simulated rig of three nodes with a real agent each, the clocks of the nodes in
    ``ahead`` that far ahead, until each has journaled `FRAMES` frames; stop them cleanly and return
    their state directories."""
    rig = SimRig(get_scenario("healthy"), 3, workdir)
    states = [workdir / "state" / node.name for node in rig.nodes]
    agents = [Agent(node_agent_config(node, "127.0.0.1:0", INTERVAL_S, state),
                    clock=AheadClock(rig.clock, ahead.get(node.name, 0.0)))
              for node, state in zip(rig.nodes, states)]
    physics = asyncio.create_task(rig.run())
    try:
        for agent in agents:
            agent.start()
        for _ in range(3000):
            if all(a.journal is not None and a.journal.frames_written >= FRAMES for a in agents):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the agents never journaled enough frames")
    finally:
        for agent in agents:
            await agent.stop()
        physics.cancel()
        await asyncio.gather(physics, return_exceptions=True)
        rig.close()
    return states


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return asyncio.run(journal_rig(tmp_path_factory.mktemp("rig"), {"node02": AHEAD_S}))


def replay_of(path: Path, journals: list[Path]) -> tuple[Replay, ClusterStore]:
    parts = [read_journal(j, 3600.0) for j in journals]
    replay = Replay.open(write_bundle(path, parts, 3600.0, ""))
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    return replay, cluster


def test_a_journal_records_no_clock_but_its_nodes(journals: list[Path]) -> None:
    # Everything a journal holds is its node's clock: nothing dates a pull against the puller's.
    parts = [read_journal(j, 3600.0) for j in journals]
    assert [(p.pulled_at, p.agent_now_at) for p in parts] == [(None, None)] * 3
    assert all(p.frame_count >= FRAMES for p in parts)
    # The agents started together: node02's first frame is stamped AHEAD_S later than node01's.
    node01, node02 = (json.loads(p.frame_lines()[0])["taken_at"] for p in parts[:2])
    assert node02 - node01 == pytest.approx(AHEAD_S, abs=2.0)


def test_a_node_whose_clock_ran_ahead_leaves_the_others_live_at_the_end(tmp_path: Path,
                                                                         journals: list[Path]) -> None:
    replay, cluster = replay_of(tmp_path / "journals.tar.gz", journals)
    assert [c.watched_until for c in replay.clocks] == [None] * 3
    assert replay.notes == NOT_JUDGED
    # node02's frames carry the cursor ~40 s past the others' last frames.
    play(replay, cluster)
    replay.seek(cluster, replay.end_at)
    ends = {cluster.nodes[k].name: replay.frames_until(k)[-1].taken_at for k in replay.keys}
    assert replay.end_at == ends["node02"] and ends["node02"] - ends["node01"] > 30.0
    # Before, node01 and node03 aged from their last frames on and read stale at the end.
    assert {s.name: s.state() for s in cluster.nodes.values()} == \
        {"node01": "live", "node02": "live", "node03": "live"}
    # No cluster alarm is left firing at the end (a gap in a node's own frames on a busy machine may fire
    # node_stale on the way, as it would have live).
    assert cluster.rules.active() == ()
    # No node ages past its own last frame (the bundle knows nothing of it after).
    assert {s.name: s.age_s() for s in cluster.nodes.values()} == {"node01": 0.0, "node02": 0.0, "node03": 0.0}

