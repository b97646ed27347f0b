"""PZEM-017 over Modbus RTU: the collector polls a responder on a real pty built on pymodbus's own framer."""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import pytest
from pymodbus.framer import FramerRTU
from pymodbus.pdu import DecodePDU
from pymodbus.pdu.register_message import (
    ReadInputRegistersRequest,
    ReadInputRegistersResponse,
)

from rigmon.clock import SystemClock
from rigmon.collectors.base import CollectorError
from rigmon.collectors.psu import PsuCollector
from rigmon.config import PsuSection
from rigmon.hw.root import HostRoot
from rigmon.schema import PsuRailReading
from tests.collectors.psu_helpers import LINK, PtyDevice, Pushed, wait_for

ADDRESS = 1


class PzemResponder:
    """A PZEM-017 on a pty: answers function 0x04 reads with its input registers.

    Framing and CRC come from pymodbus (FramerRTU); ``corrupt`` flips the CRC of answers.
    """

    def __init__(self, device: PtyDevice) -> None:
        self.device = device
        self.registers = [1184, 9610, 0x7A1C, 0x0001, 5000, 0, 0, 0]  # 11.84 V, 96.10 A, 11398.0 W
        self.corrupt = False
        #: Answer nothing (a meter at another address, or not a meter at all).
        self.silent = False
        self.answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        framer = FramerRTU(DecodePDU(is_server=True))
        buffer = b""
        while not self._stop.is_set():
            master = self.device.master
            if master is None:
                self._stop.wait(0.01)
                buffer = b""
                continue
            try:
                ready, _, _ = select.select([master], [], [], 0.05)
                if not ready:
                    continue
                buffer += os.read(master, 256)
            except OSError:
                continue
            used, request = framer.handleFrame(buffer, 0, 0)
            buffer = buffer[used:]
            if not isinstance(request, ReadInputRegistersRequest) or request.dev_id != ADDRESS or self.silent:
                continue
            regs = self.registers[request.address : request.address + request.count]
            frame = framer.buildFrame(ReadInputRegistersResponse(dev_id=ADDRESS, registers=regs))
            if self.corrupt:
                frame = frame[:-1] + bytes([frame[-1] ^ 0xFF])
            try:
                os.write(master, frame)
            except OSError:
                continue
            self.answered += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


@pytest.fixture
def meter(tmp_path: Path) -> Iterator[tuple[PsuCollector, PzemResponder, PtyDevice, Pushed]]:
    device = PtyDevice(tmp_path)
    responder = PzemResponder(device)
    config = PsuSection(port=LINK, protocol="pzem017", baud=9600, poll_interval_s=0.05,
                        reopen_min_s=0.05, reopen_max_s=0.2)
    collector = PsuCollector(config, HostRoot(tmp_path), SystemClock())
    pushed = Pushed()
    collector.start(pushed)
    yield collector, responder, device, pushed
    collector.close()
    responder.stop()
    device.close()


def test_pzem017_readings_over_modbus(meter: tuple[PsuCollector, PzemResponder, PtyDevice, Pushed]) -> None:
    collector, responder, _, _ = meter
    wait_for(lambda: collector.state.counters.windows_total >= 2)
    reading = collector.collect()[0]
    assert isinstance(reading, PsuRailReading)
    assert reading.protocol == "pzem017" and reading.envelope_source == "host"
    assert reading.volts is not None and reading.volts.min_volts == 11.84
    assert reading.amps is not None and reading.amps.mean_amps == 96.1
    assert reading.power_w == 9679.6  # (0x0001 << 16 | 0x7A1C) * 0.1 W, low word first
    assert reading.energy_wh_total == 5000.0


def test_pzem017_low_voltage_alarm_is_pushed(meter: tuple[PsuCollector, PzemResponder, PtyDevice, Pushed]) -> None:
    collector, responder, _, pushed = meter
    wait_for(lambda: collector.state.counters.windows_total >= 1)
    responder.registers = [1120, 9900, 0, 0, 0, 0, 0, 0xFFFF]
    wait_for(lambda: pushed.of(PsuRailReading))
    sag = pushed.of(PsuRailReading)[0]
    assert isinstance(sag, PsuRailReading) and sag.volts is not None
    assert sag.volts.min_volts == 11.2 and sag.sag and sag.under_voltage_latched


def test_pzem017_bad_crc_is_a_read_error_not_a_reading(
    meter: tuple[PsuCollector, PzemResponder, PtyDevice, Pushed],
) -> None:
    collector, responder, _, _ = meter
    wait_for(lambda: collector.state.counters.windows_total >= 1)
    collector.collect()
    responder.corrupt = True
    responder.registers = [500, 0, 0, 0, 0, 0, 0, 0]
    before = collector.state.counters.windows_total
    wait_for(lambda: collector.state.counters.read_errors_total >= 2)
    assert collector.state.counters.windows_total == before
    reading = collector.collect()[0]
    assert isinstance(reading, PsuRailReading) and reading.windows == 0
    assert reading.volts is not None and reading.volts.min_volts == 11.84


def test_pzem017_unplug_and_replug(meter: tuple[PsuCollector, PzemResponder, PtyDevice, Pushed]) -> None:
    collector, responder, device, _ = meter
    wait_for(lambda: collector.state.counters.windows_total >= 1)
    device.unplug()
    wait_for(lambda: not collector.state.connected)
    with pytest.raises(CollectorError):
        collector.collect()
    device.replug()
    wait_for(lambda: collector.state.connected and collector.state.counters.opens_total == 2)
    seen = collector.state.counters.windows_total
    wait_for(lambda: collector.state.counters.windows_total > seen)


def test_a_pzem017_without_a_baud_is_opened_at_its_factory_9600(tmp_path: Path) -> None:
    """`baud` defaulted to 115200 whatever the protocol: a PZEM-017 configured as its README line
    shows was polled at a speed it cannot talk and never answered."""
    from rigmon.hw.modbus import ModbusPortError

    asked: list[int] = []
    opened = threading.Event()

    def opener(path: str, baud: int, slave: int) -> Any:
        asked.append(baud)
        opened.set()
        raise ModbusPortError("not here")

    collector = PsuCollector(PsuSection(port=LINK, protocol="pzem017", reopen_min_s=0.05, reopen_max_s=0.1),
                             HostRoot(tmp_path), SystemClock(), open_modbus_device=opener)
    collector.start(Pushed())
    try:
        assert opened.wait(5)
    finally:
        collector.close()
    assert asked[0] == 9600
    assert PsuSection(protocol="rm1").line_baud == 115200 and PsuSection(protocol="pzem017", baud=4800).line_baud == 4800
    with pytest.raises(ValueError, match="baud: a PZEM-017 talks at 1200, 2400, 4800, 9600"):
        PsuSection(protocol="pzem017", baud=115200)


def test_a_silent_meter_is_logged_once_by_rigmon_not_every_poll_by_pymodbus(
    meter: tuple[PsuCollector, PzemResponder, PtyDevice, Pushed], caplog: pytest.LogCaptureFixture,
) -> None:
    """pymodbus logged an ERROR for each unanswered poll and a WARNING with the bytes it threw away,
    once a second beside rigmon's own account; rigmon says it once per kind, with the port, the
    config key and what pymodbus saw (an RM1 ADC talking on the meter's line)."""
    collector, responder, device, _ = meter
    wait_for(lambda: collector.state.counters.windows_total >= 1)
    caplog.set_level(logging.INFO)
    responder.silent = True
    wait_for(lambda: collector.state.counters.read_errors_total >= 1)
    for seq in range(3):
        errors = collector.state.counters.read_errors_total
        device.write(f"$RM1,seq={seq},up=1000\r\n")
        wait_for(lambda: collector.state.counters.read_errors_total > errors)  # noqa: B023 (waited for here)
    responder.silent = False
    seen = collector.state.counters.windows_total
    wait_for(lambda: collector.state.counters.windows_total > seen)
    assert not [r for r in caplog.records if r.name.startswith("pymodbus")]
    ours = [r.getMessage() for r in caplog.records if r.name == "rigmon.collectors.psu"]
    failed = [m for m in ours if "gave no valid answer" in m]
    assert len(failed) == 2, ours  # no answer; no answer with bytes on the line: once each
    assert all(f"psu.port {LINK}" in m and "psu.pzem_address" in m and "No response" in m for m in failed)
    assert "bytes nobody asked for were waiting on the line: b'$RM1,seq=" in failed[1]
    assert [m for m in ours if "answers again after" in m]
