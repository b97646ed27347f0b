"""GPU collector: scenario folders, lost-GPU signals (reported once), watchdog hang, NVML Xid events."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from rigmon.collectors import gpu_xid_events
from rigmon.collectors.base import CollectorHung, EventDraft, NoData
from rigmon.collectors.gpu import GpuCollector
from rigmon.collectors.gpu_values import decode_clock_reasons, power_extremes
from rigmon.hw.nvml import Nvml, NvmlDeviceData, NvmlXid, open_nvml
from rigmon.hw.root import HostRoot
from rigmon.schema import GpuReading
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.sim.tree import Tree, write_tree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "nvml.toml").exists())
DEADLINE_S = 10.0


class StepClock:
    """Wall and monotonic time that only move when a test says so."""

    def __init__(self) -> None:
        self.t_s = 0.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.t_s

    def monotonic(self) -> float:
        return self.t_s


def _collector(root: Path, clock: StepClock | None = None, timeout_s: float = DEADLINE_S) -> GpuCollector:
    host = HostRoot(root)
    return GpuCollector(open_nvml(host, timeout_s=timeout_s), host, clock or StepClock(), event_wait_s=0.05)


def _split(records: list[object]) -> tuple[list[GpuReading], list[EventDraft]]:
    return ([r for r in records if isinstance(r, GpuReading)], [r for r in records if isinstance(r, EventDraft)])


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


# -- lost GPU -----------------------------------------------------------------------------

GPU_BUSES = ("1a", "1b", "1c", "1d")


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Path, FakeNvmlMachine]]:
    files: dict[str, str] = {"/dev/kmsg": "6,1,1000000,-;Linux version 6.8.0\n"}
    for bus in GPU_BUSES:
        files[f"/sys/bus/pci/devices/0000:{bus}:00.0/vendor"] = "0x10de\n"
        files[f"/sys/bus/pci/devices/0000:{bus}:00.0/class"] = "0x030200\n"
    write_tree(tmp_path, files)
    machine = FakeNvmlMachine(v100_sxm2_gpus(4))
    with serving(tmp_path, machine):
        yield tmp_path, machine


def _lose(how: str, root: Path, machine: FakeNvmlMachine) -> None:
    if how == "nvml":
        machine.fail("gpu_lost", 3)
    elif how == "pci":
        shutil.rmtree(root / "sys/bus/pci/devices/0000:1d:00.0")
    elif how == "kmsg":
        with open(root / "dev/kmsg", "a", encoding="utf-8") as fh:
            fh.write("4,2,2000000,-;NVRM: Xid (PCI:0000:1d:00): 79, GPU has fallen off the bus.\n")
    elif how == "kmsg-no-xid":
        with open(root / "dev/kmsg", "a", encoding="utf-8") as fh:
            fh.write("4,2,2000000,-;NVRM: The NVIDIA GPU 0000:1d:00.0\n"
                     "4,3,2000001,-;NVRM: (PCI ID: 10de:1db1) installed in this system has\n"
                     "4,4,2000002,-;NVRM: fallen off the bus and is not responding to commands.\n")
    elif how == "count":
        with machine.lock:
            machine.gpus.pop()


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("nvml", "NVML: GPU is lost"),
        ("pci", "PCI device 0000:1d:00.0 gone from sysfs"),
        ("kmsg", "kernel: Xid 79"),
        ("kmsg-no-xid", "kernel: fallen off the bus"),
        ("count", "NVML device count 3, was 4"),
    ],
)
def test_any_signal_loses_the_gpu_once_with_its_identity(
    node: tuple[Path, FakeNvmlMachine], how: str, reason: str
) -> None:
    root, machine = node
    uuid = machine.gpus[3].uuid
    clock = StepClock()
    collector = _collector(root, clock)
    try:
        gpus, events = _split(list(collector.collect()))
        assert [g.state for g in gpus] == ["ok"] * 4 and events == []
        _lose(how, root, machine)
        clock.t_s = 5.0
        gpus, events = _split(list(collector.collect()))
        clock.t_s = 6.0
        later_gpus, later_events = _split(list(collector.collect()))
    finally:
        collector.close()
    assert [g.state for g in gpus] == ["ok", "ok", "ok", "lost"]
    lost = gpus[3]
    assert (lost.index, lost.uuid, lost.pci_bus_id, lost.pci_bus_id_nvml, lost.pci_bus_id_xid) == (
        3, uuid, "0000:1d:00.0", "00000000:1D:00.0", "0000:1d:00")
    assert lost.lost_at == 1_700_000_005.0 and lost.lost_reason == reason
    assert lost.power_w is None
    assert len(events) == 1
    event = events[0]
    assert (event.kind, event.severity, event.subject) == ("gpu_lost", "critical", "gpu:3")
    assert event.data is not None and event.data["uuid"] == uuid and event.data["pci_bus_id"] == "0000:1d:00.0"
    # Still listed as lost on the next poll, with no second event.
    assert later_events == []
    assert later_gpus[3].state == "lost" and later_gpus[3].lost_at == 1_700_000_005.0


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


def test_nvml_xid_events_are_pushed(node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    pushed: list[object] = []
    arrived = threading.Event()

    def push(records: object) -> None:
        assert isinstance(records, list)
        pushed.extend(records)
        arrived.set()

    collector = _collector(root)
    collector.start(push)
    try:
        collector.collect()
        end = time.monotonic() + DEADLINE_S
        # Events before the event set is registered are not delivered: post until one arrives.
        while not arrived.wait(0.1):
            assert time.monotonic() < end, "no Xid event pushed"
            machine.post_xid(3, 79)
        gpus, events = _split(list(collector.collect()))
    finally:
        collector.close()
    xid = pushed[0]
    assert isinstance(xid, EventDraft)
    assert (xid.kind, xid.subject, xid.severity) == ("xid", "gpu:3", "critical")
    assert xid.data is not None and (xid.data["xid"], xid.data["source"], xid.data["pci_bus_id_nvml"]) == (
        79, "nvml", "00000000:1D:00.0")
    # An Xid 79 event is a lost-GPU signal by itself.
    assert gpus[3].state == "lost" and gpus[3].lost_reason == "NVML: Xid 79 event"
    assert [e.kind for e in events] == ["gpu_lost"]


def test_an_xid_wait_stuck_in_the_driver_is_reported_once_and_so_is_its_return(
        node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    host = HostRoot(root)
    collector = GpuCollector(open_nvml(host, timeout_s=DEADLINE_S), host, StepClock(), event_wait_s=0.05,
                             hung_after_s=0.2)
    collector.start(lambda records: None)
    seen: list[EventDraft] = []

    def poll_until(kind: str) -> None:
        end = time.monotonic() + DEADLINE_S
        while not any(e.kind == kind for e in seen):
            assert time.monotonic() < end, f"no {kind} event"
            time.sleep(0.05)
            gpus, events = _split(list(collector.collect()))  # the reads still answer
            assert [g.state for g in gpus] == ["ok"] * 4
            seen.extend(events)

    try:
        collector.collect()
        machine.fail("hang", symbols=["nvmlEventSetWait_v2"])
        poll_until("nvml_events_hung")
        for _ in range(3):
            seen.extend(_split(list(collector.collect()))[1])
        machine.heal("hang")
        poll_until("nvml_events_resumed")
    finally:
        collector.close()
    assert [(e.kind, e.severity, e.subject) for e in seen] == [
        ("nvml_events_hung", "warning", "gpu:events"), ("nvml_events_resumed", "info", "gpu:events")]


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


def test_a_gpu_back_after_a_reset_is_read_again_and_can_be_lost_again(node: tuple[Path, FakeNvmlMachine]) -> None:
    """A GPU that fell off the bus (NVML lost, Xid 79 from NVML and the kernel) and answers NVML for
    its UUID again after a reset is no longer lost: readings again, one ``gpu_back`` event, and a
    later loss is a new ``gpu_lost``."""
    root, machine = node
    clock = StepClock()
    pushed: list[object] = []
    arrived = threading.Event()

    def push(records: object) -> None:
        assert isinstance(records, list)
        pushed.extend(records)
        arrived.set()

    collector = _collector(root, clock)
    collector.start(push)
    try:
        collector.collect()
        machine.fail("gpu_lost", 1)
        _lose("kmsg", root, machine)  # a kernel Xid 79 line for GPU 3 (bus 1d) stays GPU 3's
        with open(root / "dev/kmsg", "a", encoding="utf-8") as fh:
            fh.write("4,5,2000100,-;NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off the bus.\n")
        end = time.monotonic() + DEADLINE_S
        while not arrived.wait(0.1):
            assert time.monotonic() < end, "no Xid event pushed"
            machine.post_xid(1, 79)
        clock.t_s = 1.0
        lost, lost_events = _split(list(collector.collect()))
        machine.heal("gpu_lost", 1)
        clock.t_s = 31.0
        back, back_events = _split(list(collector.collect()))
        clock.t_s = 32.0
        after, after_events = _split(list(collector.collect()))
        machine.fail("gpu_lost", 1)
        clock.t_s = 40.0
        again, again_events = _split(list(collector.collect()))
    finally:
        collector.close()
    assert [g.state for g in lost] == ["ok", "lost", "ok", "lost"]
    assert sorted(e.subject for e in lost_events if e.kind == "gpu_lost") == ["gpu:1", "gpu:3"]
    assert [g.state for g in back] == ["ok", "ok", "ok", "lost"]
    assert back[1].uuid == machine.gpus[1].uuid and back[1].power_w == 42.0 and back[1].lost_reason is None
    assert [(e.kind, e.severity, e.subject) for e in back_events] == [("gpu_back", "info", "gpu:1")]
    assert back_events[0].message == "GPU 1 (0000:1b:00.0) answers NVML again 30 s after it was lost"
    assert [g.state for g in after] == ["ok", "ok", "ok", "lost"] and after_events == []
    assert [g.state for g in again] == ["ok", "lost", "ok", "lost"]
    assert [(e.kind, e.subject, e.at) for e in again_events] == [("gpu_lost", "gpu:1", 1_700_000_040.0)]
    assert again[1].lost_reason == "NVML: GPU is lost"


def test_power_samples_are_not_taken_twice_when_a_gpu_before_leaves_the_count(
        node: tuple[Path, FakeNvmlMachine]) -> None:
    """GPU 1 leaves NVML's count: GPUs 2 and 3 answer at indices 1 and 2 from then on; each GPU's
    peak is still over its own samples since the last poll, not over samples already taken."""
    root, machine = node
    clock = StepClock()
    collector = _collector(root, clock)
    stamp = 0

    def samples(mw: int) -> None:
        nonlocal stamp
        for gpu in machine.gpus:
            for _ in range(3):
                stamp += 100
                gpu.power_samples.append((stamp, mw + gpu.index))
    try:
        samples(300_000)
        collector.collect()
        with machine.lock:
            machine.gpus.pop(1)
        shutil.rmtree(root / "sys/bus/pci/devices/0000:1b:00.0")
        samples(100_000)
        clock.t_s = 1.0
        first, _ = _split(list(collector.collect()))
        samples(110_000)
        clock.t_s = 2.0
        second, _ = _split(list(collector.collect()))
    finally:
        collector.close()
    assert [g.state for g in first] == ["ok", "lost", "ok", "ok"]
    assert [(g.power_peak_w, g.power_samples) for g in first] == [(100.0, 3), (None, None), (100.002, 3),
                                                                  (100.003, 3)]
    assert [(g.power_peak_w, g.power_samples) for g in second] == [(110.0, 3), (None, None), (110.002, 3),
                                                                   (110.003, 3)]


def test_a_gpu_lost_before_the_first_poll_takes_its_identity_when_it_comes_back(
        node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    machine.fail("gpu_lost", 1)
    collector = _collector(root)
    try:
        lost, lost_events = _split(list(collector.collect()))
        machine.heal("gpu_lost", 1)
        back, back_events = _split(list(collector.collect()))
    finally:
        collector.close()
    assert [(g.index, g.state, g.uuid) for g in lost][1] == (1, "lost", None)
    assert [e.kind for e in lost_events] == ["gpu_lost"]
    assert [(g.index, g.state, g.uuid) for g in back] == [(i, "ok", machine.gpus[i].uuid) for i in range(4)]
    assert [(e.kind, e.subject) for e in back_events] == [("gpu_back", "gpu:1")]


def test_a_gpu_on_the_bus_that_nvml_does_not_list_at_start_is_lost_until_it_answers(
        node: tuple[Path, FakeNvmlMachine]) -> None:
    """The driver could not bring GPU 0000:1b:00.0 up (RmInitAdapter failed): NVML lists the other
    three, and the fourth is a lost GPU with its PCI address rather than a GPU fewer that nothing
    notices; when NVML lists it later it is read under the same entry."""
    root, machine = node
    with machine.lock:
        missing = machine.gpus.pop(1)
    Tree(root).symlink("/sys/bus/pci/devices/0000:1b:00.0/driver", "../../../../bus/pci/drivers/nvidia")
    collector = _collector(root)
    try:
        gpus, events = _split(list(collector.collect()))
        again, again_events = _split(list(collector.collect()))
        with machine.lock:
            machine.gpus.insert(1, missing)
        back, back_events = _split(list(collector.collect()))
    finally:
        collector.close()
    assert [(g.index, g.state, g.pci_bus_id) for g in gpus] == [
        (0, "ok", "0000:1a:00.0"), (1, "ok", "0000:1c:00.0"), (2, "ok", "0000:1d:00.0"), (3, "lost", "0000:1b:00.0")]
    assert gpus[3].uuid is None and gpus[3].lost_reason == (
        "on the PCI bus, but NVML does not list it (the driver could not bring it up?)")
    assert [(e.kind, e.subject) for e in events] == [("gpu_lost", "gpu:3")]
    assert [g.state for g in again] == ["ok", "ok", "ok", "lost"] and again_events == []
    assert [(g.index, g.state, g.uuid) for g in back] == [
        (0, "ok", machine.gpus[0].uuid), (1, "ok", machine.gpus[2].uuid), (2, "ok", machine.gpus[3].uuid),
        (3, "ok", missing.uuid)]
    assert [(e.kind, e.subject) for e in back_events] == [("gpu_back", "gpu:3")]


class CountingWaits:
    """The `Nvml` seam of a binding, counting the Xid waits that raised."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self.failed = 0
        self.answered = 0

    def read_devices(self, samples_since_us: Mapping[int, int]) -> list[NvmlDeviceData]:
        return self.nvml.read_devices(samples_since_us)

    def wait_xid(self, timeout_s: float) -> list[NvmlXid]:
        try:
            hits = self.nvml.wait_xid(timeout_s)
        except Exception:
            self.failed += 1
            raise
        self.answered += 1
        return hits

    def close(self) -> None:
        self.nvml.close()


def test_an_event_wait_failing_while_a_gpu_is_lost_is_logged_once(
        node: tuple[Path, FakeNvmlMachine], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A lost GPU registered to the event set makes every wait answer GPU_IS_LOST: one warning
    saying so, not a traceback every retry, and one line when the waits answer again."""
    root, machine = node
    monkeypatch.setattr(gpu_xid_events, "EVENT_RETRY_S", 0.01)
    host = HostRoot(root)
    nvml = CountingWaits(open_nvml(host, timeout_s=DEADLINE_S))
    collector = GpuCollector(nvml, host, StepClock(), event_wait_s=0.05)  # type: ignore[arg-type]
    caplog.set_level(logging.WARNING, logger=gpu_xid_events.__name__)
    collector.start(lambda records: None)
    try:
        end = time.monotonic() + DEADLINE_S
        while not machine.event_sets():
            assert time.monotonic() < end, "no event set registered"
            time.sleep(0.01)
        machine.fail("gpu_lost", 3)
        while nvml.failed < 5:
            assert time.monotonic() < end, "the waits did not fail"
            time.sleep(0.01)
        machine.heal("gpu_lost", 3)
        answered = nvml.answered
        while nvml.answered < answered + 2:
            assert time.monotonic() < end, "the waits did not answer again"
            time.sleep(0.01)
    finally:
        collector.close()
    records = [(r.levelname, r.getMessage().split(" (")[0]) for r in caplog.records]
    assert records == [("WARNING", "waiting for NVML events failed: NVMLError_GpuIsLost: GPU is lost"),
                       ("WARNING", "waiting for NVML events works again")]


def test_an_xid_event_of_a_handle_not_registered_names_no_gpu_none() -> None:
    """An event for a device handle the event set does not know (a GPU reset since it was registered)."""
    events = gpu_xid_events.XidEvents(CountingWaits(None), 0.05, 1.0)  # type: ignore[arg-type]
    event = events._event(NvmlXid(index=None, uuid=None, pci_bus_id=None, xid=154))
    assert (event.subject, event.message) == ("gpu:unknown", "Xid 154 on an unknown GPU: Xid")


def test_a_gpu_nvml_gives_no_handle_for_is_lost_without_the_kernel_log(node: tuple[Path, FakeNvmlMachine]) -> None:
    """GPU 3 falls off the bus; the driver answers "Unknown Error" for its handle (not GPU_IS_LOST),
    the kernel log says nothing the agent may read and the PCI device stays listed: still lost."""
    root, machine = node
    collector = _collector(root)
    try:
        collector.collect()
        machine.gpus[3].handle_error = 999  # NVML_ERROR_UNKNOWN
        polls = [_split(list(collector.collect())) for _ in range(3)]
        machine.gpus[3].handle_error = None
        back, back_events = _split(list(collector.collect()))
    finally:
        collector.close()
    # The first poll still reads with the handle it had (every call answers): then no handle.
    states = [[g.state for g in gpus] for gpus, _ in polls]
    assert states[-1] == ["ok", "ok", "ok", "lost"]
    assert polls[-1][0][3].lost_reason == "NVML: no device handle" and polls[-1][0][3].uuid == machine.gpus[3].uuid
    assert [(e.kind, e.subject) for _, events in polls for e in events] == [("gpu_lost", "gpu:3")]
    assert [g.state for g in back] == ["ok"] * 4 and [e.kind for e in back_events] == ["gpu_back"]
