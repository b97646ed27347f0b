"""GPU collector: decoded values, peaks and counter rates, NVLink records, watchdog hang, PCI device list."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from rigmon.collectors.base import CollectorHung, NoData
from rigmon.collectors.gpu import GpuCollector
from rigmon.collectors.gpu_values import decode_clock_reasons, power_extremes
from rigmon.hw.nvml import open_nvml
from rigmon.hw.root import HostRoot
from rigmon.sim.nvml import FakeNvmlMachine
from rigmon.sim.tree import write_tree
from tests.collectors.gpu_helpers import DEADLINE_S, GPU_BUSES, StepClock, _collector, _split
from tests.collectors.gpu_helpers import node  # noqa: F401  (fixture)


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "nvml.toml").exists())


# Scenario folders with an nvml.toml run in tests/collectors/test_fixture_hosts.py.


# -- pure helpers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mask", "names"),
    [
        (0x0, ()),
        (0x1, ("gpu_idle",)),
        (0x4, ("sw_power_cap",)),
        (0x4 | 0x40 | 0x80, ("sw_power_cap", "hw_thermal_slowdown", "hw_power_brake_slowdown")),
        (0x8 | 0x1000, ("hw_slowdown", "other")),
    ],
)
def test_decode_clock_reasons(mask: int, names: tuple[str, ...]) -> None:
    assert decode_clock_reasons(mask) == names


def test_power_extremes() -> None:
    assert power_extremes([]) == (None, None, 0)
    assert power_extremes([250_000, 331_500, 41_000]) == (331.5, 41.0, 3)


def test_peak_is_between_two_polls(node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    collector = _collector(root)
    try:
        machine.gpus[0].power_samples.extend([(10, 250_000), (20, 330_000)])
        first, _ = _split(list(collector.collect()))
        machine.gpus[0].power_samples.extend([(30, 260_000), (40, 270_000)])
        second, _ = _split(list(collector.collect()))
        third, _ = _split(list(collector.collect()))
    finally:
        collector.close()
    assert (first[0].power_peak_w, first[0].power_samples) == (330.0, 2)
    assert (second[0].power_peak_w, second[0].power_min_w, second[0].power_samples) == (270.0, 260.0, 2)
    assert (third[0].power_peak_w, third[0].power_samples) == (None, 0)


def test_counter_rates(node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    clock = StepClock()
    collector = _collector(root, clock)
    try:
        collector.collect()
        with machine.lock:
            machine.gpus[2].pcie_replay += 20
            machine.gpus[2].nvlink_counters[(2, 2)] = 100
        clock.t_s = 10.0
        gpus, _ = _split(list(collector.collect()))
    finally:
        collector.close()
    assert gpus[2].pcie_replay_per_s == 2.0 and gpus[0].pcie_replay_per_s == 0.0
    assert gpus[2].nvlinks[2].crc_flit_per_s == 10.0


def test_unchanged_nvlinks_give_the_same_records_and_a_rise_its_rate_over_one_poll(
        node: tuple[Path, FakeNvmlMachine]) -> None:
    """Links whose values did not move are the last poll's records (the alarm engine's NVLink rules
    find them unchanged); a counter that rises after several quiet polls gets its rate over the last
    poll's interval, not over the time since the records were built."""
    root, machine = node
    clock = StepClock()
    collector = _collector(root, clock)
    try:
        polls = []
        for t_s in (0.0, 1.0, 2.0, 3.0, 4.0):
            clock.t_s = t_s
            gpus, _ = _split(list(collector.collect()))
            polls.append(gpus)
        with machine.lock:
            machine.gpus[1].nvlink_counters[(3, 0)] = 30  # replay
            machine.gpus[1].nvlink_counters[(3, 2)] = 7  # CRC flit
        clock.t_s = 6.0
        risen, _ = _split(list(collector.collect()))
        clock.t_s = 7.0
        after, _ = _split(list(collector.collect()))
        clock.t_s = 8.0
        quiet, _ = _split(list(collector.collect()))
        clock.t_s = 9.0
        quiet2, _ = _split(list(collector.collect()))
    finally:
        collector.close()
    # The first poll has no rates yet, the second the first 0.0 rates: both new records.
    assert polls[0][0].nvlinks[0].replay_per_s is None and polls[1][0].nvlinks[0].replay_per_s == 0.0
    assert polls[1][0].nvlinks is not polls[0][0].nvlinks
    for before, now in zip(polls[1:], polls[2:]):
        assert all(a.nvlinks is b.nvlinks for a, b in zip(before, now))
    assert len(polls[4][1].nvlinks) == 6
    link = risen[1].nvlinks[3]
    assert (link.replay_total, link.crc_flit_total) == (30, 7)
    assert (link.replay_per_s, link.crc_flit_per_s) == (15.0, 3.5)  # over 2 s (4 -> 6), not 4 (2 -> 6)
    assert risen[1].nvlinks is not polls[4][1].nvlinks and risen[0].nvlinks is polls[4][0].nvlinks
    # The poll after the rise: rates back to 0.0, new records; then the same again.
    assert (after[1].nvlinks[3].replay_per_s, after[1].nvlinks[3].crc_flit_per_s) == (0.0, 0.0)
    assert after[1].nvlinks is not risen[1].nvlinks
    assert quiet[1].nvlinks is after[1].nvlinks and quiet2[1].nvlinks is after[1].nvlinks
    assert quiet2[1].nvlinks == polls[1][1].nvlinks[:3] + (after[1].nvlinks[3],) + polls[1][1].nvlinks[4:]


def test_nvlink_records_not_reused_when_no_time_passed(node: tuple[Path, FakeNvmlMachine]) -> None:
    """Two polls at the same monotonic time: the rates are unknown (``None``), as they always were."""
    root, _ = node
    clock = StepClock()
    collector = _collector(root, clock)
    try:
        collector.collect()
        clock.t_s = 1.0
        first, _ = _split(list(collector.collect()))
        second, _ = _split(list(collector.collect()))
    finally:
        collector.close()
    assert first[0].nvlinks[0].replay_per_s == 0.0
    assert second[0].nvlinks[0].replay_per_s is None and second[0].nvlinks is not first[0].nvlinks


def test_hang_reports_hung_and_recovers(node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    collector = _collector(root, timeout_s=0.2)
    try:
        collector.collect()
        machine.fail("hang")
        with pytest.raises(CollectorHung):
            collector.collect()
        machine.heal("hang")
        end = time.monotonic() + DEADLINE_S
        while True:
            try:
                gpus, _ = _split(list(collector.collect()))
                break
            except CollectorHung:
                assert time.monotonic() < end, "still hung after the hang was healed"
                time.sleep(0.02)
    finally:
        collector.close()
    assert [g.state for g in gpus] == ["ok"] * 4


def test_no_driver_is_absent(tmp_path: Path) -> None:
    collector = _collector(tmp_path)
    try:
        with pytest.raises(NoData):
            collector.collect()
    finally:
        collector.close()


class CountingRoot(HostRoot):
    """Counts attribute reads below /sys/bus/pci (the GPU collector's PCI device list)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.pci_reads = 0

    def read_attr(self, rel: str, max_bytes: int = 4 * 1024 * 1024) -> str | None:
        if rel.startswith("/sys/bus/pci/"):
            self.pci_reads += 1
        return super().read_attr(rel, max_bytes)


def test_pci_devices_are_read_once_and_again_when_the_bus_changes(node: tuple[Path, FakeNvmlMachine]) -> None:
    root, _ = node
    host = CountingRoot(root)
    collector = GpuCollector(open_nvml(host, timeout_s=DEADLINE_S), host, StepClock(), event_wait_s=0.05)
    try:
        collector.collect()
        first = host.pci_reads
        collector.collect()
        steady = host.pci_reads - first
        # A new PCI function (a NIC) appears: every device's vendor and class are read again.
        write_tree(root, {"/sys/bus/pci/devices/0000:5e:00.0/vendor": "0x15b3\n",
                          "/sys/bus/pci/devices/0000:5e:00.0/class": "0x020000\n"})
        collector.collect()
        changed = host.pci_reads - first - steady
        shutil.rmtree(root / "sys/bus/pci/devices/0000:1d:00.0")
        gpus, _ = _split(list(collector.collect()))
    finally:
        collector.close()
    assert first == 2 * len(GPU_BUSES)  # vendor and class of each
    assert steady == 0
    assert changed == 2 * (len(GPU_BUSES) + 1)
    assert [g.state for g in gpus] == ["ok", "ok", "ok", "lost"]
    assert gpus[3].lost_reason == "PCI device 0000:1d:00.0 gone from sysfs"
