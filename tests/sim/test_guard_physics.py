"""Simulator physics behind the undervolt guard: V100 power follows the clock cap, a power limit alone does not help."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rigmon.sim.gpu import SimNvidiaGpus
from rigmon.sim.node import SimNode
from rigmon.sim.psu import SimPsuRail
from rigmon.sim.rig import get_scenario
from rigmon.sim.tree import Tree


def _run(tmp_path: Path, cap_at_s: float | None, graphics_mhz: int | None = None,
         limit_mw: int | None = None, until_s: float = 60.0) -> tuple[SimNvidiaGpus, dict[int, float], list[float]]:
    node = SimNode(name="n", tree=Tree(tmp_path / "n"), rng=random.Random("1:0"))
    scenario = get_scenario("undervolt-bus-drop")
    scenario.build(node, 0)
    gpus = next(d for d in node.devices if isinstance(d, SimNvidiaGpus))
    for device in node.devices:
        if isinstance(device, SimPsuRail):
            device.use_pty = False
    rail_min: dict[int, float] = {}
    peaks: list[float] = []
    try:
        for k in range(1, int(until_s * 10) + 1):
            t_s = round(k * 0.1, 9)
            if cap_at_s is not None and abs(t_s - cap_at_s) < 1e-6:
                with gpus.machine.lock:
                    for gpu in gpus.gpus:
                        if graphics_mhz is not None:
                            gpu.app_clock_graphics_mhz, gpu.app_clocks_set = graphics_mhz, True
                        if limit_mw is not None:
                            gpu.power_limit_mw = gpu.enforced_limit_mw = limit_mw
            scenario.drive(node, 0, t_s)
            node.advance(t_s)
            rail_min[int(t_s)] = min(rail_min.get(int(t_s), 99.0), node.bus["rail_volts"])
            if cap_at_s is not None and t_s > cap_at_s + 7 and not gpus.gpus[0].lost:  # buffer: 6 s
                peaks.append(max(mw for _, mw in gpus.gpus[0].power_samples) / 1000)
    finally:
        node.close()
    return gpus, rail_min, peaks


def test_boost_clocks_lose_gpu_3(tmp_path: Path) -> None:
    gpus, rail_min, _ = _run(tmp_path, None)
    assert gpus.gpus[3].lost and gpus.throughput_per_s == 0.0
    assert min(rail_min.values()) < 11.4


def test_capped_clocks_keep_every_gpu_and_cost_speed(tmp_path: Path) -> None:
    gpus, rail_min, peaks = _run(tmp_path, 11.0, graphics_mhz=1005)
    assert not any(g.lost for g in gpus.gpus)
    assert min(v for s, v in rail_min.items() if s >= 12) > 11.5
    assert max(peaks) < 230  # ~200 W ramps instead of ~330 W
    assert gpus.gpus[0].clock_graphics_mhz == 1005 and gpus.gpus[0].clock_reasons == 0x2
    full = 4 * 100.0
    assert gpus.throughput_per_s == pytest.approx(full * (1005 / 1530) ** 0.33, rel=0.01)  # ~13 % slower


def test_a_power_limit_alone_does_not_prevent_the_drop(tmp_path: Path) -> None:
    gpus, _, peaks = _run(tmp_path, 11.0, limit_mw=200_000)
    assert gpus.gpus[3].lost


def test_guarded_scenario_configures_the_agent_guard() -> None:
    node = SimNode(name="n", tree=Tree(Path("/nonexistent-not-written")), rng=random.Random(1))
    get_scenario("undervolt-bus-drop-guarded").build(node, 0)
    try:
        guard = node.agent_config()["guard"]
        assert isinstance(guard, dict) and guard["mode"] == "enforce" and guard["enabled"] is True
    finally:
        node.close()
