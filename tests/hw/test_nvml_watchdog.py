"""NVML's watchdog: a hung call is reported and recovers, one stuck watchdog stalls no other, its thread
ends on close."""

from __future__ import annotations

import threading

import pytest

from rigmon.hw.nvml import NvmlHung, PynvmlNvml, Watchdog
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.hw.nvml_helpers import DEADLINE_S, _eventually


def test_hang_marks_hung_and_recovers(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=0.2)
        try:
            assert nvml.device_count() == 4
            machine.fail("hang")
            with pytest.raises(NvmlHung):
                nvml.device_count()
            # Still stuck: fails at once rather than queueing behind the stuck call.
            with pytest.raises(NvmlHung, match="has not returned"):
                nvml.read_device(0, 0)
            machine.heal("hang")

            def answers() -> bool:
                try:
                    return nvml.device_count() == 4
                except NvmlHung:
                    return False

            _eventually(answers)
        finally:
            nvml.close()


def test_watchdog_hang_does_not_stall_another_watchdog() -> None:
    release = threading.Event()
    stuck, free = Watchdog("stuck", None), Watchdog("free", None)
    try:
        with pytest.raises(NvmlHung):
            stuck.run(release.wait, 0.05)
        assert stuck.stuck
        assert free.run(lambda: 7, DEADLINE_S) == 7
        release.set()
        _eventually(lambda: not stuck.stuck)
        assert stuck.run(lambda: 8, DEADLINE_S) == 8
    finally:
        release.set()
        stuck.close()
        free.close()


def test_watchdog_thread_ends_on_close_and_a_closed_watchdog_runs_nothing() -> None:
    watchdog = Watchdog("closing", None)
    assert watchdog.run(lambda: threading.current_thread().name, DEADLINE_S) == "rigmon-nvml-closing_0"
    assert watchdog.run(lambda: threading.current_thread().daemon, DEADLINE_S)
    with pytest.raises(ZeroDivisionError):
        watchdog.run(lambda: 1 // 0, DEADLINE_S)  # the call's own error reaches the caller
    watchdog.close()
    _eventually(lambda: not [t for t in threading.enumerate() if t.name == "rigmon-nvml-closing_0"])
    with pytest.raises(RuntimeError):
        watchdog.run(lambda: 1, DEADLINE_S)


def test_a_stuck_watchdog_thread_ends_when_its_call_returns_after_close() -> None:
    release = threading.Event()
    watchdog = Watchdog("stuck-close", None)
    try:
        with pytest.raises(NvmlHung):
            watchdog.run(release.wait, 0.05)
        watchdog.close()  # returns at once
        assert [t for t in threading.enumerate() if t.name == "rigmon-nvml-stuck-close_0"]
    finally:
        release.set()
    _eventually(lambda: not [t for t in threading.enumerate() if t.name == "rigmon-nvml-stuck-close_0"])
