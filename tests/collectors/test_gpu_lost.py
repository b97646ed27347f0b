"""GPU collector, lost GPUs: every signal loses a GPU once with its identity, a GPU back is read again."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from rigmon.sim.nvml import FakeNvmlMachine
from rigmon.sim.tree import Tree
from tests.collectors.gpu_helpers import DEADLINE_S, StepClock, _collector, _split
from tests.collectors.gpu_helpers import node  # noqa: F401  (fixture)


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
        end = time.monotonic() + DEADLINE_S
        # GPU 1's Xid 79 comes as it falls off the bus (events before the set is registered are
        # not delivered, nor a lost GPU's once the set is registered again without it).
        while not arrived.wait(0.1):
            assert time.monotonic() < end, "no Xid event pushed"
            machine.post_xid(1, 79)
        machine.fail("gpu_lost", 1)
        _lose("kmsg", root, machine)  # a kernel Xid 79 line for GPU 3 (bus 1d) stays GPU 3's
        with open(root / "dev/kmsg", "a", encoding="utf-8") as fh:
            fh.write("4,5,2000100,-;NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off the bus.\n")
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
