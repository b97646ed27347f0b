"""Selectors: paths over frame data that keep each matched item's identity."""

from __future__ import annotations

from typing import Any

import pytest

from rigmon.alarms.selector import IdentityMemo, SelectorError, frame_data, parse_selector
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame, Readings, TemperatureReading

DATA: dict[str, Any] = {
    "psu": {"window_min_volts": 11.62, "path_resistance_mohm": None},
    "gpus": [
        {"index": 0, "uuid": "GPU-a", "name": "Tesla V100-SXM2-32GB", "state": "ok"},
        {"index": 1, "uuid": "GPU-b", "name": "Tesla V100-SXM2-32GB", "state": "lost"},
    ],
    "net": [{"name": "eth0", "speed_mbps": 10000}, {"name": "enp1s0.10", "speed_mbps": 1000}],
    "temperatures": [{"label": "a", "temp_c": 40.0}, {"label": "a", "temp_c": 41.0}],
    "collectors": {"host": {"state": "ok"}, "gpu": {"state": "error"}},
    "empty": [],
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("psu.window_min_volts", [("psu", 11.62)]),
        ("psu.path_resistance_mohm", []),  # null: missing data matches nothing
        ("psu.no_such_field", []),
        ("thunderbolt[*].state", []),  # a source this build does not have
        ("empty[*].state", []),
        # A GPU's name is its product name, shared by all: the index identifies it.
        ("gpus[*].state", [("gpus[index=0]", "ok"), ("gpus[index=1]", "lost")]),
        ("gpus[uuid=GPU-b].state", [("gpus[index=1]", "lost")]),
        ("gpus[1].index", [("gpus[index=1]", 1)]),
        ("gpus[-1].index", [("gpus[index=1]", 1)]),
        ("net[name=eth0].speed_mbps", [("net[name=eth0]", 10000)]),
        ("net[name=enp1s0.10].speed_mbps", [("net[name=enp1s0.10]", 1000)]),
        ("temperatures[*].temp_c", [("temperatures[#0]", 40.0), ("temperatures[#1]", 41.0)]),
        ("collectors.*.state", [("collectors.host", "ok"), ("collectors.gpu", "error")]),
        ("collectors.gpu.state", [("collectors.gpu", "error")]),
        ("psu[*].window_min_volts", []),  # [*] on a record, not a list
        ("gpus.state", []),
    ],
)
def test_select(text: str, expected: list[tuple[str, object]]) -> None:
    assert [(m.subject, m.value) for m in parse_selector(text).select(DATA)] == expected


def test_labels_carry_every_identity_field() -> None:
    m = parse_selector("gpus[*].state").select(DATA)[1]
    assert m.labels == {"index": "1", "uuid": "GPU-b", "name": "Tesla V100-SXM2-32GB"}
    assert m.path == "gpus[index=1].state"
    assert parse_selector("collectors.*.state").select(DATA)[0].labels == {"key": "host"}


def test_selectors_sharing_a_memo_find_what_each_finds_alone() -> None:
    """The engine works out each list's identities once per frame for all its rules."""
    texts = ["gpus[*].state", "gpus[uuid=GPU-b].index", "temperatures[*].temp_c", "net[name=eth0].speed_mbps",
             "gpus[*].state", "temperatures[1].temp_c"]
    memo: IdentityMemo = {}
    shared = [parse_selector(t).select(DATA, memo) for t in texts]
    assert shared == [parse_selector(t).select(DATA) for t in texts]
    assert len(memo) == 3  # gpus, temperatures, net
    # A match's labels are its own: changing them does not reach the memo or other matches.
    shared[0][0].labels["index"] = "changed"
    assert parse_selector("gpus[*].state").select(DATA, memo)[0].labels["index"] == "0"


@pytest.mark.parametrize("text", ["", "gpus[", "gpus[]", "gpus[x]", "gpus..state", "9gpus", "gpus[=1]", "a-b"])
def test_bad_selectors(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


PATHS: dict[str, Any] = {"peer_paths": [
    {"name": "node02/tbnet", "state": "silent", "key_mismatch": False, "peer_flooded": False},
    {"name": "node02/roce", "state": "silent", "key_mismatch": False, "peer_flooded": True},
    {"name": "node03/tbnet", "state": "silent", "key_mismatch": True, "peer_flooded": False},
    {"name": "node03/roce", "state": "ok", "key_mismatch": False, "peer_flooded": False},
]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("peer_paths[key_mismatch=false,peer_flooded=false].state",
         [("peer_paths[name=node02/tbnet]", "silent"), ("peer_paths[name=node03/roce]", "ok")]),
        ("peer_paths[ key_mismatch = false , peer_flooded = true ].state", [("peer_paths[name=node02/roce]", "silent")]),
        ("peer_paths[state=silent,key_mismatch=false,peer_flooded=false].name",
         [("peer_paths[name=node02/tbnet]", "node02/tbnet")]),
        ("peer_paths[key_mismatch=true,peer_flooded=true].state", []),  # no item has both
        ("peer_paths[key_mismatch=false,no_such_field=x].state", []),
        ("peer_paths[name='node02/roce',state=silent].peer_flooded", [("peer_paths[name=node02/roce]", True)]),
        # Two brackets filter the items of a list inside the list (none here), not the same item twice.
        ("peer_paths[key_mismatch=false][peer_flooded=false].state", []),
    ],
)
def test_a_filter_of_several_fields_keeps_the_items_that_equal_them_all(text: str,
                                                                       expected: list[tuple[str, object]]) -> None:
    selector = parse_selector(text)
    assert [(m.subject, m.value) for m in selector.select(PATHS)] == expected
    assert selector.values(PATHS) == [value for _, value in expected]
    assert selector.subject_values(PATHS, {}, {}) == expected


def test_a_quoted_value_may_hold_a_comma_and_each_condition_is_kept_in_order() -> None:
    (step,) = parse_selector('net[name="a,b", kind=ethernet]').steps
    (flt,) = step.filters
    assert (flt.kind, flt.field, flt.value, flt.also) == ("equals", "name", "a,b", (("kind", "ethernet"),))
    data = {"net": [{"name": "a,b", "kind": "ethernet", "mtu": 9000}, {"name": "a", "kind": "ethernet", "mtu": 1500}]}
    assert parse_selector('net[name="a,b",kind=ethernet].mtu').values(data) == [9000]


def test_an_apostrophe_inside_a_plain_value_does_not_swallow_the_conditions_after_it() -> None:
    # Only a quote where a value starts opens one: o'brien's apostrophe is text.
    step = parse_selector("net[name=o'brien,kind=ethernet].mtu").steps[0]
    (flt,) = step.filters
    assert (flt.field, flt.value, flt.also) == ("name", "o'brien", (("kind", "ethernet"),))
    data = {"net": [{"name": "o'brien", "kind": "ethernet", "mtu": 9000}, {"name": "o'brien", "kind": "ib", "mtu": 4092}]}
    assert parse_selector("net[name=o'brien,kind=ethernet].mtu").values(data) == [9000]
    assert parse_selector("net[kind = 'ethernet', name=o'brien].mtu").values(data) == [9000]


@pytest.mark.parametrize(("text", "says"), [
    ("peer_paths[key_mismatch=false,].state", "bad filter [key_mismatch=false,] in selector"),
    ("peer_paths[,key_mismatch=false].state", "bad filter [,key_mismatch=false]"),
    ("peer_paths[key_mismatch=false,peer_flooded].state", "(use [*], [N], [field=value] or [field=value,field=value])"),
    ("peer_paths[*,key_mismatch=false].state", "bad filter [*,key_mismatch=false]"),
    ("peer_paths[0,key_mismatch=false].state", "bad filter [0,key_mismatch=false]"),
    ("peer_paths[key_mismatch=false,peer-flooded=false].state", "bad filter"),
    ("peer_paths[state=silent,state=ok].name", "field 'state' given twice"),
    ("net[name=a,b].mtu", "bad filter [name=a,b]"),  # a comma in a value is quoted
])
def test_bad_filters_of_several_fields_say_which_filter(text: str, says: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    assert says in str(info.value)
    assert f'"{text}"' in str(info.value)


def test_frame_data_has_readings_collectors_node() -> None:
    frame = Frame(schema=SCHEMA_VERSION, node="n1", run_id="r", seq=1, taken_at=5.0, agent_start=1.0,
                  collectors={"host": CollectorStatus(state="ok", ok=True, sampled_at=4.0)},
                  readings=Readings(temperatures=(TemperatureReading(sensor="tz0", label="cpu", temp_c=50.0),)))
    data = frame_data(frame)
    assert [(m.subject, m.value) for m in parse_selector("temperatures[*].temp_c").select(data)] == [
        ("temperatures[sensor=tz0]", 50.0)]
    assert parse_selector("collectors.*.sampled_at").select(data)[0].value == 4.0
    assert data["node"] == "n1" and data["taken_at"] == 5.0
