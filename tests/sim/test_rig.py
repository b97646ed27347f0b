"""Simulated rigs: deterministic trees that the real collectors read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rigmon.collectors.host import HostCollector
from rigmon.hw.root import HostRoot
from rigmon.schema import HostReading
from rigmon.sim.clock import SimClock
from rigmon.sim.rig import STEP_REAL_S, SimRig, get_scenario, next_step_at


def tree_files(root: Path) -> dict[str, str]:
    # The boot time (/proc/stat btime) follows the wall time the rig started at, like every
    # timestamp of a run; the seed fixes everything else.
    return {str(p.relative_to(root)): re.sub(r"^btime \d+$", "btime B", p.read_text(), flags=re.M)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_hardware(tmp_path: Path) -> None:
    rigs = [SimRig(get_scenario("healthy"), 2, tmp_path / name, seed=seed) for name, seed in
            (("a", 7), ("b", 7), ("c", 8))]
    for rig in rigs:
        for t_s in (5.0, 60.0, 61.5):
            rig.step(t_s)
    a, b, c = (tree_files(tmp_path / n / "node01") for n in "abc")
    assert a == b
    assert a["proc/sys/kernel/random/boot_id"] != c["proc/sys/kernel/random/boot_id"]
    assert tree_files(tmp_path / "a" / "node01") != tree_files(tmp_path / "a" / "node02")


def test_host_collector_reads_the_simulated_node(tmp_path: Path) -> None:
    rig = SimRig(get_scenario("healthy"), 1, tmp_path, seed=1)
    clock = SimClock()
    collector = HostCollector(HostRoot(rig.nodes[0].tree.root), clock)
    collector.collect()
    rig.step(120.0)  # training is running by then
    host = next(r for r in collector.collect() if isinstance(r, HostReading))
    assert host.cpu_pct is not None and 20 < host.cpu_pct <= 100
    assert host.mem_total_bytes == 256 * 1024**3


def test_sim_clock_runs_at_speed() -> None:
    clock = SimClock(speed=1000.0, start_at=0.0)
    a = clock.time()
    b = clock.time()
    assert b >= a and clock.monotonic() >= 0


def test_physics_steps_keep_their_schedule() -> None:
    """Steps come every STEP_REAL_S, whatever each one took: the trees are written at the same
    phase against an agent's once-a-second reads, so no read races a write. A late step is
    taken at once and the schedule goes on from it, without a burst of missed ones."""
    at = 0.0
    for _ in range(10):
        at = next_step_at(at, at + 0.013)  # the loop wakes and finishes the step 13 ms later
    assert at == pytest.approx(10 * STEP_REAL_S)
    assert next_step_at(at, at + 0.35) == at + 0.35
