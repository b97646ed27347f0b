"""PSU rail collector: the reader thread over a real pty (pyserial, no patched port)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import serial

from rigmon.clock import SystemClock
from rigmon.collectors.base import CollectorError, NoData
from rigmon.collectors.psu import PsuCollector
from rigmon.config import PsuSection
from rigmon.hw.root import HostRoot
from rigmon.hw.serialport import PySerialPort
from rigmon.schema import PsuRailReading
from tests.collectors.psu_helpers import (
    IDENTITY,
    LINK,
    SAG,
    FakeTtyWatch,
    PtyDevice,
    Pushed,
    events,
    make_collector,
    rm1,
    wait_for,
)
from tests.collectors.psu_helpers import pty_device  # noqa: F401  (fixture)


@pytest.fixture
def started(pty_device: PtyDevice, tmp_path: Path) -> Iterator[tuple[PsuCollector, Pushed, PtyDevice]]:
    pushed = Pushed()
    collector = make_collector(tmp_path)
    collector.start(pushed)
    wait_for(lambda: collector.state.connected)
    yield collector, pushed, pty_device
    collector.close()


def rail(collector: PsuCollector) -> PsuRailReading:
    reading = collector.collect()[0]
    assert isinstance(reading, PsuRailReading)
    return reading


def test_no_port_configured_is_absent(tmp_path: Path) -> None:
    collector = PsuCollector(PsuSection(), HostRoot(tmp_path), SystemClock())
    collector.start(Pushed())
    with pytest.raises(NoData):
        collector.collect()
    collector.close()


def test_close_ends_a_read_waiting_for_a_silent_device(pty_device: PtyDevice, tmp_path: Path) -> None:
    """The reader waits in the driver while the device is silent; `close` wakes it, not the read's timeout."""
    collector = PsuCollector(PsuSection(port=LINK, query_identity=False), HostRoot(tmp_path), SystemClock(),
                             open_port=lambda path, baud: PySerialPort(path, baud, timeout_s=25.5))
    collector.start(Pushed())
    wait_for(lambda: collector.state.connected)
    time.sleep(0.2)  # the reader waits in the driver
    reader = collector._thread
    collector.close()
    assert reader is not None and not reader.is_alive()


def test_sag_over_pty_is_pushed_at_once_with_its_minimum(started: tuple[PsuCollector, Pushed, PtyDevice]) -> None:
    collector, pushed, device = started
    device.write("...0,n=890,v=12061/12049/12074*79\r\n")  # the tail of a line: dropped
    device.lines(rm1(1839), rm1(1840), SAG)
    wait_for(lambda: pushed.of(PsuRailReading))
    sag = pushed.of(PsuRailReading)[0]
    assert isinstance(sag, PsuRailReading) and sag.sag and sag.under_voltage_latched
    assert sag.volts is not None and sag.volts.min_volts == 11.384
    wait_for(lambda: collector.state.counters.windows_total == 3)
    reading = rail(collector)
    # The pushed reading was a frame of its own: the next one does not count its windows
    # again; with no new window it repeats the last (windows 0), so the minimum stays shown.
    assert sum(r.windows for r in pushed.of(PsuRailReading) if isinstance(r, PsuRailReading)) == 3
    assert reading.volts is not None and reading.volts.min_volts == 11.384 and reading.windows == 0
    assert not reading.sag and reading.counters.partial_lines_total == 1 and reading.connected


def test_reader_asks_for_identity_after_the_partial_line(started: tuple[PsuCollector, Pushed, PtyDevice]) -> None:
    collector, _, device = started
    device.lines("garbage tail", rm1(0))
    wait_for(lambda: b"?" in device.read_host())
    device.lines(IDENTITY, rm1(1))
    wait_for(lambda: collector.state.counters.windows_total == 2)
    reading = rail(collector)
    assert reading.device_id == "E6614103E7452D2F" and reading.firmware == "rmfw-0.3"
    assert reading.counters.reboots_total == 0


def test_port_is_opened_exclusively(started: tuple[PsuCollector, Pushed, PtyDevice]) -> None:
    _, _, device = started
    with pytest.raises(serial.SerialException):
        serial.Serial(str(device.link), exclusive=True)


def test_garbage_never_crashes_or_reads(started: tuple[PsuCollector, Pushed, PtyDevice]) -> None:
    collector, pushed, device = started
    junk = bytes(range(256)) * 3 + b"\r\n" + os.urandom(2000) + b"\n"
    device.write(junk)
    device.write("\n" + SAG.replace("11384", "5000").replace("*09", "*5E") + "\r\n$RM1,seq=3,up=\r\n")
    device.lines(rm1(7))
    wait_for(lambda: collector.state.counters.windows_total == 1)
    reading = rail(collector)
    assert reading.volts is not None and reading.volts.min_volts == 12.001
    assert not pushed.of(PsuRailReading)
    dropped = reading.counters
    assert dropped.malformed_lines_total + dropped.checksum_errors_total + dropped.long_lines_total >= 2


def test_unplug_replug_and_reboot_over_pty(started: tuple[PsuCollector, Pushed, PtyDevice]) -> None:
    collector, pushed, device = started
    device.lines("tail", rm1(40), rm1(41))
    wait_for(lambda: collector.state.counters.windows_total == 2)
    device.unplug()
    wait_for(lambda: events(pushed.records, "psu_adc_disconnected"))
    with pytest.raises(CollectorError, match="retrying"):
        collector.collect()
    device.replug()
    wait_for(lambda: collector.state.connected)
    # The MCU rebooted: its seq starts again.
    device.lines("tail", rm1(0, up=1000), rm1(1, up=2000))
    wait_for(lambda: collector.state.counters.windows_total == 4)
    reading = rail(collector)
    assert reading.counters.opens_total == 2 and reading.counters.disconnects_total == 1
    assert reading.counters.reboots_total == 1 and reading.seq == 1
    assert events(pushed.records, "psu_adc_rebooted") and events(pushed.records, "psu_adc_reconnected")


def test_lines_sent_as_soon_as_the_reader_says_it_is_back_are_read(
        pty_device: PtyDevice, tmp_path: Path) -> None:
    # The ADC sends right after the open: here it answers the reconnected event itself, in
    # the reader's thread, so it cannot be late for it. Whatever the reader discards as
    # stale must be discarded before it reports the port open, or these lines are lost.
    class SendsWhenBack(Pushed):
        def __call__(self, records: object) -> None:
            super().__call__(records)
            if events(list(records), "psu_adc_reconnected"):  # type: ignore[call-overload]
                pty_device.lines("tail", rm1(5))

    collector = make_collector(tmp_path)
    collector.start(SendsWhenBack())
    try:
        wait_for(lambda: collector.state.connected)
        pty_device.unplug()
        wait_for(lambda: not collector.state.connected)
        pty_device.replug()
        wait_for(lambda: collector.state.counters.windows_total == 1)
        assert rail(collector).seq == 5
    finally:
        collector.close()


def test_udev_tty_add_retries_at_once(pty_device: PtyDevice, tmp_path: Path) -> None:
    watch = FakeTtyWatch()
    # The backoff is an hour: only the udev kick can bring the port back within the test.
    collector = make_collector(tmp_path, watch, reopen_min_s=3600.0, reopen_max_s=3600.0)
    collector.start(Pushed())
    try:
        wait_for(lambda: collector.state.connected)
        pty_device.unplug()
        wait_for(lambda: not collector.state.connected)
        pty_device.replug()
        assert watch.on_added is not None
        watch.on_added("/dev/ttyACM0")
        wait_for(lambda: collector.state.connected)
        assert collector.state.counters.opens_total == 2
    finally:
        collector.close()


def test_text_protocol_over_pty(pty_device: PtyDevice, tmp_path: Path) -> None:
    collector = make_collector(tmp_path, protocol="text", channels={"v": "Voltage[V]", "i": "Current[A]"})
    collector.start(Pushed())
    try:
        wait_for(lambda: collector.state.connected)
        pty_device.lines("34.567,1", "[INFO] EdgePowerMeter", "Timestamp,Voltage[V],Current[A],Power[W]",
                         "2025-11-30 12:34:56.123,11.845,96.1,1138.3", "2025-11-30 12:34:56.124,11.512,99.0,1139.7")
        wait_for(lambda: collector.state.counters.windows_total == 2)
        reading = rail(collector)
        assert reading.envelope_source == "host" and reading.samples == 2
        assert reading.volts is not None and reading.volts.min_volts == 11.512 and reading.volts.max_volts == 11.845
    finally:
        collector.close()


def test_an_unplugged_adc_is_named_once_with_its_config_key(started: tuple[PsuCollector, Pushed, PtyDevice]) -> None:
    """The error said the port twice ("/dev/x: /dev/x: Input/output error", "/dev/x: cannot open /dev/x: ...")
    and never which setting to look at."""
    collector, pushed, device = started
    device.lines(rm1(1), rm1(2))
    wait_for(lambda: collector.state.counters.windows_total >= 1)
    device.unplug()
    wait_for(lambda: collector.state.counters.disconnects_total == 1)
    gone = events(pushed.records, "psu_adc_disconnected")[0].message
    assert gone.count(LINK) == 1 and "psu.port" in gone and "unplugged" in gone, gone
    wait_for(lambda: "no such device" in (collector.state.last_error or ""))
    with pytest.raises(CollectorError) as caught:
        collector.collect()
    message = str(caught.value)
    assert message.startswith("psu.port: cannot open") and message.count(LINK) == 1, message


def test_an_unplugged_adc_reads_not_connected_with_its_counters(
        started: tuple[PsuCollector, Pushed, PtyDevice]) -> None:
    """The port gone, the collector failed with no reading at all: the rail vanished from the frame and
    /metrics (``rigmon_psu_rail_connected`` never 0, the counters gone until the replug). It still fails,
    with the rail's reading: not connected, stale, no envelope, the counters as they stand."""
    collector, _, device = started
    device.lines("tail", rm1(40), rm1(41))
    wait_for(lambda: collector.state.counters.windows_total == 2)
    device.unplug()
    wait_for(lambda: not collector.state.connected)
    with pytest.raises(CollectorError, match="retrying") as caught:
        collector.collect()
    # The windows that came before the port went are not lost: this frame's reading has them.
    (before,) = caught.value.records
    assert isinstance(before, PsuRailReading) and not before.connected
    assert before.windows == 2 and before.volts is not None and before.seq == 41
    with pytest.raises(CollectorError, match="retrying") as caught:
        collector.collect()
    (gone,) = caught.value.records
    assert isinstance(gone, PsuRailReading)
    assert not gone.connected and gone.stale and gone.windows == 0
    assert gone.volts is None and gone.amps is None and not gone.channels_volts and gone.power_w is None
    counters = gone.counters
    assert (counters.opens_total, counters.disconnects_total, counters.windows_total) == (1, 1, 2)
    assert counters.partial_lines_total == 1
    device.replug()
    wait_for(lambda: collector.state.connected)
    device.lines("tail", rm1(42))
    wait_for(lambda: collector.state.counters.windows_total == 3)
    back = rail(collector)
    assert back.connected and not back.stale and back.counters.opens_total == 2


def test_a_port_never_opened_fails_without_a_reading(tmp_path: Path) -> None:
    """Not found since the agent started (a wrong psu.port, an ADC not plugged in yet): no rail to report."""
    collector = make_collector(tmp_path)
    collector.start(Pushed())
    try:
        wait_for(lambda: collector.state.last_error is not None)
        with pytest.raises(CollectorError, match="retrying") as caught:
            collector.collect()
        assert caught.value.records == ()
    finally:
        collector.close()
