"""The reference firmware's C formatter, compiled with gcc on the host, parsed by rigmon's own parser."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rigmon.collectors.psu_lines import RailWindow, Rm1Identity, parse_rm1_line

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


@pytest.fixture(scope="module")
def rm1_host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary = tmp_path_factory.mktemp("rm1") / "rm1_host"
    subprocess.run(
        ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-o", str(binary),
         str(FIRMWARE / "host_test.c"), str(FIRMWARE / "rigmon_rm1" / "rm1.c")],
        check=True, capture_output=True,
    )
    return binary


def run(binary: Path, script: str) -> list[str]:
    raw = subprocess.run([str(binary)], input=script.encode(), capture_output=True, check=True).stdout
    out = raw.decode("ascii")
    assert out.endswith("\r\n") or out.endswith("OVERFLOW\n")
    return out.splitlines()


def test_window_with_a_sag_sample_parses_to_its_minimum(rm1_host: Path) -> None:
    samples = "".join(f"s {12000 + k % 7} {30000 + k} {12050}\n" for k in range(890))
    lines = run(rm1_host, "id rmfw-0.3 E6614103E7452D2F ina226 1000\n" + samples + "s 11384 98000 11655\nf 4\nw 1841 1843520\n")
    identity, window = (parse_rm1_line(line) for line in lines)
    assert identity == Rm1Identity(proto=1, firmware="rmfw-0.3", device_id="E6614103E7452D2F",
                                   sensor="ina226", win_ms=1000, channels=("v", "i", "vpsu"))
    assert isinstance(window, RailWindow)
    assert (window.seq, window.up_ms, window.win_ms, window.samples, window.flags) == (1841, 1843520, 1843520, 891, 4)
    assert window.volts["v"].min == 11.384 and window.volts["v"].max == 12.006
    assert window.volts["vpsu"].min == 11.655
    assert window.amps["i"].max == 98.0


def test_empty_window_negative_values_and_uptime_wrap(rm1_host: Path) -> None:
    lines = run(rm1_host, "w 0 5000\nf 1\nw 1 6000\ns -120 -4500 0\ns -80 -5500 1\nw 2 100\n")
    first, second, third = (parse_rm1_line(line) for line in lines)
    assert isinstance(first, RailWindow) and first.samples == 0 and first.volts == {} and first.win_ms == 5000
    assert isinstance(second, RailWindow) and second.flags == 1
    assert isinstance(third, RailWindow)
    # up wrapped from 6000 to 100 through 2^32: the window length is still right.
    assert third.win_ms == (100 - 6000) % 2**32
    assert third.volts["v"].mean == -0.1 and third.amps["i"].min == -5.5


def test_line_that_would_exceed_200_bytes_is_not_sent(rm1_host: Path) -> None:
    fits, too_long = run(rm1_host, "id " + "f" * 40 + " " + "I" * 40 + " " + "s" * 40 + " 60000\n"
                         + "id " + "f" * 60 + " " + "I" * 60 + " " + "s" * 60 + " 60000\n")
    assert len(fits) + 2 <= 200 and isinstance(parse_rm1_line(fits), Rm1Identity)
    assert too_long == "OVERFLOW"


# ---------------------------------------------------------------------------------------
# The sketch itself (rigmon_rm1.ino) on the host, with an AVR's 64-byte serial buffer
# (tests/firmware/arduino_host: a stand-in Arduino.h and Wire.h with an INA226 at 12 V, 40 A).


@pytest.fixture(scope="module")
def sketch_host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    build = tmp_path_factory.mktemp("sketch")
    host = Path(__file__).resolve().parent / "arduino_host"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", "-o", str(build / "rm1.o"),
                    str(FIRMWARE / "rigmon_rm1" / "rm1.c")], check=True, capture_output=True)
    subprocess.run(
        ["g++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-I", str(host), "-I", str(FIRMWARE / "rigmon_rm1"),
         "-o", str(build / "sketch_host"), str(host / "main.cpp"), str(build / "rm1.o")],
        check=True, capture_output=True,
    )
    return build / "sketch_host"


def test_sketch_sends_whole_lines_through_a_buffer_smaller_than_a_line(sketch_host: Path) -> None:
    # An Arduino Nano's transmit buffer holds 63 bytes; a window line is ~100. Waiting for room
    # for the whole line dropped every record: the board sent nothing at all.
    out = subprocess.run([str(sketch_host), "3500", "11"], capture_output=True, check=True).stdout.decode("ascii")
    records = [parse_rm1_line(line) for line in out.splitlines()]
    assert isinstance(records[0], Rm1Identity) and records[0].firmware == "rmfw-0.3"
    windows = [r for r in records[1:] if isinstance(r, RailWindow)]
    assert [w.seq for w in windows] == [0, 1, 2] and len(records) == 4
    assert all(w.flags == 0 and w.volts["v"].min == 12.0 and w.amps["i"].mean == 40.0 for w in windows)


def test_sketch_drops_records_while_the_host_does_not_read(sketch_host: Path) -> None:
    # Nothing drains the buffer: the sketch never blocks (the loop ran to its end) and sends at
    # most what fits; no partial record is followed by another record's bytes.
    out = subprocess.run([str(sketch_host), "3500", "0"], capture_output=True, check=True).stdout
    assert len(out) <= 63 and b"\n" not in out


def test_a_dropped_record_passes_its_under_voltage_alert_on(sketch_host: Path) -> None:
    # The host stops reading from 0.9 s to 2.5 s; window 1 (1-2 s) is dropped while window 0's line
    # still waits in the buffer, and the INA226's under-voltage alert latched in it (1.2 s). Before,
    # the next record said only "overrun": the sag the comparator caught raised no alarm.
    out = subprocess.run([str(sketch_host), "3500", "11", "900", "2500", "1200"], capture_output=True,
                         check=True).stdout.decode("ascii")
    windows = [r for r in map(parse_rm1_line, out.splitlines()) if isinstance(r, RailWindow)]
    assert [(w.seq, w.flags) for w in windows] == [(0, 0), (2, 8 | 4)]
    # Without a stall the alert is its own window's.
    out = subprocess.run([str(sketch_host), "3500", "11", "0", "0", "1200"], capture_output=True,
                         check=True).stdout.decode("ascii")
    windows = [r for r in map(parse_rm1_line, out.splitlines()) if isinstance(r, RailWindow)]
    assert [(w.seq, w.flags) for w in windows] == [(0, 0), (1, 4), (2, 0)]
