"""The dataclass codec shared by the wire schema and configuration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from rigmon.typed import TypedDataError, from_data, to_data


@dataclass(frozen=True)
class Inner:
    volts: float
    label: str | None = None


@dataclass(frozen=True)
class Outer:
    name: str
    mode: Literal["a", "b"]
    items: tuple[Inner, ...] = ()
    table: dict[str, int] = field(default_factory=dict)
    flag: bool = False


def test_round_trip() -> None:
    obj = Outer("x", "b", (Inner(11.384), Inner(12.0, "psu")), {"k": 3}, True)
    assert from_data(Outer, to_data(obj)) == obj


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"name": 1, "mode": "a"}, "name"),
        ({"name": "x", "mode": "c"}, "mode"),
        ({"name": "x", "mode": "a", "items": [{"volts": "12"}]}, "items[0].volts"),
        ({"name": "x", "mode": "a", "items": [{}]}, "items[0].volts"),
        ({"name": "x", "mode": "a", "table": {"k": 1.5}}, "table.k"),
        ({"name": "x", "mode": "a", "flag": 1}, "flag"),
        ({"mode": "a"}, "name"),
        ({"name": "x", "mode": "a", "items": [{"volts": float("nan")}]}, "items[0].volts"),
    ],
)
def test_errors_name_the_path(data: dict[str, object], path: str) -> None:
    with pytest.raises(TypedDataError) as info:
        from_data(Outer, data)
    assert info.value.path == path


def test_unknown_keys_ignored_unless_strict() -> None:
    data = {"name": "x", "mode": "a", "future_field": 1}
    assert from_data(Outer, data).name == "x"
    with pytest.raises(TypedDataError) as info:
        from_data(Outer, data, strict=True)
    assert info.value.path == "future_field"


def test_int_is_accepted_as_float_but_not_bool() -> None:
    assert from_data(Inner, {"volts": 12}).volts == 12.0
    with pytest.raises(TypedDataError):
        from_data(Inner, {"volts": True})


def test_to_data_converts_enums_subclasses_and_leaves_classes_alone() -> None:
    import enum

    class Colour(enum.StrEnum):
        RED = "red"

    class Count(int):
        pass

    @dataclass(frozen=True)
    class Holder:
        colour: Colour
        counts: tuple[int, ...]
        kind: object

    data = to_data(Holder(colour=Colour.RED, counts=(Count(3), 4), kind=Holder))
    assert data == {"colour": "red", "counts": [3, 4], "kind": Holder}
    assert type(data["colour"]) is str


@dataclass(frozen=True)
class Choices:
    value: str | int | tuple[int, ...] | dict[str, tuple[int, ...]] = ""


@pytest.mark.parametrize(
    ("value", "says"),
    [
        # The one choice of the value's shape says which item is wrong.
        ({"xid": 79}, "value.xid: expected a list, got 79"),
        ([1, "x"], "value[1]: expected an integer, got 'x'"),
        # No choice of that shape: every shape that fits, not only the first choice's "expected a string".
        (1.5, "value: expected a string, an integer, a list or a table, got 1.5"),
        # As a TOML or JSON file writes it, not as Python does.
        (True, "value: expected a string, an integer, a list or a table, got true"),
        ([1, None], "value[1]: expected an integer, got null"),
        ({"xid": [False]}, "value.xid[0]: expected an integer, got false"),
    ],
)
def test_a_union_names_the_choice_of_the_value_shape_or_all_of_them(value: object, says: str) -> None:
    with pytest.raises(TypedDataError) as info:
        from_data(Choices, {"value": value})
    assert str(info.value) == says
