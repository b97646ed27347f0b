"""Storage and link scenarios: the real collectors read what the simulator's fake hardware writes."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from rigmon.collectors import REGISTRY
from rigmon.collectors.base import Collector, CollectorContext, EventDraft, NoData
from rigmon.collectors.disks import DiskCollector
from rigmon.config import AgentConfig
from rigmon.hw.root import HostRoot
from rigmon.schema import DiskReading, NetInterfaceReading, NvmeReading, RaidArrayReading, ThunderboltDeviceReading
from rigmon.sim.node import SimNode
from rigmon.sim.rig import SimRig
from rigmon.sim.scenarios import SCENARIOS
from rigmon.sim.tree import Tree

STEP_S = 1.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def monotonic(self) -> float:
        return self.now


class Bench:
    """One simulated node and the real collectors, stepped by hand on a shared clock."""

    def __init__(self, scenario: str, tmp_path: Path, index: int = 0) -> None:
        self.scenario = SCENARIOS[scenario]
        self.index = index
        self.node = SimNode(name=f"node{index + 1:02d}", tree=Tree(tmp_path / f"n{index}"),
                            rng=random.Random(f"1:{index}"))
        self.scenario.build(self.node, index)
        self.clock = Clock()
        ctx = CollectorContext(root=HostRoot(self.node.tree.root), clock=self.clock, config=AgentConfig())
        self.collectors: dict[str, Collector] = {n: REGISTRY[n](ctx) for n in ("host", "raid", "thunderbolt", "nvme")}
        self.events: list[EventDraft] = []

    def run_to(self, t_s: float) -> dict[str, Sequence[object]]:
        while self.clock.now < t_s - 1e-9:
            self.clock.now = round(self.clock.now + STEP_S, 6)
            self.scenario.drive(self.node, self.index, self.clock.now)
            self.node.step(self.clock.now)
        out: dict[str, Sequence[object]] = {}
        for name, collector in self.collectors.items():
            try:
                out[name] = collector.collect()
            except NoData:
                out[name] = []
        for records in out.values():
            self.events += [r for r in records if isinstance(r, EventDraft)]
        return out


def arrays(records: dict[str, Sequence[object]]) -> dict[str, RaidArrayReading]:
    return {r.name: r for r in records["raid"] if isinstance(r, RaidArrayReading)}


def links(records: dict[str, Sequence[object]]) -> dict[str, ThunderboltDeviceReading]:
    return {r.name: r for r in records["thunderbolt"] if isinstance(r, ThunderboltDeviceReading)}


def test_model_load_two_arrays_in_parallel(tmp_path: Path) -> None:
    bench = Bench("model-load", tmp_path)
    bench.run_to(5.0)
    got = arrays(bench.run_to(10.0))
    assert set(got) == {"md127", "md126"}
    assert got["md127"].md_name == "raid0n0" and got["md126"].md_name == "raid0n1"
    assert got["md127"].read_bytes_per_s == pytest.approx(1.07e9, rel=0.01)
    assert got["md126"].read_bytes_per_s == pytest.approx(1.10e9, rel=0.01)
    assert got["md127"].vs_fastest_array_pct == pytest.approx(97.3, abs=1.0)
    assert all(m.role == "in_sync" and m.read_bytes_per_s for a in got.values() for m in a.members)
    assert all(a.member_imbalance_pct is not None and a.member_imbalance_pct < 1.0 for a in got.values())
    assert all(link.link_state == "ok" for link in links(bench.run_to(11.0)).values() if link.kind == "device")


def test_tb_retrain_10g_degrades_then_recovers(tmp_path: Path) -> None:
    bench = Bench("tb-retrain-10g", tmp_path)
    bench.run_to(15.0)
    assert links(bench.run_to(18.0))["0-1"].link_state == "ok"
    records = bench.run_to(30.0)
    assert links(records)["0-1"].link_state == "degraded"
    assert links(records)["0-1"].tx_gbps == 20.0
    records = bench.run_to(35.0)
    assert arrays(records)["md127"].vs_fastest_array_pct == pytest.approx(66.7, abs=2.0)
    assert links(bench.run_to(85.0))["0-1"].link_state == "ok"
    kinds = [(e.kind, e.subject) for e in bench.events if e.subject == "link:0-1"]
    assert kinds == [("tb_link_changed", "link:0-1"), ("tb_link_degraded", "link:0-1"),
                     ("tb_link_changed", "link:0-1"), ("tb_link_recovered", "link:0-1")]


def test_md_degraded_fails_recovers_and_cleans(tmp_path: Path) -> None:
    bench = Bench("md-degraded", tmp_path)
    assert arrays(bench.run_to(10.0))["md127"].health == "ok"
    a = arrays(bench.run_to(20.0))["md127"]
    assert (a.health, a.degraded) == ("degraded", 1)
    assert [m.role for m in a.members] == ["in_sync", "faulty"]
    a = arrays(bench.run_to(60.0))["md127"]
    assert (a.health, a.sync_action) == ("recovering", "recover")
    assert a.sync_progress_pct is not None and 0 < a.sync_progress_pct < 100
    assert a.sync_speed_bytes_per_s and a.sync_eta_s
    a = arrays(bench.run_to(110.0))["md127"]
    assert (a.health, a.degraded, a.sync_action) == ("ok", 0, "idle")
    assert [(m.name, m.role) for m in a.members] == [("nvme0n1", "in_sync"), ("nvme2n1", "in_sync")]
    health = [e.data["to"] for e in bench.events if e.kind == "raid_health_changed" and e.data]
    assert health == ["degraded", "recovering", "ok"]


def test_strix_usb4_link_between_two_nodes(tmp_path: Path) -> None:
    benches = [Bench("strix-usb4", tmp_path, i) for i in range(2)]
    for bench in benches:
        bench.run_to(10.0)
        records = bench.run_to(12.0)
        xdomain = links(records)["0-1"]
        assert (xdomain.kind, xdomain.link_state, xdomain.tx_gbps) == ("xdomain", "ok", 40.0)
        (tbnet,) = [r for r in records["host"] if isinstance(r, NetInterfaceReading) and r.name == "thunderbolt0"]
        assert tbnet.kind == "thunderbolt-net" and tbnet.rx_bytes_per_s
        assert links(bench.run_to(50.0))["0-1"].link_state == "degraded"
        before = [r for r in bench.run_to(89.0)["host"] if isinstance(r, NetInterfaceReading) and r.name == "thunderbolt0"]
        assert before and before[0].rx_bytes_total > 10**9
        unplugged = bench.run_to(91.0)
        assert "0-1" not in links(unplugged)
        # A real thunderbolt-net interface goes away with its XDomain: no carrier-down interface left in sysfs.
        assert not (bench.node.tree.root / "sys/class/net/thunderbolt0").exists()
        assert "thunderbolt0" not in (bench.node.tree.root / "proc/net/dev").read_text()
        assert all(r.name != "thunderbolt0" for r in unplugged["host"] if isinstance(r, NetInterfaceReading))
        assert links(bench.run_to(100.0))["0-1"].link_state == "ok"
        # Back as a new interface: its counters start again, and no rate is made of the drop.
        (back,) = [r for r in bench.run_to(101.0)["host"] if isinstance(r, NetInterfaceReading) and r.name == "thunderbolt0"]
        assert back.rx_bytes_total < before[0].rx_bytes_total and back.carrier is True
        assert back.rx_bytes_per_s is None or back.rx_bytes_per_s >= 0
        bench.run_to(112.0)
        records = bench.run_to(120.0)
        (tbnet,) = [r for r in records["host"] if isinstance(r, NetInterfaceReading) and r.name == "thunderbolt0"]
        assert tbnet.stalled
    # Each node names the other as its XDomain peer.
    assert [links(b.run_to(121.0))["0-1"].device_name for b in benches] == ["node02", "node01"]


def test_nvme_trained_at_gen3_caps_its_array_and_says_why(tmp_path: Path) -> None:
    bench = Bench("nvme-link-gen3", tmp_path)
    bench.run_to(3.0)
    records = bench.run_to(6.0)
    drives = {r.name: r for r in records["nvme"] if isinstance(r, NvmeReading)}
    assert (drives["nvme0"].link_state, drives["nvme1"].link_state) == ("ok", "degraded")
    assert drives["nvme1"].link_degraded_reason == "8 GT/s x4, drive can do 16 GT/s x4"
    # A Gen3 x4 link carries ~3.5 GB/s of payload (not the 3.94 GB/s of its line rate); RAID0
    # stripes evenly, so both members read at that pace and the array at twice it, not the 12 asked.
    md127 = arrays(records)["md127"]
    assert md127.read_bytes_per_s == pytest.approx(7.0e9, rel=0.02)
    assert [m.read_bytes_per_s == pytest.approx(3.5e9, rel=0.02) for m in md127.members] == [True, True]
    assert [e.subject for e in bench.events if e.kind == "nvme_link_below_max"] == ["nvme:nvme1"]


def test_an_enclosure_without_its_fan_throttles_its_drives_and_lags_its_array(tmp_path: Path) -> None:
    bench = Bench("nvme-thermal-throttle", tmp_path)
    bench.run_to(25.0)
    records = bench.run_to(30.0)
    assert arrays(records)["md127"].vs_fastest_array_pct == pytest.approx(97.3, abs=1.0)
    drives = {r.name: r for r in records["nvme"] if isinstance(r, NvmeReading)}
    assert drives["nvme0"].temp_over_max is False and drives["nvme0"].temp_c is not None
    assert drives["nvme0"].temp_c > 50.0 > (drives["nvme2"].temp_c or 0.0)  # heating since the fan stopped at 10 s
    bench.run_to(90.0)
    records = bench.run_to(95.0)
    drives = {r.name: r for r in records["nvme"] if isinstance(r, NvmeReading)}
    # Past their warning threshold (the sim's hwmon temp1_max), alarm bit set; throttled, they stay there.
    hot = [drives[n] for n in ("nvme0", "nvme1")]
    assert all(d.temp_over_max and d.temp_alarm and d.md_arrays == ("md127",) for d in hot)
    assert all(d.temp_c is not None and d.temp_max_c is not None and d.temp_crit_c is not None
               and d.temp_max_c <= d.temp_c < d.temp_crit_c for d in hot)
    assert [(d.temp_over_max, d.md_arrays) for d in (drives["nvme2"], drives["nvme3"])] == [(False, ("md126",))] * 2
    got = arrays(records)
    assert got["md126"].read_bytes_per_s == pytest.approx(1.10e9, rel=0.02)
    assert got["md127"].read_bytes_per_s is not None and got["md127"].read_bytes_per_s < 0.85e9
    assert got["md127"].vs_fastest_array_pct is not None and got["md127"].vs_fastest_array_pct < 80.0
    assert [e.subject for e in bench.events if e.kind == "nvme_temp_over_max"] == ["nvme:nvme0", "nvme:nvme1"]
    assert not [e for e in bench.events if e.kind == "nvme_temp_normal"]
    # Its drives were partitioned before mdadm --create: the arrays hold the partitions, and the
    # drives are in them all the same (the hot drives' events name md127, as their alarm does).
    assert [m.name for m in got["md127"].members] == ["nvme0n1p1", "nvme1n1p1"]
    assert all(m.role == "in_sync" and m.present and m.read_bytes_per_s for m in got["md127"].members)
    hot_events = [e for e in bench.events if e.kind == "nvme_temp_over_max"]
    assert [e.data["md_arrays"] for e in hot_events] == ["md127", "md127"]
    assert all("), in md127: it throttles" in e.message for e in hot_events), hot_events


def test_counters_follow_the_throughput_between_physics_steps(tmp_path: Path) -> None:
    """Physics advance on a 0.1 s grid; reads at times off that grid still see the simulated rate.

    Written as they stood at the grid, a read at 5.09 s and one at 6.01 s would see ten steps
    of I/O in 0.92 s (+9 %); a reader 1 s apart saw 9, 10 or 11 of them (rates jumping +-10 %).
    """
    rig = SimRig(SCENARIOS["model-load"], 1, tmp_path)
    try:
        clock = Clock()
        collector = DiskCollector(HostRoot(rig.nodes[0].tree.root), clock)
        rates: list[dict[str, float | None]] = []
        for t in (4.99, 5.09, 6.01, 7.08, 7.99, 9.1):
            clock.now = t
            rig.step(t)
            rates.append({r.name: r.read_bytes_per_s for r in collector.collect() if isinstance(r, DiskReading)})
    finally:
        rig.close()
    for got in rates[1:]:
        assert got["md127"] == pytest.approx(1.07e9, rel=0.015) and got["md126"] == pytest.approx(1.10e9, rel=0.015)
        assert got["nvme0n1"] == pytest.approx(1.07e9 / 2, rel=0.015)


def test_written_counters_never_go_back_when_a_load_stops(tmp_path: Path) -> None:
    rig = SimRig(SCENARIOS["model-load"], 1, tmp_path)
    try:
        clock = Clock()
        collector = DiskCollector(HostRoot(rig.nodes[0].tree.root), clock)
        totals = []
        # Loading stops at 46 s: a write at 45.95 s carried the load on past the grid point.
        for t in (45.0, 45.95, 46.05, 46.5, 47.0):
            clock.now = t
            rig.step(t)
            (md,) = [r for r in collector.collect() if isinstance(r, DiskReading) and r.name == "md127"]
            totals.append(md.read_bytes_total)
    finally:
        rig.close()
    assert totals == sorted(totals) and totals[-1] == totals[-2]
    assert md.read_bytes_per_s == 0.0


def test_the_strix_halo_box_has_amd_sensors_only(tmp_path: Path) -> None:
    """model-load's box is a Strix Halo (AMD): thermal zone acpitz, hwmon k10temp, no Intel package sensor."""
    bench = Bench("model-load", tmp_path)
    bench.run_to(1.0)
    root = bench.node.tree.root
    assert (root / "sys/class/thermal/thermal_zone0/type").read_text() == "acpitz\n"
    assert (root / "sys/class/hwmon/hwmon0/name").read_text() == "k10temp\n"


def test_md_recovery_progress_bar_is_the_kernels(tmp_path: Path) -> None:
    """md.c prints per_milli/50 '=', a '>' and 20 - per_milli/50 '.': 21 characters at any progress."""
    bench = Bench("md-degraded", tmp_path)
    bars = []
    for t in (35.0, 45.0, 55.0):
        bench.run_to(t)
        mdstat = (bench.node.tree.root / "proc/mdstat").read_text()
        bars += re.findall(r"^      \[([=>.]*)\]  recovery =", mdstat, flags=re.M)
    assert len(bars) == 3 and bars[0] != bars[-1]
    assert [len(b) for b in bars] == [21, 21, 21], bars


def test_a_strix_halo_hosts_memory_in_use_holds_its_gpus_gtt(tmp_path: Path) -> None:
    # The APU's GTT is system memory: the demo's Strix Halo node said 36.7 of 128 GiB in use while its GPU held
    # 94 GiB of GTT.
    bench = Bench("strix-cluster", tmp_path)
    bench.run_to(120.0)
    root = bench.node.tree.root
    gtt = int(next((root / "sys/bus/pci/devices").glob("*/mem_info_gtt_used")).read_text())
    meminfo = dict(line.split(":") for line in (root / "proc/meminfo").read_text().splitlines())
    used = (int(meminfo["MemTotal"].split()[0]) - int(meminfo["MemAvailable"].split()[0])) * 1024
    assert gtt > 50 * 1024**3 and gtt < used <= 128 * 1024**3
