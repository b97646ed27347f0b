"""A decimal comma in a ``text`` ADC line (``12,061``) is never read as the integer before it.

A device printing in a locale with a decimal comma sends ``12,061`` for 12.061 V; split on the
comma as CSV it read 12.0 V (and a sag to ``11,384`` 11.0 V: a false critical alarm). A comma
between digits in a line with no decimal point is a separator only when a header row printed
with the same number of columns says so, or channels read every column; otherwise the line is dropped and
counted malformed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.psu_lines import LineError
from rigmon.collectors.psu_text import TextFields, TextHeader, parse_text_line, text_window
from rigmon.schema import PsuRailReading
from tests.collectors.psu_helpers import PtyDevice, Pushed, make_collector, wait_for
from tests.collectors.psu_helpers import pty_device  # noqa: F401  (fixture)


def window_of(line: str, channels: dict[str, str], scale: dict[str, float] | None = None,
              header: TextHeader | None = None) -> object:
    fields = parse_text_line(line)
    assert isinstance(fields, TextFields)
    return text_window(fields, header, channels, scale or {})


@pytest.mark.parametrize(
    ("line", "channels", "scale"),
    [
        ("12,061", {"v": "0"}, {}),
        ("11,384", {"v": "0"}, {}),
        ("12,061;3,112", {"v": "0"}, {}),
        ("U=12,061V", {"v": "U"}, {}),
        ("Bus Voltage: 12,03 V", {"v": "Bus Voltage"}, {}),
        # A divider's pin voltage: the scale does not make the comma a separator.
        ("0,58", {"v": "0"}, {"v": 20.75}),
    ],
)
def test_a_decimal_comma_is_dropped_as_malformed(line: str, channels: dict[str, str], scale: dict[str, float]) -> None:
    with pytest.raises(LineError) as info:
        window_of(line, channels, scale)
    assert info.value.reason == "malformed"


def test_comma_separated_lines_with_a_decimal_point_still_read() -> None:
    window = window_of("34.567,1", {"v": "0", "i": "1"})
    assert window is not None and window.volts["v"].min == 34.567 and window.amps["i"].min == 1.0  # type: ignore[attr-defined]


def test_integer_csv_reads_under_a_header_with_the_same_columns() -> None:
    header = parse_text_line("bus_mV,current_mA")
    assert isinstance(header, TextHeader)
    window = window_of("12061,3112", {"v": "bus_mV", "i": "current_mA"}, {"v": 0.001, "i": 0.001}, header)
    assert window is not None and window.volts["v"].min == 12.061 and window.amps["i"].min == 3.112  # type: ignore[attr-defined]


def test_integer_csv_reads_when_channels_read_every_column() -> None:
    # An Arduino printing millivolts and milliamps for the Serial Plotter: both columns are read,
    # so the comma separates them. One column left over would be a decimal comma's fraction.
    window = window_of("12034,1520", {"v": "0", "i": "1"}, {"v": 0.001, "i": 0.001})
    assert window is not None and window.volts["v"].min == 12.034 and window.amps["i"].min == 1.52  # type: ignore[attr-defined]
    with pytest.raises(LineError):
        window_of("12034,1520", {"v": "0"}, {"v": 0.001})


def test_decimal_comma_over_pty_is_counted_malformed_not_read(pty_device: PtyDevice, tmp_path: Path) -> None:  # noqa: F811
    collector = make_collector(tmp_path, protocol="text")
    pushed = Pushed()
    collector.start(pushed)
    try:
        wait_for(lambda: collector.state.connected)
        # The first line after the open is dropped as partial.
        pty_device.lines("12.061", "12,061", "12,061", "11,384", "12.058")
        wait_for(lambda: collector.state.counters.lines_total == 4)
        reading = collector.collect()[0]
        assert isinstance(reading, PsuRailReading)
        assert (reading.counters.windows_total, reading.counters.malformed_lines_total) == (1, 3)
        assert reading.volts is not None and reading.volts.min_volts == 12.058
        # The line 11,384 was no 11.0 V sag.
        assert not pushed.of(PsuRailReading)
    finally:
        collector.close()
