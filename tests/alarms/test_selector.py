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


def test_frame_data_has_readings_collectors_node() -> None:
    frame = Frame(schema=SCHEMA_VERSION, node="n1", run_id="r", seq=1, taken_at=5.0, agent_start=1.0,
                  collectors={"host": CollectorStatus(state="ok", ok=True, sampled_at=4.0)},
                  readings=Readings(temperatures=(TemperatureReading(sensor="tz0", label="cpu", temp_c=50.0),)))
    data = frame_data(frame)
    assert [(m.subject, m.value) for m in parse_selector("temperatures[*].temp_c").select(data)] == [
        ("temperatures[sensor=tz0]", 50.0)]
    assert parse_selector("collectors.*.sampled_at").select(data)[0].value == 4.0
    assert data["node"] == "n1" and data["taken_at"] == 5.0
