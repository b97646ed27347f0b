"""Convert records (frozen dataclasses, msgspec Structs) to and from plain JSON/TOML data, validating every field.

Used for the configuration files (TOML, ``strict``), the agent's own state files (alarm
state, guard state) and plain-data views (`to_data`: snapshot bundles, notifications).
The wire no longer goes through it: `rigmon.schema.encode`/`decode` use msgspec, compiled.
Only when msgspec refuses wire input is that input checked here again, so that the
`SchemaError` words it as the configuration does: a `TypedDataError` naming the dotted path
of the key, dict keys included (`collectors.host.state: expected one of ...`).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing

import msgspec
from collections.abc import Callable
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


class RecordField:
    """One field of a record type: its name, resolved type, and whether it has no default."""

    # A plain class: a NamedTuple costs a third of a millisecond to create at import.
    __slots__ = ("name", "type", "required")

    def __init__(self, name: str, type_: Any, required: bool) -> None:
        self.name = name
        self.type = type_
        self.required = required


@cache
def record_field_names(cls: Any) -> tuple[str, ...] | None:
    """The field names of a record type in order, ``None`` for any other type (cached per type).

    Wire records (`rigmon.schema`), the configuration and the agent's state files are
    `msgspec.Struct` classes; other records (the dashboard's, the TUI's) are frozen dataclasses.
    Both are records here, and nothing else should ask
    ``dataclasses`` or ``msgspec`` about a type's fields. Annotations are not resolved.
    """
    if not isinstance(cls, type):
        return None
    names = getattr(cls, "__struct_fields__", None)
    if names is not None:
        return typing.cast(tuple[str, ...], names)
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    return None


@cache
def record_fields(cls: Any) -> tuple[RecordField, ...] | None:
    """The fields of a record type (see `record_field_names`) with their resolved types."""
    if record_field_names(cls) is None:
        return None
    hints = get_type_hints(cls)
    if hasattr(cls, "__struct_fields__"):
        import msgspec  # loaded already: a Struct class exists

        return tuple(RecordField(f.name, hints[f.name], f.required) for f in msgspec.structs.fields(cls))
    return tuple(
        RecordField(f.name, hints[f.name], f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        for f in dataclasses.fields(cls)
    )


def field_types(cls: type) -> dict[str, Any]:
    """Return the resolved type of every field of the record type ``cls``."""
    return {f.name: f.type for f in record_fields(cls) or ()}


#: Leaf types returned as they are (checked first: most values of a frame are leaves).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def to_data(obj: Any) -> Any:
    """Turn a tree of records into JSON-ready data (dicts, lists, scalars)."""
    tp: type = type(obj)
    if tp in _SCALARS:
        return obj
    names = record_field_names(tp)
    if names is not None:
        # An UNSET field (added later: `msgspec.UNSET` in a record built without it) is left out, as the wire
        # encoding leaves it out.
        return {name: to_data(value) for name in names if (value := getattr(obj, name)) is not msgspec.UNSET}
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
        cls: a record type (dataclass or wire record) whose fields are annotated with
            supported types (scalars, ``X | None``, ``tuple[X, ...]``, ``dict[str, X]``,
            ``Literal``, enums and nested records).
        data: the decoded JSON or TOML value.
        path: prefix for error paths.
        strict: reject keys the record type does not know (configuration files); when
            false, unknown keys are ignored (the wire protocol is additive).

    Returns:
        The instance.

    Raises:
        TypedDataError: naming the first key whose value does not fit.
    """
    try:
        return typing.cast(T, _converter(typing.cast(Any, cls))(data, strict))
    except _Misfit as exc:
        raise TypedDataError(_join_path(path, exc.parts), exc.reason) from None


# Decoding compiles, once per type, a converter function that validates and builds a value
# of that type: a dashboard following 64 nodes decodes thousands of frames a minute, and
# asking typing about every field of every frame cost more than the rest of its work.

Converter = Callable[[Any, bool], Any]


class _Misfit(Exception):
    """A value does not fit; ``parts`` collects the path on the way out (innermost first)."""

    def __init__(self, reason: str, part: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.parts: list[str] = [] if part is None else [part]


def _join_path(prefix: str, parts: list[str]) -> str:
    path = prefix
    for part in reversed(parts):
        if part.startswith("["):
            path += part
        else:
            path = f"{path}.{part}" if path else part
    return path


@cache
def _converter(tp: Any) -> Converter:
    """The converter for a type annotation (cached per type)."""
    if tp is Any:
        return lambda value, strict: value
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return _union_converter(get_args(tp))
    if origin is Literal:
        return _literal_converter(get_args(tp))
    if origin is tuple:
        return _tuple_converter(get_args(tp))
    if origin is dict:
        return _dict_converter(_converter(get_args(tp)[1]))
    if record_fields(tp) is not None:
        return _record_converter(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_converter(tp)
    scalar = _SCALAR_CONVERTERS.get(tp)
    if scalar is None:
        raise TypeError(f"unsupported field type {tp!r}")
    return scalar


def _union_converter(args: tuple[Any, ...]) -> Converter:
    optional = type(None) in args
    members = [a for a in args if a is not type(None)]
    choices = [_converter(a) for a in members]
    shapes = [_shape(a) for a in members]
    expected = _either([_describe(a) for a in members])

    def convert(value: Any, strict: bool) -> Any:
        if value is None:
            if optional:
                return None
            raise _Misfit("missing value (null)")
        for choice in choices:
            try:
                return choice(value, strict)
            except _Misfit:
                pass
        # Blame the one choice of the value's shape (a table given for `dict[str, tuple[int, ...]]`
        # says which item is wrong); otherwise say every shape that fits, never only the first
        # choice's ("expected a string" for a table where a table of lists was meant).
        fitting = [c for c, shape in zip(choices, shapes) if shape == _value_shape(value)]
        if len(fitting) == 1:
            fitting[0](value, strict)  # raises its own, precise _Misfit
        raise _Misfit(f"expected {expected}, got {as_written(value)}")

    return convert


def as_written(value: Any) -> str:
    """A value that does not fit, for the error: as written in TOML/JSON (``79``, ``[79]``, ``true``, not
    Python's ``True``), cut to stay one short line."""
    text = _written(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _written(value: Any) -> str:
    """``value`` as a TOML/JSON file writes it: booleans ``true``/``false``, no value ``null``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_written(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_written(k)}: {_written(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _shape(tp: Any) -> str:
    """What a value of type annotation ``tp`` looks like in TOML/JSON: ``table``, ``list`` or ``scalar``."""
    origin = get_origin(tp)
    if origin is dict or record_fields(tp) is not None:
        return "table"
    if origin is tuple:
        return "list"
    return "scalar"


def _value_shape(value: Any) -> str:
    if isinstance(value, dict):
        return "table"
    if isinstance(value, (list, tuple)):
        return "list"
    return "scalar"


def _describe(tp: Any) -> str:
    """A value of type annotation ``tp`` in words (``a list``), for a union's error."""
    origin = get_origin(tp)
    if origin is Literal:
        return f"one of {list(get_args(tp))}"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return f"one of {[m.value for m in tp]}"
    if origin is Union or origin is types.UnionType:
        return _either([_describe(a) for a in get_args(tp) if a is not type(None)])
    shape = _shape(tp)
    if shape == "table":
        return "a table"
    if shape == "list":
        return "a list"
    return {str: "a string", int: "an integer", float: "a number", bool: "true/false"}.get(tp, repr(tp))


def _either(words: list[str]) -> str:
    """``a, b or c`` (each once, in order)."""
    words = list(dict.fromkeys(words))
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _literal_converter(allowed: tuple[Any, ...]) -> Converter:
    def convert(value: Any, strict: bool) -> Any:
        if value not in allowed:
            raise _Misfit(f"expected one of {list(allowed)}, got {as_written(value)}")
        return value

    return convert


def _tuple_converter(item_types: tuple[Any, ...]) -> Converter:
    if len(item_types) == 2 and item_types[1] is Ellipsis:
        item = _converter(item_types[0])

        def convert_any(value: Any, strict: bool) -> Any:
            if not isinstance(value, (list, tuple)):
                raise _Misfit(f"expected a list, got {as_written(value)}")
            out = []
            for i, v in enumerate(value):
                try:
                    out.append(item(v, strict))
                except _Misfit as exc:
                    exc.parts.append(f"[{i}]")
                    raise
            return tuple(out)

        return convert_any
    items = [_converter(t) for t in item_types]

    def convert_fixed(value: Any, strict: bool) -> Any:
        if not isinstance(value, (list, tuple)):
            raise _Misfit(f"expected a list, got {as_written(value)}")
        if len(items) != len(value):
            raise _Misfit(f"expected {len(items)} items, got {len(value)}")
        out = []
        for i, (conv, v) in enumerate(zip(items, value)):
            try:
                out.append(conv(v, strict))
            except _Misfit as exc:
                exc.parts.append(f"[{i}]")
                raise
        return tuple(out)

    return convert_fixed


def _dict_converter(item: Converter) -> Converter:
    def convert(value: Any, strict: bool) -> Any:
        if not isinstance(value, dict):
            raise _Misfit(f"expected a table/object, got {as_written(value)}")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _Misfit(f"key {k!r} is not a string")
            try:
                out[k] = item(v, strict)
            except _Misfit as exc:
                exc.parts.append(k)
                raise
        return out

    return convert


def _record_converter(cls: type) -> Converter:
    types_ = field_types(cls)
    known = frozenset(types_)
    known_text = ", ".join(sorted(types_))
    fields = [(f.name, f.required) for f in record_fields(cls) or ()]
    # Converters of the fields are looked up on first use: a record type may refer to itself.
    convs: dict[str, Converter] = {}

    def convert(value: Any, strict: bool) -> Any:
        if not isinstance(value, dict):
            raise _Misfit(f"expected a table/object, got {as_written(value)}")
        if strict:
            unknown = sorted(set(value) - known)
            if unknown:
                raise _Misfit(f"unknown key (known: {known_text})", unknown[0])
        kwargs = {}
        for name, required in fields:
            if name in value:
                conv = convs.get(name)
                if conv is None:
                    conv = convs[name] = _converter(types_[name])
                try:
                    kwargs[name] = conv(value[name], strict)
                except _Misfit as exc:
                    exc.parts.append(name)
                    raise
            elif required:
                raise _Misfit("required key is missing", name)
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise _Misfit(str(exc)) from None

    return convert


def _enum_converter(tp: type[enum.Enum]) -> Converter:
    def convert(value: Any, strict: bool) -> Any:
        try:
            return tp(value)
        except ValueError:
            values = [m.value for m in tp]
            raise _Misfit(f"expected one of {values}, got {as_written(value)}") from None

    return convert


def _bool(value: Any, strict: bool) -> Any:
    if not isinstance(value, bool):
        raise _Misfit(f"expected true/false, got {as_written(value)}")
    return value


def _int(value: Any, strict: bool) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Misfit(f"expected an integer, got {as_written(value)}")
    return value


def _float(value: Any, strict: bool) -> Any:
    if type(value) is float:
        if value != value or value in (_INF, -_INF):
            raise _Misfit(f"expected a finite number, got {as_written(value)}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Misfit(f"expected a number, got {as_written(value)}")
    return float(value)


def _str(value: Any, strict: bool) -> Any:
    if not isinstance(value, str):
        raise _Misfit(f"expected a string, got {as_written(value)}")
    return value


_INF = float("inf")
_SCALAR_CONVERTERS: dict[Any, Converter] = {bool: _bool, int: _int, float: _float, str: _str}
