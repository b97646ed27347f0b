"""The rail's staleness does not count time the agent did not run (SIGSTOP, ^Z, a paused VM): the
ADC's lines waited in the port, and judged before the reader had read them the rail was called
silent (`psu_adc_silent` went pending). A read hung in the driver still makes the rail stale."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.collectors.psu import PsuCollector
from rigmon.config import PsuSection
from rigmon.hw.root import HostRoot
from rigmon.schema import PsuRailReading
from tests.collectors.psu_helpers import Pushed, rm1, wait_for


class ManualClock:
    """Time that moves only when the test says so."""

    def __init__(self) -> None:
        self.mono = 10.0

    def monotonic(self) -> float:
        return self.mono

    def time(self) -> float:
        return 1_800_000_000.0 + self.mono


class HeldPort:
    """A port whose reads return the queued bytes (``b""`` when none), or wait while held: the
    reader standing still, as in a stopped process or a driver that hangs."""

    def __init__(self) -> None:
        self.queued: list[bytes] = []
        self.free = threading.Event()
        self.free.set()
        self.waiting = threading.Event()
        self.lock = threading.Lock()

    def read(self, max_bytes: int) -> bytes:
        if not self.free.is_set():
            self.waiting.set()
            self.free.wait()
            self.waiting.clear()
        with self.lock:
            data = self.queued.pop(0) if self.queued else b""
        if not data:
            self.free.wait(0.005)
        return data

    def line(self, line: str) -> None:
        with self.lock:
            self.queued.append(f"{line}\r\n".encode())

    def hold(self) -> None:
        self.free.clear()
        wait_for(self.waiting.is_set)

    def write(self, data: bytes) -> None:
        pass

    def reset_input(self) -> None:
        pass

    def close(self) -> None:
        self.free.set()


@pytest.fixture
def rail(tmp_path: Path) -> Iterator[tuple[PsuCollector, HeldPort, ManualClock]]:
    clock, port = ManualClock(), HeldPort()
    collector = PsuCollector(PsuSection(port="/dev/ttyACM0", stale_after_s=3.0, query_identity=False),
                             HostRoot(tmp_path), clock, open_port=lambda path, baud: port)
    collector.start(Pushed())
    wait_for(lambda: collector.state.connected)
    port.line("partial")
    port.line(rm1(1))
    wait_for(lambda: collector.state.counters.windows_total > 0)
    yield collector, port, clock
    port.free.set()
    collector.close()


def reading(collector: PsuCollector) -> PsuRailReading:
    record = collector.collect()[0]
    assert isinstance(record, PsuRailReading)
    return record


def test_a_stop_of_the_agent_is_not_silence_of_the_adc(rail: tuple[PsuCollector, HeldPort, ManualClock]) -> None:
    collector, port, clock = rail
    assert not reading(collector).stale
    clock.mono += 1.0
    assert not reading(collector).stale
    # The agent stops for 4 s: the reader stands still (the ADC's lines wait in the port), and so do
    # the frames. Resumed, a frame is read before the reader has caught up.
    port.hold()
    port.line(rm1(2))
    clock.mono += 4.0
    assert not reading(collector).stale
    # The reader catches up: the waiting line is a fresh window.
    port.free.set()
    wait_for(lambda: collector.state.counters.windows_total > 1)
    clock.mono += 0.5
    fresh = reading(collector)
    assert not fresh.stale and fresh.windows == 1


def test_a_read_hung_in_the_driver_still_makes_the_rail_stale(
        rail: tuple[PsuCollector, HeldPort, ManualClock]) -> None:
    collector, port, clock = rail
    assert not reading(collector).stale
    port.hold()  # the reader's read never returns; the frames come on time, once a second
    stale_at = None
    for second in range(1, 10):
        clock.mono += 1.0
        if reading(collector).stale:
            stale_at = second
            break
    # Stale past the limit (3 s), late by at most a frame's interval and the reader's lag (`READER_LAG_S`, 2 s).
    assert stale_at is not None and stale_at <= 5, stale_at
