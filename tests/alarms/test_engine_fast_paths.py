"""The engine's shortcuts change no alarm: reading the frame's records (`frame_view`) instead of
plain data, leaving out clear observations of rules without alarms, checking memoryless state
rules by value, and keeping only a counter's changes."""

from __future__ import annotations

import gzip
import json
from collections import deque
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.frame_reads import FrameReads
from rigmon.alarms.lifecycle import Transition
from rigmon.alarms.quiet import counter_update
from rigmon.alarms.rule_state import RuleState
from rigmon.alarms.rules import default_rules
from rigmon.alarms.selector import frame_data, frame_view, parse_selector
from rigmon.alarms.walk import WalkCarry
from rigmon.schema import EventValue, Frame, GpuReading, NvLinkReading, Readings, decode_data
from tests.alarms.helpers import T0, FakeClock, rules

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frames"
NAMES = sorted(p.name.split(".")[0] for p in FIXTURES.glob("*.jsonl.gz"))


def load(name: str) -> list[Frame]:
    with gzip.open(FIXTURES / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [decode_data(Frame, json.loads(line)) for line in f if line.strip()]


def summary(transitions: list[Transition]) -> list[tuple[object, ...]]:
    return [(t.change, t.previous, t.restored, t.alarm) for t in transitions]


@pytest.mark.parametrize("name", NAMES)
def test_shortcuts_give_the_same_transitions_on_recorded_frames(name: str) -> None:
    frames = load(name)
    fast = AlarmEngine(default_rules(), "n1", FakeClock(), id_prefix="x")
    full = AlarmEngine(default_rules(), "n1", FakeClock(), id_prefix="x")
    full.skip_quiet = False
    fired = 0
    for frame in frames:
        a = fast.evaluate(frame)
        b = full.evaluate_data(frame_data(frame), frame.events, frame.taken_at)
        assert summary(a) == summary(b), frame.seq
        fired += sum(1 for t in a if t.change == "firing")
    assert fast.active() == full.active() and fast.recent() == full.recent()
    if name.startswith(("v100-gpu-lost", "raid1-member")):
        assert fired  # the comparison saw alarms fire, not only quiet frames


COUNTER = """
[[rule]]
name = "replay"
kind = "counter"
select = "gpus[*].pcie_replay_total"
max_increase = 10
window_s = 600
clear_hold_s = 60
subject = "gpu:{index}"
"""


def replay_data(total: int) -> dict[str, object]:
    return {"gpus": [{"index": 0, "pcie_replay_total": total}, {"index": 1, "pcie_replay_total": 0}]}


@pytest.mark.parametrize("skip_quiet", [True, False])
def test_a_counter_keeps_its_changes_only_and_fires_and_resolves_as_before(skip_quiet: bool) -> None:
    engine = AlarmEngine(rules(COUNTER), "n1", FakeClock(), id_prefix="x")
    engine.skip_quiet = skip_quiet
    seen = []
    # Quiet for 20 minutes, 12 replays within a minute, then quiet again for 20 minutes.
    totals = [5] * 1200 + [5 + i // 5 for i in range(60)] + [17] * 1200
    for t, total in enumerate(totals):
        seen += [(t, tr.change, tr.alarm.subject, tr.alarm.value) for tr in
                 engine.evaluate_data(replay_data(total), [], T0 + t)]
    # As the engine that kept every sample found (main before round 3): 11 more than 600 s
    # before at t=1255; clear once the window has slid past the first rise (t=1810) and the
    # 60 s clear hold has run.
    assert seen == [(1255, "firing", "gpu:0", 11), (1870, "resolved", "gpu:0", 12)]
    histories = engine._state["replay"].window
    # One change each, at or before the window's start: the value the increase is counted from
    # (every sample of the last 600 s was kept before: 601 each).
    assert {subject: len(h) for subject, h in histories.items()} == {"gpus[index=0]": 1, "gpus[index=1]": 1}


SLOWER = """
[[rule]]
name = "slower"
kind = "state"
select = "net[*].speed_mbps"
below_first_seen = true
hold_s = 2
clear_hold_s = 3
subject = "link:{name}"
message = "link {name} at {value} Mb/s, first seen at {first_seen} Mb/s"
"""


@pytest.mark.parametrize("skip_quiet", [True, False])
def test_a_link_below_its_first_speed_fires_and_resolves_as_before(skip_quiet: bool) -> None:
    """A quiet ``below_first_seen`` rule reads subjects and values only; a link that drops below its
    first speed is observed from its match as before (message with the first speed)."""
    engine = AlarmEngine(rules(SLOWER), "n1", FakeClock(), id_prefix="x")
    engine.skip_quiet = skip_quiet
    seen = []
    speeds = [1000] * 5 + [100] * 6 + [1000] * 6 + [None] * 2 + [10000] * 2
    for t, speed in enumerate(speeds):
        data = {"net": [{"name": "eth0", "speed_mbps": speed}, {"name": "eth1", "speed_mbps": 1000 if t else 10}]}
        seen += [(t, tr.change, tr.alarm.subject, tr.alarm.value, tr.alarm.message) for tr in
                 engine.evaluate_data(data, [], T0 + t)]
    # As main before the shortcut: pending at the drop, firing after the 2 s hold, resolved 3 s
    # after the speed came back; a missing reading forgets nothing, a faster one raises nothing.
    message = "link eth0 at 100 Mb/s, first seen at 1000 Mb/s"
    assert seen == [(5, "pending", "link:eth0", 100, message), (7, "firing", "link:eth0", 100, message),
                    (14, "resolved", "link:eth0", 100, message)]
    assert engine._state["slower"].first_seen == {"net[name=eth0]": 1000, "net[name=eth1]": 10}


# --- Records given again from frame to frame (a GPU's NVLink records while nothing moved) --------

NVLINK_REPLAY = """
[[rule]]
name = "replay"
kind = "counter"
select = "gpus[*].nvlinks[*].replay_total"
max_increase = 10
window_s = 100
clear_hold_s = 20
subject = "gpu:{index}"
message = "GPU {index} link {link} +{increase:.0f} in {span_s:.0f} s"
"""


class LinkFrames:
    """Frames of GPUs whose NVLink records are given again, the same objects, while a GPU's replay
    totals stay the same, as the GPU collector gives them; the GPU records are new every frame."""

    def __init__(self, gpus: int = 2, links: int = 3) -> None:
        self.links = links
        self.totals = [[0] * links for _ in range(gpus)]
        self.held: dict[int, tuple[tuple[int, ...], tuple[NvLinkReading, ...]]] = {}
        self.seq = 0

    def frame(self, t_s: float, index_of: dict[int, int] | None = None) -> Frame:
        gpus = []
        for g, totals in enumerate(self.totals):
            key = tuple(totals)
            held = self.held.get(g)
            if held is None or held[0] != key:
                held = self.held[g] = (key, tuple(
                    NvLinkReading(link=n, active=True, replay_total=v, recovery_total=0, crc_flit_total=0,
                                  crc_data_total=0) for n, v in enumerate(totals)))
            index = g if index_of is None else index_of.get(g, g)
            gpus.append(GpuReading(index=index, uuid=f"GPU-{g}", name="V100", serial=None, pci_bus_id=None,
                                   pci_bus_id_nvml=None, pci_bus_id_xid=None, power_w=100.0 + t_s,
                                   nvlinks=held[1]))
        self.seq += 1
        return Frame(schema=1, node="n1", run_id="r", seq=self.seq, taken_at=T0 + t_s, agent_start=T0,
                     collectors={}, readings=Readings(gpus=tuple(gpus)))


def both(rule_text: str, script: dict[float, tuple[int, int, int]], until_s: float,
         renumber: dict[float, dict[int, int]] | None = None, min_still: int = 20) -> list[tuple[float, str, str, str]]:
    """Run frames every second to ``until_s`` through an engine reading the records as they are (the
    NVLink records given again) and one reading plain data (nothing is the same object, nothing is
    skipped: the engine as it always was); assert equal transitions and return them as
    ``(t, change, subject, message)``. ``script`` sets, from a time on, GPU ``g`` link ``n``'s total ``v``."""
    links = LinkFrames()
    fast = AlarmEngine(rules(rule_text), "n1", FakeClock(), id_prefix="x")
    full = AlarmEngine(rules(rule_text), "n1", FakeClock(), id_prefix="x")
    full.skip_quiet = False
    seen: list[tuple[float, str, str, str]] = []
    index_of: dict[int, int] | None = None
    t_s = 0.0
    still = 0
    while t_s <= until_s:
        if t_s in script:
            g, n, v = script[t_s]
            links.totals[g][n] = v
        if renumber is not None and t_s in renumber:
            index_of = renumber[t_s]
        frame = links.frame(t_s, index_of)
        a = fast.evaluate(frame)
        b = full.evaluate_data(frame_data(frame), frame.events, frame.taken_at)
        assert summary(a) == summary(b), t_s
        seen.extend((t_s, t.change, t.alarm.subject, t.alarm.message) for t in a)
        still += getattr(fast._state["replay"], "quiet_pairs", None) is not None
        t_s += 1.0
    assert fast.active() == full.active() and fast.recent() == full.recent()
    assert still >= min_still  # the counter rule skipped quiet frames
    return seen


def test_a_counter_rising_after_many_unchanged_frames_fires_in_the_same_frame() -> None:
    seen = both(NVLINK_REPLAY, {40.0: (1, 2, 4), 70.0: (1, 2, 15)}, 90.0)
    assert seen == [(70.0, "firing", "gpu:1", "GPU 1 link 2 +15 in 70 s")]


def test_a_window_expiring_during_unchanged_frames_clears_at_the_same_time() -> None:
    # +15 at 10 s fires; the totals then stand still: the rise leaves the 100 s window at 110 s,
    # and the alarm resolves after clear_hold_s (20 s) at 130 s.
    seen = both(NVLINK_REPLAY, {10.0: (0, 1, 15)}, 200.0)
    assert seen == [(10.0, "firing", "gpu:0", "GPU 0 link 1 +15 in 10 s"),
                    (130.0, "resolved", "gpu:0", "GPU 0 link 1 +15 in 10 s")]


def test_small_rises_a_window_apart_stay_quiet_through_unchanged_frames() -> None:
    # +6 at 5 s, then nothing until +6 more at 140 s: the first rise left the window (at 105 s)
    # while the totals stood still, so the increase is 6, not 12. Then +6 at 150 s: 12 in 100 s.
    seen = both(NVLINK_REPLAY, {5.0: (0, 0, 6), 140.0: (0, 0, 12), 150.0: (0, 0, 18)}, 170.0)
    assert seen == [(150.0, "firing", "gpu:0", "GPU 0 link 0 +12 in 100 s")]


def test_a_reset_after_unchanged_frames_and_a_rise_after_it() -> None:
    seen = both(NVLINK_REPLAY, {20.0: (1, 0, 5), 60.0: (1, 0, 0), 90.0: (1, 0, 11)}, 120.0)
    assert seen == [(90.0, "firing", "gpu:1", "GPU 1 link 0 +11 in 30 s")]


def test_a_renumbered_gpu_with_the_same_link_records_is_another_subject() -> None:
    # GPU 1's links, unchanged objects, now under index 5: a new subject (a history of its own).
    seen = both(NVLINK_REPLAY, {30.0: (1, 0, 20), 50.0: (1, 0, 40)}, 60.0, renumber={40.0: {1: 5}})
    assert [(t, c, s) for t, c, s, _ in seen][:1] == [(30.0, "firing", "gpu:1")]
    assert (50.0, "firing", "gpu:5") in [(t, c, s) for t, c, s, _ in seen]


def test_reads_below_the_same_link_records_are_the_previous_frames_and_the_counter_rule_skips_them() -> None:
    links = LinkFrames()
    selector = parse_selector("gpus[*].nvlinks[*].replay_total")
    carry = WalkCarry()
    first = FrameReads(frame_view(links.frame(0.0)), carry).subject_values(selector)
    second = FrameReads(frame_view(links.frame(1.0)), carry).subject_values(selector)
    assert second is first and len(first) == 6
    links.totals[0][1] = 3
    third = FrameReads(frame_view(links.frame(2.0)), carry).subject_values(selector)
    assert third is not first and third[1] == ("gpus[index=0].nvlinks[link=1]", 3)
    # Plain data (lists and dicts that may change in place) is never carried.
    plain = frame_data(links.frame(3.0))
    assert FrameReads(plain, carry).subject_values(selector) is not FrameReads(plain, carry).subject_values(selector)

    (rule,) = rules(NVLINK_REPLAY)
    state = RuleState()
    assert counter_update(rule, state, first, T0) == []
    assert state.quiet_pairs is None  # the histories were made: not still
    assert counter_update(rule, state, first, T0 + 1) == [] and state.quiet_pairs is first
    # The same list again is not gone through: a history changed behind its back (here: an older
    # sample 20 below) is not seen until another list comes.
    state.window["gpus[index=0].nvlinks[link=0]"].appendleft((T0 - 50, -20.0))
    assert counter_update(rule, state, first, T0 + 2) == []
    assert counter_update(rule, state, list(first), T0 + 3) == [0]


def test_the_same_reads_are_gone_through_again_once_a_window_start_passes_a_second_sample() -> None:
    (rule,) = rules(NVLINK_REPLAY)  # window_s 100
    pairs: list[tuple[str, EventValue]] = [("a", 0), ("b", 5)]
    state = RuleState()
    counter_update(rule, state, [("a", 0), ("b", 0)], T0)
    counter_update(rule, state, [("a", 0), ("b", 5)], T0 + 10)  # b: samples at 0 and 10 s
    assert counter_update(rule, state, pairs, T0 + 20) == [] and state.quiet_pairs is pairs
    assert state.quiet_until == T0 + 110
    # A history changed behind the rule's back (+25 in the window) is seen only when the list
    # is gone through: not before the window's start reaches b's second sample (10 s) at 110 s.
    state.window["b"] = deque([(T0 + 50, -20.0), (T0 + 60, 5.0)])
    assert counter_update(rule, state, pairs, T0 + 109.5) == []
    assert counter_update(rule, state, pairs, T0 + 110) == [1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 1), st.integers(0, 2), st.integers(0, 40)),
                max_size=12))
def test_any_script_of_link_totals_gives_the_transitions_of_the_engine_without_shortcuts(
        steps: list[tuple[int, int, int, int]]) -> None:
    # Rises, resets and stretches of unchanged records at random times, over three 100 s windows:
    # the engine that skips unchanged link lists gives every transition the plain engine gives.
    script = {float(t): (g, n, v) for t, g, n, v in steps}
    both(NVLINK_REPLAY, script, 330.0, min_still=0)
