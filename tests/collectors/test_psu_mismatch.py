"""PSU rail: a device that does not speak the configured protocol is said to, once per open, with advice."""

from __future__ import annotations

import pytest

from rigmon.collectors.base import EventDraft
from rigmon.collectors.psu_device import MISMATCH_LINES
from rigmon.collectors.psu_lines import format_rm1
from rigmon.collectors.psu_rail import RailState
from rigmon.config import PsuSection
from tests.collectors.psu_helpers import rm1

NOISE = bytes([0x93, 0xF8, 0x00, 0x1E, 0xFE, 0x86, 0x3C, 0xE0])


def opened(**settings: object) -> RailState:
    state = RailState(PsuSection(port="/dev/rigmon-psu0", **settings))  # type: ignore[arg-type]
    state.opened()
    state.feed(b"tail of a line\r\n", 0.0, 0.0)
    return state


def send(state: RailState, lines: list[bytes]) -> list[EventDraft]:
    state.feed(b"".join(line + b"\r\n" for line in lines), 0.0, 0.0)
    return [e for e in state.take_events() if e.kind == "psu_adc_protocol_mismatch"]


def test_a_text_sketch_on_an_rm1_port_is_said_once_with_the_setting_to_change() -> None:
    state = opened()
    assert send(state, [b"12.061,1.23"] * (MISMATCH_LINES - 1)) == []
    said = send(state, [b"12.061,1.23"] * (MISMATCH_LINES + 5))
    assert len(said) == 1 and said[0].severity == "warning" and said[0].data == {"protocol": "rm1", "line": "12.061,1.23"}
    assert "/dev/rigmon-psu0" in said[0].message and 'psu.protocol = "text"' in said[0].message
    assert send(state, [b"12.061,1.23"] * 2 * MISMATCH_LINES) == []
    state.closed("unplugged")
    state.opened()
    assert len(send(state, [b"x"] + [b"12.061,1.23"] * MISMATCH_LINES)) == 1  # each open is judged anew


def test_an_rm1_device_on_a_text_port_is_said_at_its_first_line() -> None:
    state = opened(protocol="text", channels={"v": "0"})
    said = send(state, [rm1(3).encode()])
    assert len(said) == 1 and 'psu.protocol = "rm1"' in said[0].message


def test_line_noise_names_the_baud_rate() -> None:
    state = opened(baud=9600)
    said = send(state, [NOISE] * MISMATCH_LINES)
    assert len(said) == 1 and "psu.baud (9600)" in said[0].message and said[0].data is not None
    assert str(said[0].data["line"]).isprintable()


def test_a_sketch_printing_millivolts_without_a_scale_is_told_to_set_one() -> None:
    """Every line carries the channel, in mV: it was said to carry none, sending the operator to
    [psu.channels], which was right, instead of to [psu.scale]."""
    state = opened(protocol="text", channels={"v": "0"})
    said = send(state, [b"12030"] * MISMATCH_LINES)
    assert len(said) == 1 and "[psu.scale]" in said[0].message and "v=12030 beyond 100" in said[0].message
    assert "no line carries" not in said[0].message


def test_a_channel_mapped_to_a_value_in_another_unit_is_said_so() -> None:
    state = opened(protocol="text", channels={"v": "Current mA"})
    said = send(state, [b"Current mA:       1200.00 mA"] * MISMATCH_LINES)
    assert len(said) == 1 and "v reads 'Current mA', a value in A, not V" in said[0].message


def test_a_device_that_reads_is_never_called_a_mismatch() -> None:
    """A boot banner, a window, then chatter: the protocol is right."""
    state = opened()
    assert send(state, [b"[INFO] rmfw booting"] * 5 + [rm1(0).encode()] + [b"[DBG] ina226 ok"] * 3 * MISMATCH_LINES) == []


def missing(state: RailState, lines: list[str]) -> list[EventDraft]:
    state.feed("".join(f"{line}\r\n" for line in lines).encode(), 0.0, 0.0)
    return [e for e in state.take_events() if e.kind == "psu_adc_channel_missing"]


@pytest.mark.parametrize(("primary", "channels"), [
    ("v", "vout=12061/12049/12074,i=3112/3050/3190"),  # not a usual line: parsed key by key
    ("vpsu", "v=12061/12049/12074,i=3112/3050/3190"),  # a usual line without the channel
    ("vload", "v=12061/12049/12074"),  # a usual line, and a channel no usual line has
])
def test_windows_without_the_primary_channel_are_said_once_per_open(primary: str, channels: str) -> None:
    """The rail went stale and psu_adc_silent said "sends no valid reading" of a device that sent
    readings, only not of the channel psu.primary names."""
    state = opened(primary=primary)
    lines = [format_rm1(f"RM1,seq={k},up={1000 * k},win=1000,n=9,{channels}") for k in range(MISMATCH_LINES)]
    assert missing(state, lines[:-1]) == []
    said = missing(state, lines[-1:])
    assert len(said) == 1 and said[0].data is not None and said[0].data["channel"] == primary
    assert f'psu.primary = "{primary}"' in said[0].message and "set psu.primary to" in said[0].message
    assert missing(state, [format_rm1(f"RM1,seq={k},up={1000 * k},win=1000,n=9,{channels}")
                           for k in range(MISMATCH_LINES, 3 * MISMATCH_LINES)]) == []


def test_a_sketch_printing_one_channel_a_line_is_not_missing_its_primary() -> None:
    state = opened(protocol="text", channels={"v": "V", "i": "I"})
    assert missing(state, ["I=3.1A", "V=12.03V"] * MISMATCH_LINES) == []
    state = opened(protocol="text", channels={"v": "V", "i": "I"})
    said = missing(state, ["I=3.1A", "U=12.03V"] * MISMATCH_LINES)
    assert len(said) == 1 and "[psu.channels]" in said[0].message
