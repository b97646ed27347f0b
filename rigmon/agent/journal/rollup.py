"""The downsampled tiers kept up to date as frames are written: open buckets in memory, no re-reading.

Until round 4 the writer's maintenance read every frame of a finished minute back from the
journal, decompressed and decoded it, and walked it for its series (`rigmon.series.frame_series`):
~0.6 ms of a large rig's frame, most of the journal thread. Now `Rollup` takes each frame as it
is written: its readings go through a `SeriesShape` (the series of frames of one shape, read by
straight-line code compiled for that shape) into the open minute's rows, and a minute's
min/sum/max/count are computed column by column once the minute is over. The same for the
900 s tier from the minutes. `rigmon.series.frame_series` stays the definition: a frame whose
shape differs from the compiled one (another key, list length or list element) gets a new shape,
and a frame a shape cannot read exactly (two series of one name) is walked by it.

Since round 6 the writer folds the frames it holds, not their JSON decoded back: a shape
compiled from a `rigmon.schema.Readings` reads the records by their attributes, with the names
and values the wire JSON would give (`frame_series` of that JSON: tested on the full rig's
frames and on generated records), and takes the fields annotated as numbers in one
``attrgetter`` each. A frame whose readings are not records, and the catch-up from the journal,
still read JSON data, by the same fold. The frames are still read in one go once their minute
has ended: reading each as it is written, while its records are warm, cost more in the agent
(0.14 against 0.06 ms a frame: the compiled reader runs cold once a second).
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping, Sequence
from operator import attrgetter, itemgetter
from typing import Any

import msgspec

from rigmon.agent.journal.tiers import TIERS_S, floor_to
from rigmon.series import ELEMENT_KEY_FIELDS, Stats, _element_key, add_value, frame_series, merge_stats


class _Miss(Exception):
    """A frame does not have the shape a `SeriesShape` was compiled for."""


#: What reading a frame of another shape raises somewhere in the compiled code.
SHAPE_ERRORS = (_Miss, KeyError, IndexError, TypeError, ValueError)


def _words(items: Sequence[Any]) -> bool:
    return all(item.__class__ is str for item in items)


#: What a leaf compiled as missing (``None``) must not turn into: a record or a list is another shape.
_CONTAINERS = (dict, list, tuple, msgspec.Struct)


def _record_key(item: msgspec.Struct, position: int, key: str | None = None) -> str:
    """`rigmon.series._element_key` of a record's JSON object: its field ``key`` (`ELEMENT_KEY_FIELDS`)
    or else its first field, if a string or an integer."""
    fields = item.__struct_fields__
    if key is not None and key in fields:
        named = getattr(item, key)
        if type(named) is str or type(named) is int:
            return str(named)
    if fields:
        first = getattr(item, fields[0])
        if type(first) is str or type(first) is int:
            return str(first)
    return str(position)


def _annotation_kind(tp: Any) -> str | None:
    """``"text"`` for an annotation whose JSON never holds a series (strings, booleans, words, only
    ``None``), ``"number"`` for one that holds a number or ``None``, else ``None`` (read by value)."""
    options = typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)
    kinds = set()
    for option in options:
        origin = typing.get_origin(option)
        # msgspec.UNSET (a field added later, left out of the JSON of a record built without it) holds no
        # series, as None does not.
        if option is type(None) or option is msgspec.UnsetType:
            continue
        if option is str or option is bool:
            kinds.add("text")
        elif origin is typing.Literal and all(type(v) is str or type(v) is bool for v in typing.get_args(option)):
            kinds.add("text")
        elif option is int or option is float:
            kinds.add("number")
        elif (origin is tuple and len(typing.get_args(option)) == 2 and typing.get_args(option)[1] is Ellipsis
              and _annotation_kind(typing.get_args(option)[0]) == "text"):
            kinds.add("text")
        else:
            return None
    if len(kinds) > 1:
        return None
    return kinds.pop() if kinds else "text"


@functools.cache
def _field_kinds(cls: type[msgspec.Struct]) -> tuple[str | None, ...]:
    """Per field of a record: `_annotation_kind`, and ``"text"`` for the ``*_at`` times (never series)."""
    return tuple("text" if field.name.endswith("_at") else _annotation_kind(field.type)
                 for field in msgspec.structs.fields(cls))


def json_data(readings: Any) -> Any:
    """Readings as their wire JSON decodes (records as dicts, tuples as lists); JSON data as it is."""
    if isinstance(readings, msgspec.Struct):
        return msgspec.json.decode(msgspec.json.encode(readings))
    return readings


#: Shapes a `Rollup` keeps compiled: frames alternate between a few (a GPU's clock reasons
#: listed or not, a reading missing for a sample).
MAX_SHAPES = 4
#: New shapes compiled per minute at most (~7 ms each for a large rig); beyond, frames are walked.
MAX_COMPILES_PER_MINUTE = 3


class SeriesShape:
    """Reads the series of frames whose readings have one shape, by code compiled for it.

    The shape is every dict's exact key set (in any order), every list's length and, for a list
    of records, each element's name (`rigmon.series` names elements by their first field). Of the
    leaves, numbers and ``None`` (a reading that may come back) are read; strings, booleans and
    ``*_at`` keys are not series. `values` raises `_Miss` (or a lookup error) for a frame of
    another shape, so nothing is ever read under a wrong name.

    A shape compiled from a `rigmon.schema.Readings` reads records by their attributes (a
    record's class is its key set), with the names and values its wire JSON would give: the
    writer folds the frames it holds without decoding their JSON back. A shape compiled from
    JSON data reads JSON data; neither reads the other (`_Miss`).

    Args:
        readings: a frame's ``readings`` (JSON data, or the `Readings` record) to compile the shape from.

    Raises:
        ValueError: two series of that frame have the same name (the walk decides which wins), or
            a record or value is not encoded as plain JSON of its fields (the walk reads its JSON).
    """

    def __init__(self, readings: Mapping[str, Any] | msgspec.Struct) -> None:
        self.names: list[str] = []
        #: Per series: whether it was a number when compiled (else ``None``: may be any type later).
        self.numeric: list[bool] = []
        self._env: dict[str, Any] = {"_Miss": _Miss, "_containers": _CONTAINERS, "_seqs": (list, tuple),
                                     "_words": _words}
        self._lines = ["def values(r):"]
        self._count = 0
        self._values: list[str] = []
        if isinstance(readings, msgspec.Struct):
            self._struct("r", readings, "")
        else:
            self._dict("r", readings, "")
        if len(set(self.names)) != len(self.names):
            raise ValueError("two series of one name")
        self._lines.append(f"    return ({', '.join(self._values)}{',' if len(self._values) == 1 else ''})")
        code = compile("\n".join(self._lines), "<rigmon.series shape>", "exec")
        exec(code, self._env)  # noqa: S102 - generated from key counts and variable names only
        self.values = self._env["values"]

    def _var(self) -> str:
        self._count += 1
        return f"v{self._count}"

    def _dict(self, var: str, data: Mapping[str, Any], prefix: str, element: bool = False,
              key: str | None = None) -> None:
        keys = list(data)
        self._lines.append(f"    if {var}.__class__ is not dict or len({var}) != {len(keys)}: raise _Miss")
        if not keys:
            return
        names = [self._var() for _ in keys]
        getter = self._var()
        self._env[f"g_{getter}"] = itemgetter(*keys)
        if len(keys) == 1:
            self._lines.append(f"    {names[0]} = g_{getter}({var})")
        else:
            self._lines.append(f"    {', '.join(names)}, = g_{getter}({var})")
        if element:
            # A list element is named by its first field (`rigmon.series._element_key`) when that
            # is a string or an integer: the same first key, and the same value of the same type.
            first, kind = names[0], type(data[keys[0]])
            self._lines.append(f"    if next(iter({var})) != {keys[0]!r}: raise _Miss")
            if kind is str or kind is int:
                self._lines.append(f"    if {first}.__class__ is not {kind.__name__} or {first} != "
                                   f"{data[keys[0]]!r}: raise _Miss")
            else:
                self._lines.append(f"    if {first}.__class__ is str or {first}.__class__ is int: raise _Miss")
            if key is not None:
                # Named by ``key`` where it holds a string or an integer (`ELEMENT_KEY_FIELDS`): the same
                # value of the same type there, or no such value.
                named = data.get(key)
                self._env[f"k_{first}"] = key
                if type(named) is str or type(named) is int:
                    self._lines.append(f"    if {var}.get(k_{first}).__class__ is not {type(named).__name__} or "
                                       f"{var}.get(k_{first}) != {named!r}: raise _Miss")
                else:
                    self._lines.append(f"    if {var}.get(k_{first}).__class__ in (str, int): raise _Miss")
        for field, name, value in zip(keys, names, data.values()):
            if field.endswith("_at"):
                continue
            self._leaf(name, value, f"{prefix}.{field}" if prefix else str(field))

    def _list(self, var: str, data: Sequence[Any], prefix: str) -> None:
        if all(type(item) is str for item in data):
            # Words (a GPU's clock reasons), or none: no series, however many. An empty list
            # that later holds records or numbers is another shape.
            self._lines.append(f"    if {var}.__class__ not in _seqs or not _words({var}): raise _Miss")
            return
        self._lines.append(f"    if {var}.__class__ not in _seqs or len({var}) != {len(data)}: raise _Miss")
        if not data:
            return
        names = [self._var() for _ in data]
        self._lines.append(f"    {', '.join(names)}, = {var}")
        key = ELEMENT_KEY_FIELDS.get(prefix)
        for position, (name, item) in enumerate(zip(names, data)):
            if isinstance(item, msgspec.Struct):
                self._struct(name, item, f"{prefix}[{_record_key(item, position, key)}]", element=True, key=key)
            elif type(item) is dict:
                self._dict(name, item, f"{prefix}[{_element_key(item, position, key)}]", element=True, key=key)
            else:
                self._leaf(name, item, f"{prefix}[{_element_key(item, position, key)}]")

    def _struct(self, var: str, data: msgspec.Struct, prefix: str, element: bool = False,
                key: str | None = None) -> None:
        """A record read by its attributes, as its wire JSON would be read as a dict.

        The JSON object of a `rigmon.schema.Record` has every field (no defaults left out),
        in field order, under its own name: the class stands for the key set, and a field's
        value is what the decoded JSON holds there (tuples are lists, nothing else changes).
        """
        cls = type(data)
        config = cls.__struct_config__
        fields = cls.__struct_fields__
        if (config.omit_defaults or config.array_like or config.tag is not None
                or cls.__struct_encode_fields__ != fields):
            raise ValueError(f"{cls.__name__} is not encoded as a plain object of its fields")
        kind_var = f"C_{self._var()}"
        self._env[kind_var] = cls
        self._lines.append(f"    if {var}.__class__ is not {kind_var}: raise _Miss")
        values = [getattr(data, field) for field in fields]
        kinds = _field_kinds(cls)
        # Fields that can hold series only; not text by annotation (words, flags, ``*_at``
        # times) nor by value. Numbers by annotation are read in one go, their tuple spliced into
        # the row as it is; the others (records, lists, anything untyped, and the first field of
        # an element: its name) one by one.
        numbers: list[int] = []
        others: list[int] = []
        # The field naming an element other than its first (`ELEMENT_KEY_FIELDS`), read to check it too.
        named = fields.index(key) if element and key is not None and key in fields else None
        for n, (field, value) in enumerate(zip(fields, values)):
            if element and (n == 0 or n == named):
                others.append(n)
            elif kinds[n] == "text" or type(value) is str or type(value) is bool:
                continue
            elif kinds[n] == "number" and (value is None or type(value) is int or type(value) is float):
                numbers.append(n)
            else:
                others.append(n)
        if numbers:
            row = self._var()
            self._env[f"g_{row}"] = attrgetter(*(fields[n] for n in numbers))
            self._lines.append(f"    {row} = g_{row}({var})")
            self._values.append(row if len(numbers) == 1 else f"*{row}")
            for n in numbers:
                self.names.append(f"{prefix}.{fields[n]}" if prefix else fields[n])
                # A number or missing, by annotation: `column_stats` takes the numbers among them.
                self.numeric.append(True)
        if not others:
            return
        names = [self._var() for _ in others]
        getter = self._var()
        self._env[f"g_{getter}"] = attrgetter(*(fields[n] for n in others))
        if len(others) == 1:
            self._lines.append(f"    {names[0]} = g_{getter}({var})")
        else:
            self._lines.append(f"    {', '.join(names)}, = g_{getter}({var})")
        if element:
            first, value = names[0], values[0]
            kind = type(value)
            if kind is str or kind is int:
                self._lines.append(f"    if {first}.__class__ is not {kind.__name__} or {first} != {value!r}: "
                                   "raise _Miss")
            else:
                self._lines.append(f"    if {first}.__class__ is str or {first}.__class__ is int: raise _Miss")
            if named is not None:
                var_named, value = names[others.index(named)], values[named]
                if type(value) is str or type(value) is int:
                    self._lines.append(f"    if {var_named}.__class__ is not {type(value).__name__} or "
                                       f"{var_named} != {value!r}: raise _Miss")
                else:
                    self._lines.append(f"    if {var_named}.__class__ is str or {var_named}.__class__ is int: "
                                       "raise _Miss")
        for n, name in zip(others, names):
            field, value = fields[n], values[n]
            if kinds[n] == "text" or type(value) is str or type(value) is bool:
                continue
            full = f"{prefix}.{field}" if prefix else field
            if kinds[n] == "number" and (value is None or type(value) is int or type(value) is float):
                self.names.append(full)
                self.numeric.append(True)
                self._values.append(name)
            else:
                self._leaf(name, value, full)

    def _leaf(self, var: str, value: Any, name: str) -> None:
        kind = type(value)
        if kind is str or kind is bool:
            return
        if kind is dict:
            self._dict(var, value, name)
        elif kind is list or kind is tuple:
            self._list(var, value, name)
        elif isinstance(value, msgspec.Struct):
            self._struct(var, value, name)
        elif kind is int or kind is float:
            self.names.append(name)
            self.numeric.append(True)
            self._values.append(var)
        elif value is None:
            # Missing now; a number later is a series, a record later is another shape.
            self._lines.append(f"    if isinstance({var}, _containers): raise _Miss")
            self.names.append(name)
            self.numeric.append(False)
            self._values.append(var)
        else:
            # Not a JSON type (an enum, a date): its JSON may be a number or not; the walk decides.
            raise ValueError(f"{name}: a value of type {kind.__name__}")


def column_stats(shape: SeriesShape, rows: Sequence[tuple[Any, ...]], into: dict[str, Stats]) -> None:
    """Fold ``rows`` (``shape.values`` of frames, oldest first) into ``into`` as `add_value` would.

    A column of numbers (``None`` left out) is folded by ``min``/``sum``/``max`` at C speed; one
    holding anything else (or a non-finite number) value by value, as `add_value` takes them.
    """
    if not rows:
        return
    get = into.get
    for name, numeric, column in zip(shape.names, shape.numeric, zip(*rows)):
        if numeric:
            total: Any
            try:
                total = sum(column)
            except TypeError:
                # Missing in some frames (or not all numbers): the numbers among them.
                column = tuple([value for value in column if value is not None])
                if not column:
                    continue
                try:
                    total = sum(column)
                except TypeError:
                    total = None
            if total is not None and total - total == 0:  # every value finite
                lo, hi = float(min(column)), float(max(column))
                mine = get(name)
                if mine is None:
                    into[name] = [lo, float(total), hi, float(len(column))]
                else:
                    if lo < mine[0]:
                        mine[0] = lo
                    if hi > mine[2]:
                        mine[2] = hi
                    mine[1] += float(total)
                    mine[3] += len(column)
                continue
        elif column.count(None) == len(column):
            continue
        for value in column:
            kind = value.__class__
            if (kind is float or kind is int) and value - value == 0:
                add_value(into, name, float(value))


class _OpenBucket(msgspec.Struct):
    """A bucket being filled: statistics so far, and rows of compiled shapes not yet folded in."""

    start: float
    stats: dict[str, Stats] = msgspec.field(default_factory=dict)
    rows: list[tuple[SeriesShape, list[tuple[Any, ...]]]] = msgspec.field(default_factory=list)
    #: Frames (60 s tier) or finer buckets (900 s tier) in it.
    count: int = 0

    def close(self) -> dict[str, Stats]:
        for shape, rows in self.rows:
            column_stats(shape, rows, self.stats)
        self.rows.clear()
        return self.stats


class Rollup:
    """The tiers' open buckets, fed frame by frame; finished buckets are handed back to be stored.

    Start it where the stored tiers end (`JournalStore` seeds it once its catch-up from the
    journal has nothing left to do): the 60 s bucket of the newest frame with what the journal
    already holds of it, and the 900 s bucket around it with the stored minutes before it.

    Args:
        minute: start of the open 60 s bucket, ``None`` before the first frame.
        minute_stats: what the journal holds of that bucket, and how many frames.
        quarter_stats: the stored minutes of the open 900 s bucket, and how many.
    """

    def __init__(self, minute: float | None, minute_stats: tuple[dict[str, Stats], int] = ({}, 0),
                 quarter_stats: tuple[dict[str, Stats], int] = ({}, 0)) -> None:
        step0, step1 = TIERS_S
        self._minute = None if minute is None else _OpenBucket(minute, minute_stats[0], count=minute_stats[1])
        self._quarter = None if minute is None else _OpenBucket(floor_to(minute, step1), quarter_stats[0],
                                                                count=quarter_stats[1])
        self._shapes: list[SeriesShape] = []
        self._compiles = 0
        self._step0 = step0
        self._step1 = step1

    def prepare(self, readings: Any) -> None:
        """Compile the shape of ``readings`` (the newest frame's: a `Readings`, or JSON data) now, before frames of it
        are added."""
        try:
            self._shapes.insert(0, SeriesShape(readings))
        except (ValueError, RecursionError):
            return
        del self._shapes[MAX_SHAPES:]

    @property
    def minute_start(self) -> float | None:
        """Start of the open 60 s bucket (the 60 s tier's watermark)."""
        return None if self._minute is None else self._minute.start

    def add(self, taken_at: float, readings: Any) -> list[tuple[int, float, dict[str, Stats]]]:
        """Take one frame; return the buckets it finished: ``(step_s, start, stats)``.

        ``readings`` is the frame's `rigmon.schema.Readings` (the writer holds it: read by its
        attributes) or, the same, its JSON data (a frame read back from the journal).

        A frame older than the open minute (the clock was set back) is not added: its minute is
        stored already, as it was when maintenance computed the tiers.
        """
        start = floor_to(taken_at, self._step0)
        done: list[tuple[int, float, dict[str, Stats]]] = []
        minute = self._minute
        if minute is None:
            minute = self._minute = _OpenBucket(start)
            self._quarter = _OpenBucket(floor_to(start, self._step1))
        elif start < minute.start:
            return done
        elif start > minute.start:
            done = self._finish(minute, start)
            minute = self._minute = _OpenBucket(start)
            self._compiles = 0
        minute.count += 1
        self._fold(minute, readings)
        return done

    def _fold(self, minute: _OpenBucket, readings: Any) -> None:
        shapes = self._shapes
        shape: SeriesShape | None = None
        for n, known in enumerate(shapes):
            try:
                row = known.values(readings)
            except SHAPE_ERRORS:
                continue
            shape = known
            if n:
                shapes.insert(0, shapes.pop(n))
            break
        if shape is None:
            try:
                if self._compiles >= MAX_COMPILES_PER_MINUTE:
                    raise ValueError("shapes change too often")
                self._compiles += 1
                shape = SeriesShape(readings)
            except (ValueError, RecursionError):
                for name, value in frame_series({"readings": json_data(readings)}).items():
                    add_value(minute.stats, name, value)
                return
            shapes.insert(0, shape)
            del shapes[MAX_SHAPES:]
            row = shape.values(readings)
        if not minute.rows or minute.rows[-1][0] is not shape:
            minute.rows.append((shape, []))
        minute.rows[-1][1].append(row)

    def _finish(self, minute: _OpenBucket, next_start: float) -> list[tuple[int, float, dict[str, Stats]]]:
        """Store ``minute``; finish the 900 s bucket when ``next_start`` is past it."""
        done: list[tuple[int, float, dict[str, Stats]]] = []
        stats = minute.close()
        if minute.count:
            done.append((self._step0, minute.start, stats))
        quarter = self._quarter
        if quarter is None or floor_to(minute.start, self._step1) != quarter.start:
            quarter = self._quarter = _OpenBucket(floor_to(minute.start, self._step1))
        if minute.count:
            merge_stats(quarter.stats, stats)
            quarter.count += 1
        next_quarter = floor_to(next_start, self._step1)
        if next_quarter > quarter.start:
            if quarter.count:
                done.append((self._step1, quarter.start, quarter.stats))
            self._quarter = _OpenBucket(next_quarter)
        return done

