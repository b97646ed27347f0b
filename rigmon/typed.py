"""Convert frozen dataclasses to and from plain JSON/TOML data, validating every field.

One codec serves the wire schema and the configuration files, so both report a bad value
the same way: a `TypedDataError` naming the dotted path of the key (`psu.baud: expected int`).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from functools import cache
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T")

JsonValue = Union[str, int, float, bool, None, list["JsonValue"], dict[str, "JsonValue"]]


class TypedDataError(ValueError):
    """Raised when data does not fit the dataclass it is decoded into.

    Attributes:
        path: dotted path of the offending key, e.g. ``"gpus[2].power_w"``.
        reason: what is wrong with it.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path or "<root>"
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def field_types(cls: type) -> dict[str, Any]:
    """Return the resolved type of every dataclass field of ``cls``."""
    hints = _hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


#: Leaf types returned as they are (checked first: most values of a frame are leaves).
_SCALARS = frozenset({str, int, float, bool, type(None)})


@cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    """Field names of a dataclass type, ``None`` for any other type (cached per type)."""
    # dataclasses.fields() builds a new tuple on every call, and is_dataclass() is not free:
    # a frame holds thousands of values and is converted for alarms, journal and API alike.
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


def to_data(obj: Any) -> Any:
    """Turn a dataclass tree into JSON-ready data (dicts, lists, scalars)."""
    tp: type = type(obj)
    if tp in _SCALARS:
        return obj
    names = _field_names(tp)
    if names is not None:
        return {name: to_data(getattr(obj, name)) for name in names}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_data(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_data(v) for k, v in obj.items()}
    return obj


def from_data(cls: type[T], data: Any, path: str = "", *, strict: bool = False) -> T:
    """Build a ``cls`` instance from plain data, checking every field's type.

    Args:
        cls: a dataclass type whose fields are annotated with supported types (scalars,
            ``X | None``, ``tuple[X, ...]``, ``dict[str, X]``, ``Literal``, enums and
            nested dataclasses).
        data: the decoded JSON or TOML value.
        path: prefix for error paths.
        strict: reject keys the dataclass does not know (configuration files); when
            false, unknown keys are ignored (the wire protocol is additive).

    Returns:
        The instance.

    Raises:
        TypedDataError: naming the first key whose value does not fit.
    """
    return typing.cast(T, _convert(cls, data, path, strict))


def _convert(tp: Any, value: Any, path: str, strict: bool) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is Union or origin is types.UnionType:
        args = get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise TypedDataError(path, "missing value (null)")
        errors: list[TypedDataError] = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, path, strict)
            except TypedDataError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise TypedDataError(path, f"expected one of {list(allowed)}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypedDataError(path, f"expected a list, got {type(value).__name__}")
        item_types = get_args(tp)
        if len(item_types) == 2 and item_types[1] is Ellipsis:
            return tuple(_convert(item_types[0], v, f"{path}[{i}]", strict) for i, v in enumerate(value))
        if len(item_types) != len(value):
            raise TypedDataError(path, f"expected {len(item_types)} items, got {len(value)}")
        return tuple(_convert(a, v, f"{path}[{i}]", strict) for i, (a, v) in enumerate(zip(item_types, value)))
    if origin is dict:
        if not isinstance(value, dict):
            raise TypedDataError(path, f"expected a table/object, got {type(value).__name__}")
        _, vt = get_args(tp)
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypedDataError(path, f"key {k!r} is not a string")
            out[k] = _convert(vt, v, f"{path}.{k}" if path else k, strict)
        return out
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _convert_dataclass(tp, value, path, strict)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            values = [m.value for m in tp]
            raise TypedDataError(path, f"expected one of {values}, got {value!r}") from None
    if tp is bool:
        if not isinstance(value, bool):
            raise TypedDataError(path, f"expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypedDataError(path, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypedDataError(path, f"expected a number, got {value!r}")
        if value != value or value in (float("inf"), float("-inf")):
            raise TypedDataError(path, f"expected a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise TypedDataError(path, f"expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported field type {tp!r} at {path}")


def _convert_dataclass(cls: type, value: Any, path: str, strict: bool) -> Any:
    if not isinstance(value, dict):
        raise TypedDataError(path, f"expected a table/object, got {type(value).__name__}")
    types_ = field_types(cls)
    if strict:
        unknown = sorted(set(value) - set(types_))
        if unknown:
            where = f"{path}.{unknown[0]}" if path else unknown[0]
            raise TypedDataError(where, f"unknown key (known: {', '.join(sorted(types_))})")
    kwargs = {}
    for f in dataclasses.fields(cls):
        sub = f"{path}.{f.name}" if path else f.name
        if f.name in value:
            kwargs[f.name] = _convert(types_[f.name], value[f.name], sub, strict)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise TypedDataError(sub, "required key is missing")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise TypedDataError(path, str(exc)) from None
