"""PSU rail collector: the rail state's bookkeeping of windows, sags, reboots, dropped lines and path
resistance."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigmon.clock import SystemClock
from rigmon.collectors.psu import PsuCollector, RailState
from rigmon.collectors.psu_device import RailDevice
from rigmon.collectors.psu_lines import LineError, format_rm1
from rigmon.config import PsuSection
from rigmon.hw.root import HostRoot
from tests.collectors.psu_helpers import IDENTITY, SAG, rm1


# ---------------------------------------------------------------------------------------
# RailState: pure bookkeeping


def feed(state: RailState, *lines: str, mono: float = 0.0) -> list[bool]:
    return [state.line(line, mono, 1_700_000_000.0 + mono) for line in lines]


def test_aggregate_keeps_min_of_mins_and_max_of_maxes() -> None:
    state = RailState(PsuSection(port="/dev/x", sag_volts=11.0))
    feed(state, rm1(0, "12000/11950/12050", n=100), rm1(1, "11800/11384/11900", n=300), rm1(2, "12010/12000/12090", n=100))
    reading = state.reading(mono=0.5, reset=True)
    assert reading.windows == 3 and reading.samples == 500
    assert reading.volts is not None
    assert reading.volts.min_volts == 11.384 and reading.volts.max_volts == 12.09
    assert reading.volts.mean_volts == pytest.approx((12.0 * 100 + 11.8 * 300 + 12.01 * 100) / 500, abs=1e-6)
    assert reading.channels_volts["vpsu"].min_volts == 12.03
    assert reading.amps is not None and reading.amps.max_amps == 31.0
    # The primary and current channels' envelopes are the channels' own records, built once.
    assert reading.volts is reading.channels_volts["v"] and reading.amps is reading.channels_amps["i"]
    assert list(reading.channels_volts) == ["v", "vpsu"]


def test_no_new_window_repeats_the_last_until_stale() -> None:
    state = RailState(PsuSection(port="/dev/x", stale_after_s=3.0))
    feed(state, rm1(0, "12000/11500/12050"), mono=10.0)
    state.reading(mono=10.1, reset=True)
    repeated = state.reading(mono=11.0, reset=True)
    assert repeated.windows == 0 and not repeated.stale
    assert repeated.volts is not None and repeated.volts.min_volts == 11.5
    stale = state.reading(mono=13.5, reset=True)
    assert stale.stale and stale.volts is None and stale.channels_volts == {}


def test_sag_pushes_first_and_deeper_windows_only() -> None:
    state = RailState(PsuSection(port="/dev/x", sag_volts=11.5))
    pushes = feed(state, rm1(0), rm1(1, "11700/11450/11800"), rm1(2, "11700/11460/11800"),
                  rm1(3, "11700/11450/11800"), rm1(4, "11600/11300/11800"))
    assert pushes == [False, True, False, False, True]
    assert state.reading(mono=0.0, reset=True).sag
    assert feed(state, rm1(5, "11600/11400/11800")) == [True]


def test_latched_under_voltage_flag_pushes_once_per_frame() -> None:
    state = RailState(PsuSection(port="/dev/x", sag_volts=11.0))
    assert feed(state, rm1(0, extra=",flags=4"), rm1(1, extra=",flags=4")) == [True, False]
    assert state.reading(mono=0.0, reset=True).under_voltage_latched


def test_rail_device_keeps_the_device_life_without_windows() -> None:
    # RailState's base: connection, errors, counters and events, with no window accounted.
    device = RailDevice(PsuSection(port="/dev/x"))
    device.opened()
    device.closed("unplugged")
    device.opened()
    device.line_error(LineError("checksum", "*00"))
    device.read_error()
    assert [e.kind for e in device.take_events()] == ["psu_adc_disconnected", "psu_adc_reconnected"]
    counters = device.counters
    assert (counters.opens_total, counters.disconnects_total, counters.checksum_errors_total,
            counters.read_errors_total, counters.windows_total) == (2, 1, 1, 1, 0)
    assert device.connected and device.last_error is None


def test_a_reopened_text_device_needs_its_header_again() -> None:
    state = RailState(PsuSection(port="/dev/x", protocol="text", channels={"v": "volts"}))
    state.opened()
    assert state.line("volts amps", 0.0, 0.0) is False  # the header
    state.line("12.01 3.0", 1.0, 1.0)
    assert state.counters.windows_total == 1
    state.closed("unplugged")
    state.opened()
    state.line("12.02 3.0", 2.0, 2.0)  # no header since the port opened: not a window
    assert state.counters.windows_total == 1


def test_seq_gap_counts_lost_windows_and_wrap_is_not_a_reboot() -> None:
    state = RailState(PsuSection(port="/dev/x"))
    feed(state, rm1(10), rm1(11), rm1(15))
    assert state.counters.lost_windows_total == 3
    wrapping = RailState(PsuSection(port="/dev/x"))
    feed(wrapping, rm1(2**32 - 2, up=2**32 - 500), rm1(2**32 - 1, up=500), rm1(0, up=1500))
    assert wrapping.counters.reboots_total == 0 and wrapping.counters.lost_windows_total == 0


def test_seq_backwards_is_a_reboot_event() -> None:
    state = RailState(PsuSection(port="/dev/x"))
    feed(state, rm1(500), rm1(501), rm1(0, up=1000))
    assert state.counters.reboots_total == 1
    assert [e.kind for e in state.take_events()] == ["psu_adc_rebooted"]


def test_uptime_backwards_is_a_reboot_even_when_seq_moves_on() -> None:
    state = RailState(PsuSection(port="/dev/x"))
    feed(state, rm1(3, up=900_000), rm1(9, up=9000))
    assert state.counters.reboots_total == 1


def test_identity_line_after_data_is_a_reboot_but_an_answer_is_not() -> None:
    state = RailState(PsuSection(port="/dev/x"))
    feed(state, IDENTITY, rm1(0), rm1(1))
    assert state.counters.reboots_total == 0 and state.identity is not None
    state.query_sent(5.0)
    feed(state, IDENTITY, mono=5.2)
    assert state.counters.reboots_total == 0
    feed(state, IDENTITY, rm1(0), mono=30.0)
    assert state.counters.reboots_total == 1
    assert len([e for e in state.take_events() if e.kind == "psu_adc_rebooted"]) == 1


def test_a_late_answer_to_the_identity_query_is_not_a_reboot() -> None:
    """The answer to ``?`` may come after lines already on their way, and under the simulator's
    accelerated clock (``rigmon sim --speed 60``) a few real milliseconds are seconds: an answer
    is the first identity line after the query, however late; a real reboot still shows as the
    window sequence starting again."""
    state = RailState(PsuSection(port="/dev/x"))
    feed(state, rm1(0), rm1(1))
    state.query_sent(5.0)
    feed(state, rm1(2), rm1(3), mono=6.0)
    feed(state, IDENTITY, rm1(4), mono=125.0)
    assert state.counters.reboots_total == 0 and state.identity is not None
    assert not [e for e in state.take_events() if e.kind == "psu_adc_rebooted"]
    feed(state, IDENTITY, rm1(0), mono=300.0)
    assert state.counters.reboots_total == 1


def test_dropped_lines_are_counted_by_reason() -> None:
    state = RailState(PsuSection(port="/dev/x"))
    state.opened()
    state.feed(b"partial tail\r\n" + (SAG.replace("*09", "*00") + "\r\n").encode() + b"$RM1,bad\r\n"
               + b"[INFO] hi\r\n" + format_rm1("RM1,seq=1,up=1,win=1000,n=2,v=3/2/1").encode() + b"\r\n"
               + b"$RM1,\x00\xff\r\n" + b"x" * 300 + b"\r\n", 0.0, 0.0)
    c = state.counters
    assert (c.partial_lines_total, c.checksum_errors_total, c.malformed_lines_total, c.ignored_lines_total,
            c.nonsense_lines_total, c.long_lines_total, c.windows_total) == (1, 1, 2, 1, 1, 1, 0)
    assert state.reading(mono=0.0, reset=True).volts is None


def test_path_resistance_from_two_voltage_channels() -> None:
    state = RailState(PsuSection(port="/dev/x"))
    for k in range(20):
        amps = 20_000 + 5000 * k
        drop = round(amps * 1.75 / 1000)  # 1.75 mOhm
        feed(state, format_rm1(f"RM1,seq={k},up={k * 1000 + 1000},win=1000,n=9,v={12000 - drop}/{11990 - drop}/"
                               f"{12010 - drop},i={amps}/{amps}/{amps},vpsu=12000/11990/12010"))
    (estimate,) = state.resistance()
    assert estimate.method == "two_point" and estimate.path == "vpsu-v"
    assert estimate.resistance_mohm == pytest.approx(1.75, abs=0.02)


def test_path_resistance_daily_fits_survive_a_restart() -> None:
    def run(state: RailState, seqs: range) -> None:
        for k in seqs:
            amps = 20_000 + 5000 * (k % 20)
            drop = round(amps * 1.75 / 1000)
            feed(state, format_rm1(f"RM1,seq={k},up={k * 1000 + 1000},win=1000,n=9,v={12000 - drop}/"
                                   f"{11990 - drop}/{12010 - drop},i={amps}/{amps}/{amps},vpsu=12000/11990/12010"))

    before = PsuCollector(PsuSection(port="/dev/x"), HostRoot("/"), SystemClock())
    run(before.state, range(20))
    saved = before.export_path_state()
    assert [(s.path, s.method, sum(d.n for d in s.days)) for s in saved] == [("vpsu-v", "two_point", 20)]
    after = PsuCollector(PsuSection(port="/dev/x"), HostRoot("/"), SystemClock())
    assert after.restore_path_state(saved) == 1 and after.state.resistance() == []  # until the path reports
    run(after.state, range(20, 25))
    assert after.export_path_state()[0].days[0].n == 25  # the same day: the saved sums and the new points


def test_a_pushed_sag_window_is_counted_once() -> None:
    # Issue 22 case 16: the early publish and the next frame both counted the sag window.
    state = RailState(PsuSection(port="/dev/x", sag_volts=11.5))
    published = []
    for line in (rm1(0), rm1(1, "11700/11384/11790"), rm1(2), rm1(3)):
        if state.line(line, 0.0, 1_700_000_000.0):
            published.append(state.reading(mono=0.0, reset=True, pushed=True))
    published.append(state.reading(mono=0.1, reset=True))
    assert sum(r.windows for r in published) == 4
    assert [r.sag for r in published] == [True, False]
    assert published[0].volts is not None and published[0].volts.min_volts == 11.384
    assert published[1].volts is not None and published[1].volts.min_volts == 12.001


def test_after_a_push_a_long_brownout_pushes_only_deeper_windows_until_the_next_frame() -> None:
    state = RailState(PsuSection(port="/dev/x", sag_volts=11.5))
    assert feed(state, rm1(0, "11700/11400/11800")) == [True]
    state.reading(mono=0.0, reset=True, pushed=True)
    assert feed(state, rm1(1, "11700/11420/11800"), rm1(2, "11700/11350/11800")) == [False, True]
    state.reading(mono=0.0, reset=True)
    assert feed(state, rm1(3, "11700/11420/11800")) == [True]


# ---------------------------------------------------------------------------------------
# The reader's fast path: a read that is one usual RM1 line


def _window_lines(draw: st.DrawFn) -> list[tuple[str, str]]:
    """RM1 lines of a device (seq moving on, gaps, repeats, reboots, sags, flags, no current), each with
    what happens after it: nothing, a frame, or a push."""
    out: list[tuple[str, str]] = []
    seq, up = draw(st.sampled_from([0, 2**32 - 3, 1840])), draw(st.sampled_from([1000, 2**32 - 2500]))
    for _ in range(draw(st.integers(1, 25))):
        step = draw(st.sampled_from([1, 1, 1, 1, 0, 2, 5, -3]))
        # Uptime moves on with seq, or (one time in six) goes back although seq moves on.
        up_step = -5000 if step == 1 and draw(st.integers(0, 5)) == 0 else max(step, 0) * 1000
        seq, up = (seq + step) % 2**32, (up + up_step) % 2**32
        low = draw(st.sampled_from([11950, 11384, 11300, 11499, 11500, 11760]))
        v = f"{low + 60}/{low}/{low + 90}"
        amps = draw(st.integers(0, 130_000))
        items = [f"seq={seq}", f"up={up}", "win=1000", f"n={draw(st.integers(1, 1000))}", f"v={v}"]
        if draw(st.integers(0, 4)):
            items.append(f"i={amps}/{max(amps - 500, 0)}/{amps + 500}")
        if draw(st.integers(0, 4)):
            items.append(f"vpsu={low + 200}/{low + 150}/{low + 260}")
        flags = draw(st.sampled_from([0, 0, 0, 4, 8, 1]))
        if flags:
            items.append(f"flags={flags}")
        out.append((format_rm1("RM1," + ",".join(items)), draw(st.sampled_from(["", "", "frame", "push"]))))
    return out


@settings(max_examples=300, deadline=None)
@given(lines=st.composite(_window_lines)(), config=st.sampled_from([
    PsuSection(port="/dev/x"), PsuSection(port="/dev/x", primary="vpsu", psu_side="v"),
    PsuSection(port="/dev/x", psu_side="", current="i"), PsuSection(port="/dev/x", current="", sag_volts=11.45),
]))
def test_a_read_of_one_usual_line_is_accounted_as_the_checked_line(lines: list[tuple[str, str]],
                                                                   config: PsuSection) -> None:
    """The fast path (a read that is one whole line) gives every reading, counter, event and
    resistance estimate that the line parsed through every check gives."""
    fast, checked = RailState(config), RailState(config)
    for state in (fast, checked):
        state.opened()
        state.feed(b"\n", 0.0, 1_700_000_000.0)
    published: dict[int, list[object]] = {id(fast): [], id(checked): []}
    for k, (line, then) in enumerate(lines):
        mono = 0.1 * k
        pushes = [fast.feed(line.encode() + b"\r\n", mono, 1_700_000_000.0 + mono),
                  checked.line(line, mono, 1_700_000_000.0 + mono)]
        assert pushes[0] == pushes[1]
        for state, push in zip((fast, checked), pushes):
            out = published[id(state)]
            out.extend(state.take_events())
            if then == "frame" or (then == "push" and push):
                out.append(state.reading(mono, reset=True, pushed=then == "push"))
    for state in (fast, checked):
        published[id(state)] += [state.reading(99.0, reset=True), state.counters, *state.resistance()]
    assert published[id(fast)] == published[id(checked)]
    assert fast.counters.windows_total + fast.counters.nonsense_lines_total == len(lines)


def test_a_read_of_one_usual_line_takes_the_fast_path() -> None:
    state = RailState(PsuSection(port="/dev/x"))
    state.opened()
    state.feed(b"partial tail\r\n", 0.0, 0.0)
    calls: list[str] = []
    state.line = lambda line, mono, wall: calls.append(line) or False  # type: ignore[method-assign]
    assert state.feed((SAG + "\r\n").encode(), 0.1, 0.1)
    assert calls == [] and state.counters.windows_total == 1
    # Several lines in one read, or a line cut in two, go through the splitter; usual lines are
    # still parsed fast, any other through every check.
    other = format_rm1("RM1,up=1844000,seq=1843,win=1000,n=9,v=12010/12001/12020")
    data = (rm1(1842) + "\r\n" + other + "\r\n" + rm1(1844)).encode()
    state.feed(data[:-30], 0.2, 0.2)
    state.feed(data[-30:] + b"\r\n", 0.3, 0.3)
    assert calls == [other] and state.counters.windows_total == 3


def test_path_resistance_points_are_taken_in_when_read_and_never_pile_up() -> None:
    state = RailState(PsuSection(port="/dev/x"))
    state.opened()
    state.feed(b"\n", 0.0, 0.0)
    for k in range(200):
        state.feed((rm1(k) + "\r\n").encode(), k, 1_700_000_000.0 + k)
        assert len(state._paths.points) < 64
    (estimate,) = state.resistance()
    assert estimate.points == 200 and not state._paths.points


def test_windows_without_samples_go_stale_like_silence() -> None:
    # A loose sensor lead: the firmware keeps sending windows, each with no sample (n=0, read
    # failed). The rail is not watched (no voltage to alarm on), so it must go stale and let
    # psu_adc_silent say so, not stay "fresh" with no reading for ever.
    state = RailState(PsuSection(port="/dev/x", stale_after_s=3.0))
    feed(state, rm1(0), mono=10.0)
    state.reading(mono=10.1, reset=True)
    empty = [format_rm1(f"RM1,seq={seq},up={(seq + 1) * 1000},win=1000,n=0,flags=1") for seq in range(1, 8)]
    for offset, line in enumerate(empty, start=1):
        feed(state, line, mono=10.0 + offset)
    reading = state.reading(mono=17.5, reset=True)
    assert reading.windows == 7 and reading.volts is None
    assert reading.stale
    assert state.reading(mono=17.6, reset=True).stale


def test_a_primary_channel_the_device_never_sends_goes_stale() -> None:
    # `primary = "vload"` on a device that sends only v: no reading for the alarms to look at.
    state = RailState(PsuSection(port="/dev/x", primary="vload", stale_after_s=3.0))
    state.opened(0.0)
    state.feed(b"partial\n", 0.0, 0.0)
    for seq in range(6):
        state.feed((rm1(seq) + "\r\n").encode(), float(seq), float(seq))
    reading = state.reading(mono=5.5, reset=True)
    assert reading.windows == 6 and reading.volts is None and reading.stale


def test_a_replaced_adc_starts_its_own_window_sequence() -> None:
    # One ADC swapped for another that has been running for a while (its seq far ahead): the
    # jump is not thousands of lost windows, nor a reboot.
    state = RailState(PsuSection(port="/dev/x"))
    feed(state, IDENTITY, rm1(0), rm1(1))
    state.query_sent(5.0)
    other = format_rm1("RMI,proto=1,fw=rmfw-0.3,id=AB00000000000001,sensor=ina226,win=1000,ch=v;i;vpsu")
    feed(state, other, rm1(5000), rm1(5001), mono=6.0)
    assert [e.kind for e in state.take_events()] == ["psu_adc_replaced"]
    assert state.counters.lost_windows_total == 0 and state.counters.reboots_total == 0
    assert state.counters.windows_total == 4


def test_a_text_device_printing_one_channel_a_line_repeats_every_channel() -> None:
    # Adafruit's INA219 example prints voltage and current on lines of their own every 2 s; a
    # frame between two blocks repeated only the last line (the current): the rail read as missing.
    state = RailState(PsuSection(port="/dev/x", protocol="text", stale_after_s=3.0,
                                 channels={"v": "Load Voltage", "i": "Current"}))
    state.opened(0.0)
    state.feed(b"\n", 0.0, 0.0)
    state.feed(b"Load Voltage:  11.98 V\r\nCurrent:       1320.00 mA\r\nPower:         15813.60 mW\r\n", 0.5, 0.5)
    first = state.reading(1.0, reset=True)
    repeated = state.reading(2.0, reset=True)
    assert first.volts is not None and first.amps is not None
    assert repeated.windows == 0 and not repeated.stale
    assert repeated.volts == first.volts and repeated.amps == first.amps
    # A channel not printed for the stale limit is not repeated.
    state.feed(b"Load Voltage:  12.01 V\r\n", 3.0, 3.0)
    state.reading(3.1, reset=True)
    later = state.reading(3.9, reset=True)
    assert later.windows == 0 and not later.stale and later.amps is None
    assert later.volts is not None and later.volts.min_volts == 12.01


def test_bytes_at_the_wrong_baud_rate_are_dropped_as_malformed_not_ignored() -> None:
    """A UART read at the wrong speed hands over noise; the counters must not call it a chatty banner."""
    state = RailState(PsuSection(port="/dev/x"))
    state.opened()
    noise = bytes([0x93, 0xF8, 0x00, 0x1E, 0xFE, 0x86, 0x3C, 0xE0])
    state.feed(b"\r\n" + (noise + b"\r\n") * 5 + b"[INFO] ina226 ready\r\n", 0.0, 0.0)
    c = state.counters
    assert (c.malformed_lines_total, c.ignored_lines_total, c.windows_total) == (5, 1, 0)


def test_a_port_gone_reads_stale_at_once_without_repeating_its_last_window() -> None:
    """A port that went away 0.1 s after its last window (well within the stale limit) repeated that
    window as if the device still sent it: connected false with a fresh-looking envelope."""
    state = RailState(PsuSection(port="/dev/x", stale_after_s=3.0))
    state.opened(0.0)
    feed(state, rm1(0), rm1(1), mono=1.0)
    state.closed("/dev/x: Input/output error")
    # The windows that came before it went are reported once, not lost.
    before = state.reading(mono=1.1, reset=True)
    assert not before.connected and before.windows == 2 and before.volts is not None and not before.stale
    gone = state.reading(mono=1.2, reset=True)
    assert not gone.connected and gone.stale and gone.windows == 0
    assert gone.volts is None and gone.amps is None and gone.channels_volts == {} and gone.seq == 1
    assert gone.counters.disconnects_total == 1 and gone.counters.windows_total == 2


def test_a_replugged_port_is_judged_from_its_reopening_and_never_repeats_the_window_before_the_unplug() -> None:
    """After an unplug of 10 s the rail read stale the moment the port opened again (its silence
    counted from the last window before the unplug, so `psu_adc_silent` could fire before the first
    new window), and within the stale limit it repeated the window from before the unplug as current."""
    state = RailState(PsuSection(port="/dev/x", stale_after_s=3.0))
    state.opened(0.0)
    feed(state, rm1(0), rm1(1), mono=1.0)
    state.reading(mono=1.5, reset=True)
    state.closed("/dev/x: Input/output error")
    state.reading(mono=2.0, reset=True)
    state.opened(12.0)
    waiting = state.reading(mono=12.5, reset=True)
    assert waiting.connected and not waiting.stale, "a port opened 0.5 s ago is not silent yet"
    assert waiting.windows == 0 and waiting.volts is None and waiting.channels_volts == {}
    silent = state.reading(mono=15.5, reset=True)
    assert silent.stale, "silent for the stale limit since the reopening"
    state.opened(20.0)
    feed(state, rm1(2), mono=20.5)
    fresh = state.reading(mono=21.0, reset=True)
    assert fresh.windows == 1 and fresh.volts is not None and not fresh.stale
    repeated = state.reading(mono=21.5, reset=True)
    assert repeated.windows == 0 and repeated.volts is not None and not repeated.stale
