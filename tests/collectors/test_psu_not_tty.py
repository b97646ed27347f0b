"""A ``psu.port`` that is there but no serial device: the collector's error names what it is and what to
set instead, and the reader keeps looking (a USB adapter's link made again, a stale file removed)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from rigmon.collectors.base import CollectorError
from rigmon.collectors.psu import PsuCollector
from rigmon.schema import PsuRailReading
from tests.collectors.psu_helpers import (
    LINK,
    PtyDevice,
    Pushed,
    make_collector,
    rm1,
    wait_for,
)

ADVICE = "so not a serial device; set the port to the device's tty (ls /dev/serial/by-id/)"


def _as_file(path: Path) -> None:
    path.write_text("12.01\n")  # a script's `echo ... > /dev/ttyUSB0` while no adapter was plugged


def _as_directory(path: Path) -> None:
    path.mkdir()


def _refusal(collector: PsuCollector) -> str:
    with pytest.raises(CollectorError) as caught:
        collector.collect()
    return str(caught.value)


@pytest.mark.parametrize(("make", "kind"), [(_as_file, "a regular file"), (_as_directory, "a directory")])
def test_a_port_that_is_no_tty_is_said_so_and_looked_at_again(
        tmp_path: Path, make: Callable[[Path], None], kind: str) -> None:
    port = tmp_path / LINK.lstrip("/")
    port.parent.mkdir(parents=True)
    make(port)
    pushed = Pushed()
    collector = make_collector(tmp_path)
    collector.start(pushed)
    try:
        wait_for(lambda: collector.state.last_error is not None)
        said = collector.state.last_error
        assert said == f"cannot open {port}: {kind}, {ADVICE}"
        assert _refusal(collector) == f"psu.port: {said}; retrying"
        assert not collector.port_busy and not collector.state.gone
        # Never opened: no open counted, no event (nothing went away), no reading.
        assert collector.state.counters.opens_total == 0 and not pushed.records
        # The path becomes the ADC's tty without a restart (the file removed, the adapter plugged in).
        shutil.rmtree(port) if port.is_dir() else port.unlink()
        device = PtyDevice(tmp_path)
        try:
            wait_for(lambda: collector.state.connected)
            device.lines("tail", rm1(1))
            wait_for(lambda: collector.state.counters.windows_total == 1)
            reading = collector.collect()[0]
            assert isinstance(reading, PsuRailReading) and reading.connected and reading.volts is not None
        finally:
            device.unplug()
    finally:
        collector.close()


def test_a_tty_replaced_by_a_file_is_a_device_gone_then_a_file(tmp_path: Path) -> None:
    """The adapter unplugged and a file left at its path: the disconnect, then what the path now is."""
    device = PtyDevice(tmp_path)
    pushed = Pushed()
    collector = make_collector(tmp_path)
    collector.start(pushed)
    try:
        wait_for(lambda: collector.state.connected)
        device.unplug()
        _as_file(device.link)
        wait_for(lambda: "regular file" in (collector.state.last_error or ""))
        assert collector.state.gone and collector.state.counters.disconnects_total == 1
        assert "a regular file, so not a serial device" in _refusal(collector)
    finally:
        collector.close()
        if device.link.exists():
            os.unlink(device.link)
