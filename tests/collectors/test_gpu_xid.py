"""GPU collector, NVML Xid events: pushed, a wait stuck in the driver or failing while a GPU is lost said once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from rigmon.collectors import gpu_xid_events
from rigmon.collectors.base import EventDraft
from rigmon.collectors.gpu import GpuCollector
from rigmon.hw.nvml import Nvml, NvmlDeviceData, NvmlXid, open_nvml
from rigmon.hw.root import HostRoot
from rigmon.sim.nvml import FakeNvmlMachine
from tests.collectors.gpu_helpers import DEADLINE_S, StepClock, _collector, _split
from tests.collectors.gpu_helpers import node  # noqa: F401  (fixture)


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



def failing_waits(node: tuple[Path, FakeNvmlMachine],
                  monkeypatch: pytest.MonkeyPatch) -> tuple[CountingWaits, GpuCollector]:
    """A GPU collector (not started) on a driver whose every event wait answers GPU_IS_LOST while a
    GPU is lost, retried every 10 ms."""
    root, machine = node
    machine.events_lost_while_any_gpu_lost = True
    monkeypatch.setattr(gpu_xid_events, "EVENT_RETRY_S", 0.01)
    host = HostRoot(root)
    nvml = CountingWaits(open_nvml(host, timeout_s=DEADLINE_S))
    return nvml, GpuCollector(nvml, host, StepClock(), event_wait_s=0.05)  # type: ignore[arg-type]

def test_an_event_wait_failing_while_a_gpu_is_lost_is_logged_once(
        node: tuple[Path, FakeNvmlMachine], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A driver whose every event wait answers GPU_IS_LOST while a GPU is lost (a set without it
    too): one warning saying so, not a traceback every retry, and one line when the waits answer again."""
    _, machine = node
    nvml, collector = failing_waits(node, monkeypatch)
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


def test_the_other_gpus_xids_come_at_once_while_a_gpu_is_lost(
        node: tuple[Path, FakeNvmlMachine], monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU 3 falls off the bus: the event set it is registered to answers GPU_IS_LOST on every wait.
    The set is registered again at once without it, so an Xid of GPU 0 meanwhile is pushed at once,
    not after a retry (every 5 s: an hour here, never within the test)."""
    root, machine = node
    monkeypatch.setattr(gpu_xid_events, "EVENT_RETRY_S", 3600.0)
    host = HostRoot(root)
    nvml = CountingWaits(open_nvml(host, timeout_s=DEADLINE_S))
    collector = GpuCollector(nvml, host, StepClock(), event_wait_s=0.05)  # type: ignore[arg-type]
    pushed: list[EventDraft] = []
    collector.start(lambda records: pushed.extend(r for r in records if isinstance(r, EventDraft)))
    try:
        end = time.monotonic() + DEADLINE_S
        while list(machine.event_sets().values()) != [frozenset(range(4))]:
            assert time.monotonic() < end, "no event set registered"
            time.sleep(0.01)
        machine.post_xid(3, 79)
        machine.fail("gpu_lost", 3)
        # Until a wait has answered GPU_IS_LOST (a wait raised, or the set was registered again).
        while nvml.failed == 0 and 3 in set().union(*machine.event_sets().values()):
            assert time.monotonic() < end, "no wait answered GPU_IS_LOST"
            time.sleep(0.01)
        while not any(e.subject == "gpu:0" for e in pushed):
            assert time.monotonic() < end, "no Xid of GPU 0 while GPU 3 is lost"
            machine.post_xid(0, 13)
            time.sleep(0.01)
        registered = machine.event_sets()
    finally:
        collector.close()
    assert [(e.subject, e.data and e.data["xid"]) for e in pushed][:2] == [("gpu:3", 79), ("gpu:0", 13)]
    assert list(registered.values()) == [frozenset({0, 1, 2})]
    assert nvml.failed == 0


def test_an_xid_event_of_a_handle_not_registered_names_no_gpu_none() -> None:
    """An event for a device handle the event set does not know (a GPU reset since it was registered)."""
    events = gpu_xid_events.XidEvents(CountingWaits(None), 0.05, 1.0)  # type: ignore[arg-type]
    event = events._event(NvmlXid(index=None, uuid=None, pci_bus_id=None, xid=154))
    assert (event.subject, event.message) == ("gpu:unknown", "Xid 154 on an unknown GPU: Xid")


def test_event_waits_that_fail_are_in_the_collectors_status_and_said_by_events(
        node: tuple[Path, FakeNvmlMachine], monkeypatch: pytest.MonkeyPatch) -> None:
    """The readings are fine, so the collector is ok; but while every event wait fails no Xid comes
    through NVML: its status says so (it was a line in the agent's log only), and two events mark it."""
    _, machine = node
    nvml, collector = failing_waits(node, monkeypatch)
    collector.start(lambda records: None)
    seen: list[EventDraft] = []
    try:
        end = time.monotonic() + DEADLINE_S
        while not machine.event_sets():
            assert time.monotonic() < end, "no event set registered"
            time.sleep(0.01)
        assert collector.status_note() is None
        machine.fail("gpu_lost", 3)
        while nvml.failed < 2:
            assert time.monotonic() < end, "the waits did not fail"
            time.sleep(0.01)
        seen.extend(_split(list(collector.collect()))[1])
        failing = collector.status_note()
        machine.heal("gpu_lost", 3)
        answered = nvml.answered
        while nvml.answered < answered + 2:
            assert time.monotonic() < end, "the waits did not answer again"
            time.sleep(0.01)
        seen.extend(_split(list(collector.collect()))[1])
        healed = collector.status_note()
    finally:
        collector.close()
    assert failing is not None and failing.startswith("NVML Xid events not received: waiting failed: "
                                                      "NVMLError_GpuIsLost: GPU is lost")
    assert healed is None
    said = [(e.kind, e.severity) for e in seen if e.subject == "gpu:events"]
    assert said == [("nvml_events_failed", "warning"), ("nvml_events_resumed", "info")]
