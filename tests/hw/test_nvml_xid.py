"""NVML Xid events: the event set, one init shared with the poll, the wait on the waiting thread, close."""

from __future__ import annotations

import threading
import time

import pynvml
import pytest

from rigmon.hw.nvml import PynvmlNvml
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.hw.nvml_helpers import DEADLINE_S, _eventually


def test_xid_events_through_the_event_set(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            assert nvml.wait_xid(0.01) == []  # registers the GPUs
            machine.post_xid(2, 48)
            hits = nvml.wait_xid(1.0)
        finally:
            nvml.close()
    assert [(h.index, h.xid, h.pci_bus_id) for h in hits] == [(2, 48, "00000000:1C:00.0")]
    assert hits[0].uuid == machine.gpus[2].uuid


def test_the_poll_and_the_xid_thread_init_nvml_once(machine: FakeNvmlMachine, monkeypatch: pytest.MonkeyPatch) -> None:
    # Both threads' first use inits NVML; a slow nvmlInit makes them overlap every time.
    inits: list[str] = []
    real_init = pynvml.nvmlInit

    def slow_init() -> None:
        inits.append(threading.current_thread().name)
        time.sleep(0.2)
        real_init()

    monkeypatch.setattr(pynvml, "nvmlInit", slow_init)
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            waiter = threading.Thread(target=lambda: nvml.wait_xid(0.01), name="xid-waiter")
            waiter.start()
            assert nvml.device_count() == 4
            waiter.join(DEADLINE_S)
        finally:
            nvml.close()
    assert len(inits) == 1, inits  # one nvmlInit for the one nvmlShutdown at close


def test_xid_wait_runs_on_the_waiting_thread_and_close_frees_the_set(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        hits: list[object] = []
        waiter = threading.Thread(target=lambda: hits.extend(nvml.wait_xid(DEADLINE_S)), name="xid-waiter")
        try:
            assert nvml.wait_xid(0.01) == []  # registers the GPUs
            waiter.start()
            machine.post_xid(1, 79)
            waiter.join(DEADLINE_S)
            # No thread of its own: the wait ran on the thread that asked (no hand-off twice a second).
            assert not [t.name for t in threading.enumerate() if t.name.startswith("rigmon-nvml-events")]
            assert list(machine.event_sets().values()) == [frozenset(range(4))]  # one set, every GPU
        finally:
            nvml.close()
        assert machine.event_sets() == {}  # close freed the event set
        assert nvml.wait_xid(0.01) == []  # closed: no new registration
        assert machine.event_sets() == {}
    assert [(getattr(h, "index"), getattr(h, "xid")) for h in hits] == [(1, 79)]


def test_close_leaves_the_event_set_of_a_wait_stuck_in_the_driver(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=0.5)
        waiter = threading.Thread(target=lambda: nvml.wait_xid(0.05), daemon=True)
        try:
            assert nvml.wait_xid(0.01) == []
            machine.fail("hang")
            waiter.start()
            _eventually(lambda: nvml.xid_waiters == 1)
            nvml.close()  # returns although the wait and the poll thread's shutdown are stuck
            assert machine.event_sets() != {}  # not freed under the stuck wait
        finally:
            machine.heal("hang")
            waiter.join(DEADLINE_S)
