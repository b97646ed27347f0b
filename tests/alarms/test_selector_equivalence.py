"""Selectors read a frame's records directly (`frame_view`) and find exactly what the recursive
walker over `frame_data` found: same paths, subjects, values and labels, in the same order."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigmon.alarms.rules import default_rules
from rigmon.alarms.selector import IdentityMemo, LevelMemo, frame_data, frame_view, parse_selector
from rigmon.schema import Frame, decode_data
from tests.alarms.reference_walker import reference_select

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frames"
NAMES = sorted(p.name.split(".")[0] for p in FIXTURES.glob("*.jsonl.gz"))

#: Selectors of the default rules, and some that use every kind of step and filter.
SELECTORS = sorted({r.selector.text for r in default_rules() if r.selector is not None} | {
    "gpus[0].power_w", "gpus[-1].state", "gpus[index=3].state", "gpus[*].nvlinks[1].replay_total",
    "net[name=eth0].speed_mbps", "net[*].name", "raid[*].members[*].role", "raid[0].members[-1].name",
    "collectors.*.state", "collectors.*.*", "collectors.gpu.duration_s", "*.state", "*[*].name",
    "psu_rail.volts.min_volts", "psu_rail.*.min_volts", "host.cpu_pct", "node", "taken_at",
    "temperatures[*].temp_c", "thunderbolt[*].link_state", "nvme[*].link_state", "gpu_processes[*].pid",
    "host[*].cpu_pct", "gpus.state", "no_such_field[*].x", "gpus[state=lost,index=3].uuid",
    "net[kind=ethernet,operstate=up].speed_mbps", "raid[*].members[role=in_sync,present=true].name",
})


@cache
def frames(name: str) -> tuple[Frame, ...]:
    with gzip.open(FIXTURES / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    # Every fifth frame and the last: enough states (sags, lost GPUs, degraded arrays) for the check.
    picked = lines[::5] + lines[-1:]
    return tuple(decode_data(Frame, json.loads(line)) for line in picked)


@pytest.mark.parametrize("name", NAMES)
def test_view_and_data_match_the_reference_walker_on_recorded_frames(name: str) -> None:
    for frame in frames(name):
        data, view = frame_data(frame), frame_view(frame)
        memo: IdentityMemo = {}
        levels: LevelMemo = {}
        for text in SELECTORS:
            selector = parse_selector(text)
            expected = reference_select(selector, data)
            assert selector.select(data) == expected, text
            assert selector.select(view, memo) == expected, text
            assert selector.values(view) == [m.value for m in expected], text
            assert selector.subject_values(view, memo) == [(m.subject, m.value) for m in expected], text
            assert selector.subject_values(view, memo, levels) == [(m.subject, m.value) for m in expected], text


def test_the_recorded_frames_exercise_the_selectors() -> None:
    """The comparison above is not vacuous: lists, filters and tables all match something."""
    frame = frames("v100-gpu-lost-rail-sag")[-1]
    for text in ("gpus[*].nvlinks[1].replay_total", "collectors.*.state", "gpus[index=3].state",
                 "psu_rail.volts.min_volts"):
        assert parse_selector(text).select(frame_view(frame)), text


# --- made-up data: nested dicts, lists, scalars and nulls, with and without identities --------

_KEYS = ["index", "name", "uuid", "state", "value", "items", "x"]
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, 1.0, -2.0]),
                     st.sampled_from(["a", "b", "eth0", "1", "true"]))
_data = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5)),
    max_leaves=25,
)
_step = st.tuples(st.sampled_from(_KEYS + ["*"]),
                  st.lists(st.sampled_from(["[*]", "[0]", "[-1]", "[1]", "[name=a]", "[index=1]",
                                            "[state=true]", "[name=a,index=1]", "[state=true,value=1]"]),
                           max_size=2))
_selector_text = st.lists(_step, min_size=1, max_size=4).map(
    lambda steps: ".".join(name + "".join(filters) for name, filters in steps))


@settings(max_examples=400, deadline=None)
@given(data=st.dictionaries(st.sampled_from(_KEYS), _data, max_size=5), text=_selector_text)
def test_select_matches_the_reference_walker_on_made_up_data(data: dict[str, Any], text: str) -> None:
    selector = parse_selector(text)
    expected = reference_select(selector, data)
    assert selector.select(data) == expected
    assert selector.values(data) == [m.value for m in expected]
    assert selector.subject_values(data) == [(m.subject, m.value) for m in expected]


@dataclass(frozen=True)
class _Port:
    name: object
    errors_total: int = 0


def test_identities_remembered_across_frames_follow_the_values_and_their_types() -> None:
    """Lists of records keep their identities from frame to frame (cached by the identity
    values): equal values of another type (``1``, ``1.0``, ``True``) are other text."""
    selector = parse_selector("ports[*].errors_total")
    seen = []
    for names in ([1, 2], [1.0, 2.0], [True, False], [1, 2], ["b", "a"], [1, 1]):
        data = {"ports": tuple(_Port(name=n) for n in names)}
        matches = selector.select(data)
        assert matches == reference_select(selector, {"ports": [{"name": n, "errors_total": 0} for n in names]})
        seen.append([m.subject for m in matches])
    assert seen == [["ports[name=1]", "ports[name=2]"], ["ports[name=1.0]", "ports[name=2.0]"],
                    ["ports[name=true]", "ports[name=false]"], ["ports[name=1]", "ports[name=2]"],
                    ["ports[name=b]", "ports[name=a]"], ["ports[#0]", "ports[#1]"]]


@dataclass(frozen=True)
class _Lane:
    link: object
    replay_total: object = 0


@dataclass(frozen=True)
class _Card:
    index: object
    lanes: tuple[Any, ...] = ()
    state: object = "ok"


@dataclass(frozen=True)
class _Other:
    """A record without the fields the selectors read."""

    name: str = "x"


def _plain(node: Any) -> Any:
    if isinstance(node, (_Lane, _Card, _Other)):
        return {k: _plain(v) for k, v in vars(node).items()}
    if isinstance(node, (list, tuple)):
        return [_plain(v) for v in node]
    return node


@pytest.mark.parametrize("text", ["cards[*].lanes[*].replay_total", "cards[*].state", "cards[*].lanes[0].link",
                                  "cards[*].lanes[*]", "cards[*].lanes"])
def test_reads_remembered_across_frames_see_every_new_value_and_identity(text: str) -> None:
    """What the walks keep from frame to frame (field getters by record type, item paths by list
    shape) never stands in for a reading: each frame's records are new objects with the same
    identities (a reused-looking record) and changed values, or changed identities, a record of
    another type, a ``None`` item; the one list object changed in place between two reads."""
    selector = parse_selector(text)
    lanes = [_Lane(link=0), _Lane(link=1)]
    mutable = [_Card(index=0, lanes=tuple(lanes))]
    frames_seen = [
        (_Card(index=0, lanes=(_Lane(0, 5), _Lane(1, 0))), _Card(index=1, lanes=(_Lane(0, 0),))),
        (_Card(index=0, lanes=(_Lane(0, 6), _Lane(1, 0))), _Card(index=1, lanes=(_Lane(0, 1),))),
        (_Card(index=0, lanes=(_Lane(1, 6), _Lane(0, 0))), _Card(index=1, lanes=(_Lane(0, 1.0),))),
        (_Card(index=0, lanes=(_Lane(0, 6), _Lane(0, 7))), _Card(index=1, lanes=(_Lane("0", 1),))),
        (_Card(index=0, lanes=(_Lane(0, 6), None, _Other())), _Other(), _Card(index=1, state=None)),
        (_Card(index=0, lanes=(_Lane(0, 8), _Lane(1, 9))), _Card(index=1, lanes=(_Lane(0, 2),))),
        mutable,
        mutable,
    ]
    for n, cards in enumerate(frames_seen):
        if n == len(frames_seen) - 1:
            mutable[0] = _Card(index=0, lanes=(_Lane(0, 3), _Lane(2, 4)))  # same list, changed in place
        data = {"cards": cards}
        expected = reference_select(selector, {"cards": _plain(cards)})
        memo: IdentityMemo = {}
        levels: LevelMemo = {}
        assert selector.values(data) == [m.value for m in expected], cards
        assert selector.subject_values(data, memo, levels) == [(m.subject, m.value) for m in expected], cards
        assert selector.subject_values(data, memo, levels) == [(m.subject, m.value) for m in expected], cards
        assert selector.select(data, memo) == expected, cards


def test_table_entries_remembered_across_frames_follow_their_keys_and_types() -> None:
    """A table's entry paths are kept by its keys: new keys, and equal keys of another type, are seen."""
    selector = parse_selector("t.*.x")
    for table in ({"a": {"x": 1}, "b": {"x": 2}}, {"a": {"x": 3}, "c": {"x": 2}}, {1: {"x": 1}},
                  {1.0: {"x": 1}}, {True: {"x": 1}}, {"b": {"x": 5}, "a": None}):
        data = {"t": table}
        expected = reference_select(selector, data)
        assert selector.subject_values(data, {}, {}) == [(m.subject, m.value) for m in expected], table
        assert selector.values(data) == [m.value for m in expected], table
