"""Parsers of the PSU rail devices: inline edge cases and property-based checks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigmon.collectors.psu_lines import (
    LineError,
    LineSplitter,
    RailWindow,
    Rm1Identity,
    Triple,
    format_rm1,
    parse_pzem017_registers,
    parse_rm1_line,
    rm1_checksum,
)
from rigmon.collectors.psu_text import TextFields, TextHeader, parse_text_line, text_window

# The reference examples (reference/psu-adc.md), checksums as published.
IDENTITY = "$RMI,proto=1,fw=rmfw-0.3,id=E6614103E7452D2F,sensor=ina226,win=1000,ch=v;i;vpsu*23"
BOOT = "$RM1,seq=0,up=1012,win=1000,n=890,v=12061/12049/12074,i=3112/3050/3190*79"
SAG = ("$RM1,seq=1841,up=1843520,win=1000,n=892,v=11712/11384/11790,i=98250/96100/131400,"
       "vpsu=11902/11655/11960,flags=4*09")
STEADY = ("$RM1,seq=1842,up=1844520,win=1000,n=891,v=11790/11771/11806,i=97900/97200/98700,"
          "vpsu=11961/11950/11972*6E")
EMPTY = "$RM1,seq=7,up=8004,win=1000,n=0,flags=1*07"


def test_sag_line_keeps_the_window_minimum() -> None:
    window = parse_rm1_line(SAG)
    assert isinstance(window, RailWindow)
    assert window.volts["v"] == Triple(mean=11.712, min=11.384, max=11.79)
    assert window.volts["vpsu"].min == 11.655
    assert window.amps["i"] == Triple(mean=98.25, min=96.1, max=131.4)
    assert (window.seq, window.up_ms, window.win_ms, window.samples, window.flags) == (1841, 1843520, 1000, 892, 4)


def test_identity_line() -> None:
    identity = parse_rm1_line(IDENTITY)
    assert identity == Rm1Identity(proto=1, firmware="rmfw-0.3", device_id="E6614103E7452D2F",
                                   sensor="ina226", win_ms=1000, channels=("v", "i", "vpsu"))


def test_window_without_samples_has_no_channels() -> None:
    window = parse_rm1_line(EMPTY)
    assert isinstance(window, RailWindow)
    assert window.samples == 0 and window.flags == 1 and window.volts == {}


@pytest.mark.parametrize("line", ["[INFO] booting", "hello", "", "$GPGGA,1*00", "RM1,seq=1*00"])
def test_non_rm1_lines_are_not_data(line: str) -> None:
    assert parse_rm1_line(line) is None


def test_unknown_keys_are_ignored() -> None:
    window = parse_rm1_line(format_rm1("RM1,seq=3,up=10,win=1000,n=5,v=12000/11990/12010,temp=31,xyz=a"))
    assert isinstance(window, RailWindow) and window.volts["v"].min == 11.99


def test_future_tag_is_ignored() -> None:
    assert parse_rm1_line(format_rm1("RM2,seq=3,whatever=1")) is None


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (SAG.replace("*09", "*08"), "checksum"),
        (SAG.replace("11384", "11385"), "checksum"),
        (SAG.replace("*09", "*0a"), "malformed"),
        (SAG[:-3], "malformed"),
        (SAG[:60], "malformed"),
        ("$RM1,seq=1\x00,up=2*00", "control"),
        ("$RM1," + "x=1," * 60 + "y=2*00", "long"),
        (format_rm1("RM1,seq=1,up=1,win=1000,n=5"), "malformed"),
        (format_rm1("RM1,seq=1,up=1,win=1000,n=5,v=12000/11000"), "malformed"),
        (format_rm1("RM1,seq=1,up=1,win=1000,n=5,v=12000/12100/12200"), "nonsense"),
        (format_rm1("RM1,seq=1,up=1,win=1000,n=5,v=400000/400000/400000"), "nonsense"),
        (format_rm1("RM1,seq=1,up=1,win=1000,n=0,v=12000/12000/12000"), "nonsense"),
        (format_rm1("RM1,seq=4294967296,up=1,win=1000,n=0"), "nonsense"),
        (format_rm1("RM1,seq=-1,up=1,win=1000,n=0"), "nonsense"),
        (format_rm1("RM1,seq=1,seq=2,up=1,win=1000,n=0"), "malformed"),
        (format_rm1("RM1,seq=1,win=1000,n=0"), "malformed"),
        (format_rm1("RM1,seq=1,up=1,win=0,n=3,v=1/1/1"), "nonsense"),
        (format_rm1("RMI,id=a b"), "malformed"),
    ],
)
def test_bad_rm1_lines(line: str, reason: str) -> None:
    with pytest.raises(LineError) as info:
        parse_rm1_line(line)
    assert info.value.reason == reason


@pytest.mark.parametrize(
    ("line", "values"),
    [
        ("12.061", {"0": 12.061}),
        ("12034mV", {"0": 12.034, "V": 12.034}),
        ("123mA", {"0": 0.123, "A": 0.123}),
        ("2025-11-30 12:34:56.123,12.345,1.234,15.234", {"1": 12.345, "2": 1.234, "3": 15.234}),
        ("1234567,12.01,950.5,11415", {"0": 1234567.0, "1": 12.01, "2": 950.5, "3": 11415.0}),
        ("V=12030 mV, I=1.2A", {"V": 12.03, "I": 1.2}),
        ("V=12.03V", {"V": 12.03}),
        # The unit after a space in a whitespace-separated line, as the README's own example prints it.
        ("V=12030 mV", {"V": 12.03}),
        ("V=12030 mV I=3200 mA", {"V": 12.03, "I": 3.2}),
        ("12030 mV", {"0": 12.03, "V": 12.03}),
        ("12.03 V 3.2 A", {"0": 12.03, "V": 12.03, "1": 3.2, "A": 3.2}),
        ("bus:12.02,shunt:0.5", {"bus": 12.02, "shunt": 0.5}),
        ("bus:12.02 shunt:0.5", {"bus": 12.02, "shunt": 0.5}),
        ("4.98V,0.12A", {"0": 4.98, "V": 4.98, "1": 0.12, "A": 0.12}),
        ('{"Vout": 12.06, "Iout": 40.1, "ok": true, "name": "psu"}', {"Vout": 12.06, "Iout": 40.1}),
        ("12.1\t0.5", {"0": 12.1, "1": 0.5}),
        ("  12.034    0.512      1.024", {"0": 12.034, "1": 0.512, "2": 1.024}),
        # Adafruit ADS1X15 examples: raw count, then the value with its unit.
        ("AIN0: 3099  0.58V", {"AIN0": 0.58}),
        ("AIN0: 3099    -->   580.94 mV", {"AIN0": 0.58094}),
        # Adafruit INA219 getcurrent example: a label of several words, one per line.
        ("Bus Voltage:   12.03 V", {"Bus Voltage": 12.03}),
        ("Shunt Voltage: 0.50 mV", {"Shunt Voltage": 0.0005}),
        ("Current mA:       1200.00 mA", {"Current mA": 1.2}),
    ],
)
def test_text_formats(line: str, values: dict[str, float]) -> None:
    fields = parse_text_line(line)
    assert isinstance(fields, TextFields) and fields.values == values


def test_a_milliamp_value_after_a_space_is_not_read_as_amperes() -> None:
    """``I=3200 mA`` was 3200 A (under the 10 kA limit: a reading) and ``V=12030 mV`` 12030 V (dropped)."""
    fields = parse_text_line("V=12030 mV I=3200 mA")
    assert isinstance(fields, TextFields)
    window = text_window(fields, None, {"v": "V", "i": "I"}, {})
    assert window is not None and (window.volts["v"].mean, window.amps["i"].mean) == (12.03, 3.2)


@pytest.mark.parametrize(("line", "channels", "said"), [
    # Adafruit's INA219 example with the channels swapped: 1.2 V was read, a critical sag that never was.
    ("Current mA:       1200.00 mA", {"v": "Current mA"}, "v reads 'Current mA', a value in A, not V"),
    ("4.98V,0.12A", {"v": "1"}, "v reads '1', a value in A, not V"),
    ("V=12.0V P=1.5W", {"v": "V", "i": "P"}, "i reads 'P', a value in W, not A"),
])
def test_a_value_printed_in_another_unit_than_its_channel_is_refused(
        line: str, channels: dict[str, str], said: str) -> None:
    fields = parse_text_line(line)
    assert isinstance(fields, TextFields)
    with pytest.raises(LineError) as info:
        text_window(fields, None, channels, {})
    assert info.value.reason == "malformed" and said in str(info.value)


def test_a_scaled_channel_may_read_another_unit() -> None:
    """A shunt's voltage read as the current through it: the scale (1/R) is the conversion."""
    fields = parse_text_line("Shunt Voltage: 0.50 mV")
    assert isinstance(fields, TextFields)
    window = text_window(fields, None, {"v": "Bus Voltage", "i": "Shunt Voltage"}, {"i": 1000.0})
    assert window is not None and window.amps["i"].mean == 0.5


@pytest.mark.parametrize("line", ["[INFO] INA226 found at 0x40", "starting up", "OK"])
def test_text_banners_are_not_data(line: str) -> None:
    assert parse_text_line(line) is None


def test_csv_header_names_the_columns() -> None:
    header = parse_text_line("Timestamp,Voltage[V],Current[A],Power[W]")
    assert header == TextHeader(("Timestamp", "Voltage[V]", "Current[A]", "Power[W]"))
    fields = parse_text_line("2025-11-30 12:34:56.123,11.845,96.1,1138.3")
    assert isinstance(fields, TextFields) and isinstance(header, TextHeader)
    window = text_window(fields, header, {"v": "Voltage[V]", "i": "Current[A]"}, {})
    assert window is not None
    assert window.volts["v"] == Triple(11.845, 11.845, 11.845) and window.amps["i"].mean == 96.1


def test_whitespace_table_header_names_a_configured_column() -> None:
    header = parse_text_line("  BUS_V   SHUNT_mV  CURRENT_A  POWER_W", header_names={"BUS_V"})
    assert header == TextHeader(("BUS_V", "SHUNT_mV", "CURRENT_A", "POWER_W"))
    # The same words are a banner when no configured column is among them.
    assert parse_text_line("  BUS_V   SHUNT_mV  CURRENT_A  POWER_W") is None
    fields = parse_text_line(" 12.034    0.512      1.024     12.32")
    assert isinstance(fields, TextFields) and isinstance(header, TextHeader) and fields.columns == 4
    window = text_window(fields, header, {"v": "BUS_V", "i": "CURRENT_A"}, {})
    assert window is not None and (window.volts["v"].min, window.amps["i"].min) == (12.034, 1.024)


@pytest.mark.parametrize("line", [" 0   16679", "REG  VALUE", "12.0 1.0 2.0 3.0 4.0"])
def test_lines_that_do_not_fit_the_header_are_not_readings(line: str) -> None:
    header = TextHeader(("BUS_V", "SHUNT_mV", "CURRENT_A", "POWER_W"))
    fields = parse_text_line(line)
    assert fields is None or (isinstance(fields, TextFields) and text_window(
        fields, header, {"v": "BUS_V", "i": "CURRENT_A"}, {}) is None)


def test_label_with_several_unitless_numbers_is_no_value() -> None:
    assert parse_text_line("REG: 3099 17") is None
    assert parse_text_line("ADC Range: +/- 6.144V (1 bit = 3mV/ADS1015, 0.1875mV/ADS1115)") is None


def test_text_scale_and_missing_channel() -> None:
    fields = TextFields({"0": 11712.0})
    window = text_window(fields, None, {"v": "0", "i": "1"}, {"v": 0.001})
    assert window is not None and window.volts["v"].min == pytest.approx(11.712) and window.amps == {}
    assert text_window(TextFields({"7": 1.0}), None, {"v": "0"}, {}) is None


def test_text_scale_gives_the_value_without_binary_noise() -> None:
    window = text_window(TextFields({"0": 12030.0}), None, {"v": "0"}, {"v": 0.001})
    assert window is not None and window.volts["v"].min == 12.03


@pytest.mark.parametrize("line", ['{"v": 1', "[1, 2", '{"v": 1e999}', "1e999", "12.0\x07"])
def test_bad_text_lines(line: str) -> None:
    if line.startswith("["):
        assert parse_text_line(line) is None
        return
    with pytest.raises(LineError):
        parse_text_line(line)


def test_text_nonsense_value_is_dropped() -> None:
    with pytest.raises(LineError) as info:
        text_window(TextFields({"0": 512.0}), None, {"v": "0"}, {})
    assert info.value.reason == "nonsense"


def test_pzem017_worked_example() -> None:
    # 01 04 10 05 40 00 0A 00 0D 00 00 00 02 00 00 00 00 00 00 D6 29 (Tasmota)
    window = parse_pzem017_registers([0x0540, 0x000A, 0x000D, 0, 2, 0, 0, 0])
    assert window.volts["v"].min == 13.44 and window.amps["i"].mean == 0.1
    assert window.power_w == 1.3 and window.energy_wh == 2.0 and window.flags == 0


def test_pzem017_low_voltage_alarm_and_bad_frames() -> None:
    assert parse_pzem017_registers([1138, 9610, 0, 0, 0, 0, 0, 0xFFFF]).flags == 4
    for regs in ([1, 2, 3], [0] * 9, [70000] + [0] * 7, [0] * 6 + [5, 0]):
        with pytest.raises(LineError):
            parse_pzem017_registers(regs)


def test_splitter_drops_partial_first_line_and_long_lines() -> None:
    splitter = LineSplitter(max_bytes=20)
    assert splitter.feed(b"12/11384/1179*09\r\n$A\r\n") == ["$A"]
    assert splitter.partial_total == 1
    assert splitter.feed(b"one\rtwo\n\nthree\r\nfo") == ["one", "two", "three"]
    assert splitter.feed(b"ur\n" + b"x" * 30) == ["four"]
    assert splitter.feed(b"yyy\nfive\n") == ["five"]
    assert splitter.long_total == 1
    splitter.restart()
    assert splitter.feed(b"tail\nsix\n") == ["six"] and splitter.partial_total == 2


# ---------------------------------------------------------------------------------------
# Properties: no parser raises anything but LineError, and a corrupted line never yields a
# reading.

printable = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=220)
anything = st.text(max_size=260)
rm1_like = st.builds(lambda body: f"$RM1,{body}", printable) | st.builds(lambda b: f"$RMI,{b}", printable)


@settings(max_examples=400)
@given(st.one_of(anything, printable, rm1_like))
def test_rm1_parser_raises_only_line_error(line: str) -> None:
    try:
        parse_rm1_line(line)
    except LineError:
        pass


@settings(max_examples=400)
@given(st.one_of(anything, printable, st.builds(lambda b: "{" + b, printable)))
def test_text_parser_raises_only_line_error(line: str) -> None:
    try:
        result = parse_text_line(line)
    except LineError:
        return
    if isinstance(result, TextFields):
        try:
            text_window(result, None, {"v": "0", "i": "1"}, {"v": 1.0})
        except LineError:
            pass


@st.composite
def valid_rm1(draw: st.DrawFn) -> str:
    seq = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, 5000))
    low = draw(st.integers(0, 60000))
    high = draw(st.integers(low, 60000))
    mean = draw(st.integers(low, high))
    body = f"RM1,seq={seq},up={draw(st.integers(0, 2**32 - 1))},win=1000,n={n},v={mean}/{low}/{high}"
    if draw(st.booleans()):
        body += f",flags={draw(st.integers(0, 31))}"
    return format_rm1(body)


@settings(max_examples=400)
@given(valid_rm1(), st.data())
def test_corrupted_rm1_line_never_yields_a_reading(line: str, data: st.DataObject) -> None:
    assert isinstance(parse_rm1_line(line), RailWindow)
    kind = data.draw(st.sampled_from(["replace", "delete", "insert", "truncate"]))
    pos = data.draw(st.integers(1, len(line) - 1))
    byte = data.draw(st.characters(min_codepoint=0, max_codepoint=255))
    if kind == "replace":
        if byte == line[pos]:
            return
        damaged = line[:pos] + byte + line[pos + 1 :]
    elif kind == "delete":
        damaged = line[:pos] + line[pos + 1 :]
    elif kind == "insert":
        damaged = line[:pos] + byte + line[pos:]
    else:
        damaged = line[:pos]
    try:
        result = parse_rm1_line(damaged)
    except LineError:
        return
    assert not isinstance(result, RailWindow), f"corrupted line {damaged!r} gave a reading"


@settings(max_examples=300)
@given(st.binary(max_size=600), st.lists(st.integers(1, 50), max_size=10))
def test_splitter_never_returns_long_or_unterminated_lines(data: bytes, cuts: list[int]) -> None:
    splitter = LineSplitter()
    lines: list[str] = []
    pos = 0
    for cut in cuts:
        lines += splitter.feed(data[pos : pos + cut])
        pos += cut
    lines += splitter.feed(data[pos:])
    for line in lines:
        assert line and len(line) <= 200 and "\n" not in line and "\r" not in line


@given(st.lists(st.integers(-(2**17), 2**17), max_size=12))
def test_pzem_decoder_raises_only_line_error(registers: list[int]) -> None:
    try:
        window = parse_pzem017_registers(registers)
    except LineError:
        return
    assert 0 <= window.volts["v"].min <= 655.35


def test_checksum_is_the_xor_of_every_byte_at_any_length() -> None:
    import random

    rng = random.Random(19)
    for length in range(0, 260):
        body = "".join(chr(rng.randint(32, 126)) for _ in range(length))
        expected = 0
        for byte in body.encode("ascii"):
            expected ^= byte
        assert rm1_checksum(body) == expected


def test_splitter_gives_the_same_lines_however_the_bytes_are_cut() -> None:
    stream = b"partial\r\n$RM1,a\r\nb\n\rc\r\r\nd\n\n\re" + b"x" * 40 + b"\r\nlast"
    whole = LineSplitter(max_bytes=32)
    expected = whole.feed(stream)
    assert expected == ["$RM1,a", "b", "c", "d"]
    for cut in range(1, len(stream)):
        split = LineSplitter(max_bytes=32)
        assert split.feed(stream[:cut]) + split.feed(stream[cut:]) == expected, cut
        assert (split.partial_total, split.long_total) == (1, 1)


def _outcome(parse: object, line: str) -> object:
    try:
        return ("ok", parse(line))  # type: ignore[operator]
    except LineError as exc:
        return ("error", exc.reason)


_number = st.one_of(st.integers(-20, 20), st.integers(0, 2**33), st.integers(-(10**12) + 1, 10**12 - 1),
                    st.sampled_from([0, 11950, 12010, 12050, 99999, 100001, 2**32 - 1, 2**32]))
_triple = st.builds(lambda a, b, c: f"{a}/{b}/{c}", _number, _number, _number) | st.sampled_from(
    ["12010/11950/12050", "80000/79000/81000", "12100/12050/12150", "11712/11384/11790"])


@st.composite
def _usual_lines(draw: st.DrawFn) -> str:
    items = [f"seq={draw(_number)}", f"up={draw(_number)}", f"win={draw(_number)}", f"n={draw(_number)}",
             f"v={draw(_triple)}"]
    for key in ("i", "vpsu", "flags"):
        if draw(st.booleans()):
            items.append(f"{key}={draw(_number) if key == 'flags' else draw(_triple)}")
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), draw(st.sampled_from(["v=1/1/1", "x=1", "i=1/1/1", "seq=2"])))
    body = "RM1," + ",".join(items)
    line = format_rm1(body)
    how = draw(st.sampled_from(["as is", "as is", "bad checksum", "lower hex", "cut"]))
    if how == "bad checksum":
        line = line[:-2] + f"{(int(line[-2:], 16) + 1) % 256:02X}"
    elif how == "lower hex":
        line = line[:-2] + line[-2:].lower()
    elif how == "cut":
        line = line[: draw(st.integers(0, len(line)))]
    return line


@settings(max_examples=1500)
@given(_usual_lines())
def test_usual_line_fast_path_gives_what_every_check_gives(line: str) -> None:
    from rigmon.collectors.psu_lines import _parse_rm1_checked

    def checked(text: str) -> object:
        return _parse_rm1_checked(text) if text.startswith("$RM") else None

    assert _outcome(parse_rm1_line, line) == _outcome(checked, line)


@pytest.mark.parametrize("line", ["\x13\ufffd\ufffdRM1,seq=3,up=10*4A", "\ufffd\ufffd\x7f\ufffd3", "[INFO]\x1b[31m red"])
def test_line_noise_before_the_frame_is_dropped_not_ignored(line: str) -> None:
    """A UART at the wrong baud rate, or a window whose ``$`` was hit: noise, not a banner."""
    with pytest.raises(LineError) as caught:
        parse_rm1_line(line)
    assert caught.value.reason == "control"


def test_a_banner_with_tabs_is_not_data() -> None:
    assert parse_rm1_line("INA226\tready\t0x40") is None
