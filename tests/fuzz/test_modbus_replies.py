"""Fuzzing Modbus RTU replies: whatever a PZEM-017 (or line noise) answers on a real pty, the
device layer returns registers or raises its own errors, and the decoder returns a window or
raises `LineError`."""

from __future__ import annotations

import os
import select
import threading
import tty

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymodbus.framer import FramerRTU
from pymodbus.pdu import DecodePDU
from pymodbus.pdu.register_message import ReadInputRegistersResponse

from rigmon.collectors.psu_lines import PZEM_REGISTER_COUNT, LineError, parse_pzem017_registers
from rigmon.hw.modbus import ModbusPortError, ModbusReadError, PymodbusDevice

ADDRESS = 1


def _valid_reply(registers: list[int]) -> bytes:
    framer = FramerRTU(DecodePDU(is_server=True))
    return bytes(framer.buildFrame(ReadInputRegistersResponse(dev_id=ADDRESS, registers=registers)))


@st.composite
def replies(draw: st.DrawFn) -> bytes:
    """A well-formed reply with random registers, bit flips, cuts or junk around it; or pure noise."""
    registers = draw(st.lists(st.integers(0, 0xFFFF), min_size=0, max_size=12))
    frame = bytearray(_valid_reply(registers))
    kind = draw(st.sampled_from(("valid", "flip", "cut", "junk", "noise")))
    if kind == "flip" and frame:
        i = draw(st.integers(0, len(frame) - 1))
        frame[i] ^= draw(st.integers(1, 255))
    elif kind == "cut":
        frame = frame[: draw(st.integers(0, len(frame)))]
    elif kind == "junk":
        frame = bytearray(draw(st.binary(max_size=8))) + frame + bytearray(draw(st.binary(max_size=8)))
    elif kind == "noise":
        frame = bytearray(draw(st.binary(max_size=64)))
    return bytes(frame)


class Answerer:
    """The far end of the pty: reads each request and answers with the bytes it is given."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.reply = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.02)
            if not ready:
                continue
            try:
                os.read(self.master, 256)
                if self.reply:
                    os.write(self.master, self.reply)
            except OSError:
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


def test_any_reply_is_registers_or_a_modbus_error() -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    answerer = Answerer(master)
    device = PymodbusDevice(os.ttyname(slave), 9600, ADDRESS, timeout_s=0.05)
    outcomes: set[str] = set()

    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(replies())
    def one(reply: bytes) -> None:
        answerer.reply = reply
        try:
            registers = device.read_input_registers(0, PZEM_REGISTER_COUNT)
        except (ModbusReadError, ModbusPortError):
            outcomes.add("modbus-error")
            return
        assert all(isinstance(r, int) and 0 <= r <= 0xFFFF for r in registers)
        try:
            parse_pzem017_registers(registers)
            outcomes.add("window")
        except LineError:
            outcomes.add("line-error")

    try:
        one()
    finally:
        device.close()
        answerer.stop()
        os.close(master)
        os.close(slave)
    # The strategy reaches both sides of the contract.
    assert "modbus-error" in outcomes and outcomes & {"window", "line-error"}
