"""The wire codec (msgspec under rigmon.schema.encode/decode): what it keeps of the old converter."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

import pytest

import rigmon.typed
from rigmon.cluster.sanitise import decode_agent
from rigmon.schema import CollectorStatus, Event, Frame, SchemaError, decode, decode_data, encode
from tests.test_schema import sample_frame


def test_valid_input_never_walks_the_reflection_converter(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("rigmon.typed used on the wire's valid path")

    monkeypatch.setattr(rigmon.typed, "from_data", refuse)
    monkeypatch.setattr(rigmon.typed, "to_data", refuse)
    monkeypatch.setattr("rigmon.schema.frame.from_data", refuse)
    frame = sample_frame()
    raw = encode(frame)
    assert decode(Frame, raw) == frame
    assert decode_agent(Frame, raw) == frame
    assert decode_data(Frame, json.loads(raw)) == frame


def test_errors_name_the_path_with_dict_keys() -> None:
    data = json.loads(encode(sample_frame()))
    data["collectors"]["host"]["state"] = "sleepy"
    with pytest.raises(SchemaError, match=r"bad Frame: collectors\.host\.state: expected one of"):
        decode(Frame, json.dumps(data))
    data = json.loads(encode(sample_frame()))
    data["events"][0]["severity"] = "meh"
    with pytest.raises(SchemaError, match=r"events\[0\]\.severity"):
        decode(Frame, json.dumps(data))
    with pytest.raises(SchemaError, match=r"schema version 2"):
        decode(Frame, json.dumps({**json.loads(encode(sample_frame())), "schema": 2}))
    with pytest.raises(SchemaError, match=r"schema version 2"):
        decode(Frame, json.dumps({**json.loads(encode(sample_frame())), "schema": 2, "seq": "x"}))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_floats_are_refused_on_encode_even_where_null_is_allowed(value: float) -> None:
    # duration_s is `float | None`: msgspec alone would write null there.
    status = CollectorStatus(state="ok", ok=True, duration_s=value)
    with pytest.raises(ValueError):
        encode(status)
    event = Event(id="r-1", at=1.0, kind="k", severity="info", subject="s", message="m", data={"x": value})
    with pytest.raises(ValueError):
        encode(event)


def test_bytes_that_look_like_a_non_finite_float_still_encode() -> None:
    # msgpack writes this integer as CE CB 7F F0 00: the quick scan matches, the exact check clears it.
    event = Event(id="r-1", at=1.0, kind="k", severity="info", subject="s", message="m", data={"n": 0xCB7FF000})
    assert decode(Event, encode(event)) == event


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_non_finite_numbers_are_refused_on_decode(number: bytes) -> None:
    raw = b'{"state":"ok","ok":true,"duration_s":' + number + b"}"
    with pytest.raises(SchemaError, match="duration_s"):
        decode(CollectorStatus, raw)


def test_ints_become_floats_and_bools_are_not_ints() -> None:
    assert decode(CollectorStatus, b'{"state":"ok","ok":true,"duration_s":2}').duration_s == 2.0
    with pytest.raises(SchemaError, match=r"seq: expected an integer"):
        decode(Frame, json.dumps({**json.loads(encode(sample_frame())), "seq": True}))


@dataclass(frozen=True, slots=True)
class _NewPort:
    name: str
    state: Literal["active", "down"]
    rate_gbps: float | None = None
    lanes: tuple[int, ...] = ()
    counters: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _NewReadings:
    ports: tuple[_NewPort, ...] = ()


def test_a_new_record_type_needs_no_codec_table() -> None:
    record = _NewReadings(ports=(_NewPort(name="mlx5_0", state="active", rate_gbps=100, lanes=(4,),
                                          counters={"rx": 1}),))
    raw = encode(record)
    assert json.loads(raw) == {"ports": [{"name": "mlx5_0", "state": "active", "rate_gbps": 100,
                                          "lanes": [4], "counters": {"rx": 1}}]}
    assert decode(_NewReadings, raw) == record
    # An older client (no `lanes` etc. known) ignores what it does not know; a newer one fills defaults.
    assert decode(_NewReadings, b'{"ports":[{"name":"a","state":"down","later":1}]}') == _NewReadings(
        ports=(_NewPort(name="a", state="down"),))
    with pytest.raises(SchemaError, match=r"ports\[0\]\.state"):
        decode(_NewReadings, b'{"ports":[{"name":"a","state":"up"}]}')


def test_dashboard_errors_quote_no_raw_control_character() -> None:
    raw = b'{"state":"ok\\u001b[2J","ok":true}'
    with pytest.raises(SchemaError) as caught:
        decode_agent(CollectorStatus, raw)
    assert "\x1b" not in str(caught.value) and "\\x1b" in str(caught.value)


def test_parsed_data_with_nan_is_refused_where_a_float_is_declared() -> None:
    data = json.loads(b'{"state":"ok","ok":true,"duration_s":NaN}')
    with pytest.raises(SchemaError, match=r"duration_s: expected a finite number"):
        decode_data(CollectorStatus, data)
    with pytest.raises(SchemaError, match=r"schema version 2"):
        decode_data(Frame, {**json.loads(encode(sample_frame())), "schema": 2})


def test_dashboard_decode_of_a_valid_record_with_control_characters_cleans_it() -> None:
    raw = b'{"state":"error","ok":false,"error":"x\\u001b]0;owned\\u0007","sampled_at":1}'
    assert decode_agent(CollectorStatus, raw) == CollectorStatus(
        state="error", ok=False, error="x\\x1b]0;owned\\x07", sampled_at=1.0)
