"""GPU collector after a GPU reset: NVML Xid events of a GPU that came back are seen again."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.collectors import gpu_xid_events
from rigmon.collectors.base import EventDraft
from rigmon.collectors.gpu import GpuCollector
from rigmon.hw.nvml import open_nvml
from rigmon.hw.root import HostRoot
from rigmon.schema import GpuReading
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.collectors.gpu_helpers import DEADLINE_S, GPU_BUSES, StepClock, gpu_node_tree


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, FakeNvmlMachine]]:
    monkeypatch.setattr(gpu_xid_events, "EVENT_RETRY_S", 0.01)
    machine = gpu_node_tree(tmp_path, GPU_BUSES)
    with serving(tmp_path, machine):
        yield tmp_path, machine


class Pushed:
    """What the collector's Xid thread pushed."""

    def __init__(self) -> None:
        self.events: list[EventDraft] = []
        self._lock = threading.Lock()

    def __call__(self, records: object) -> None:
        assert isinstance(records, list)
        with self._lock:
            self.events.extend(r for r in records if isinstance(r, EventDraft))

    def xids(self) -> list[tuple[str, object]]:
        with self._lock:
            return [(e.subject, e.data["xid"]) for e in self.events if e.kind == "xid"]


def _until_xid(machine: FakeNvmlMachine, pushed: Pushed, index: int, xid: int) -> bool:
    """Post Xid ``xid`` on GPU ``index`` until the Xid thread pushed it (or the deadline passed)."""
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        machine.post_xid(index, xid)
        time.sleep(0.05)
        if (f"gpu:{index}", xid) in pushed.xids():
            return True
    return False


def _states(records: object) -> list[str]:
    assert isinstance(records, list)
    return [r.state for r in records if isinstance(r, GpuReading)]


def test_an_xid_after_a_gpu_came_back_from_a_reset_is_reported(node: tuple[Path, FakeNvmlMachine]) -> None:
    """GPU 1 falls off the bus and is reset (its event registrations die with it, as in the
    driver): the event set is registered again, so an Xid on GPU 1 after its return is an event."""
    root, machine = node
    host = HostRoot(root)
    collector = GpuCollector(open_nvml(host, timeout_s=DEADLINE_S), host, StepClock(), event_wait_s=0.05)
    pushed = Pushed()
    collector.start(pushed)
    try:
        collector.collect()
        assert _until_xid(machine, pushed, 1, 13), "no Xid before the reset"
        machine.fail("gpu_lost", 1)
        assert _states(collector.collect()) == ["ok", "lost", "ok", "ok"]
        machine.heal("gpu_lost", 1)  # nvidia-smi -r: the GPU answers again
        # The reset dropped its registration. Looked at before the poll that finds the GPU back: from
        # then on the Xid thread may register it again at any moment (CI once saw it already done).
        assert 1 not in set().union(*machine.event_sets().values())
        assert _states(collector.collect()) == ["ok"] * 4
        assert _until_xid(machine, pushed, 1, 31), "an Xid after the GPU came back was never seen"
    finally:
        collector.close()


def test_an_xid_of_a_gpu_lost_when_the_events_were_registered_is_reported_once_it_answers(
        node: tuple[Path, FakeNvmlMachine]) -> None:
    """GPU 2 is off the bus when the Xid thread registers the event set (no handle for it): once it
    answers NVML again it is registered, and its Xids are events."""
    root, machine = node
    machine.fail("gpu_lost", 2)
    host = HostRoot(root)
    collector = GpuCollector(open_nvml(host, timeout_s=DEADLINE_S), host, StepClock(), event_wait_s=0.05)
    pushed = Pushed()
    collector.start(pushed)
    try:
        assert _states(collector.collect()) == ["ok", "ok", "lost", "ok"]
        assert _until_xid(machine, pushed, 0, 13), "no Xid from the GPUs that answer"
        machine.heal("gpu_lost", 2)
        assert _states(collector.collect()) == ["ok"] * 4
        assert _until_xid(machine, pushed, 2, 31), "an Xid of the GPU that came back was never seen"
    finally:
        collector.close()
