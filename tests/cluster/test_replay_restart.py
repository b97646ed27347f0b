"""Replay across an agent restart, from real journals: the old run's firing alarms end with the run
unless the new run restored them from its alarm state file."""

from __future__ import annotations

from pathlib import Path

from rigmon.agent.alarm_state import STATE_FILE_NAME
from rigmon.cluster.replay import Replay
from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Alarm
from rigmon.snapshot.bundle import write_bundle
from rigmon.snapshot.pull import read_journal
from tests.agent.test_alarm_state import make_agent, settle
from tests.agent.test_alarms import wait_for
from tests.alarms.helpers import T0, FakeClock


async def recorded(tmp_path: Path, keep_state: bool) -> tuple[Path, str, str]:
    """A bundle of one node's journal: run A fires ``hot`` and stops; with ``keep_state`` run B
    starts from A's alarm state file, else from none (wiped, or A crashed before writing it); the
    probe stays hot throughout. Returns the bundle and both run ids."""
    clock = FakeClock(T0)
    state = tmp_path / "state"
    first, probe = make_agent(state, clock)
    first.app()
    first.start()
    await wait_for(lambda: probe.push is not None)
    for t in (0.0, 10.0, 20.0):
        await settle(first, clock, t, probe, probe=95.0, lug=40.0, link=40.0)
    assert [a.rule for a in first.alarms.engine.active()] == ["hot"]
    await first.stop()
    if not keep_state:
        (state / STATE_FILE_NAME).unlink()
    clock.t = T0 + 100.0
    second, probe = make_agent(state, clock)
    second.app()
    second.start()
    await wait_for(lambda: probe.push is not None)
    for t in (100.0, 110.0, 120.0):
        await settle(second, clock, t, probe, probe=95.0, lug=40.0, link=40.0)
    await second.stop()
    bundle = write_bundle(tmp_path / "b.tar.gz", [read_journal(state, 3600.0)], 3600.0, "", created_at=T0 + 200)
    return bundle, first.run_id, second.run_id


def replay_of(bundle: Path) -> tuple[Replay, ClusterStore, NodeStore]:
    replay = Replay.open(bundle)
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    return replay, cluster, cluster.nodes[replay.keys[0]]


def hot(alarms: tuple[Alarm, ...]) -> list[tuple[str, str]]:
    return [(a.id.split("-a")[0], a.state) for a in alarms if a.rule == "hot"]


async def test_an_agent_restarted_without_its_state_ends_the_old_runs_alarms(tmp_path: Path) -> None:
    # Before: the old run's "hot" stayed firing for the rest of the replay next to the new run's
    # own "hot", though the new agent knew nothing of it (no event of its run would ever end it).
    bundle, run_a, run_b = await recorded(tmp_path, keep_state=False)
    replay, cluster, store = replay_of(bundle)
    replay.seek(cluster, T0 + 20)
    assert store.alarm_list is not None and hot(store.alarm_list.active) == [(run_a, "firing")]
    replay.seek(cluster, replay.end_at)
    assert store.restarts == 1
    assert hot(store.alarm_list.active) == [(run_b, "firing")]
    (ended,) = [a for a in store.alarm_list.recent if a.id.startswith(run_a)]
    assert ended.state == "resolved" and ended.resolved_at == T0 + 100
    assert ended.message.endswith("(agent restarted without it)")
    # The same after a seek back and forward again.
    replay.seek(cluster, T0 + 20)
    replay.seek(cluster, replay.end_at)
    store = cluster.nodes[replay.keys[0]]
    assert hot(store.alarm_list.active) == [(run_b, "firing")]  # type: ignore[union-attr]


async def test_alarms_the_new_run_restored_go_on(tmp_path: Path) -> None:
    bundle, run_a, _ = await recorded(tmp_path, keep_state=True)
    replay, cluster, store = replay_of(bundle)
    for at in (T0 + 100, replay.end_at):
        replay.seek(cluster, at)
        assert store.alarm_list is not None and hot(store.alarm_list.active) == [(run_a, "firing")]
        assert not [a for a in store.alarm_list.recent if "restarted" in a.message]
    assert store.restarts == 1
