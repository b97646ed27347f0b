"""`Record`: the base of every wire record of `rigmon.schema` (a frozen `msgspec.Struct`)."""

from __future__ import annotations

import msgspec


class Record(msgspec.Struct, frozen=True, gc=False):
    """A frozen wire record: fields, order, defaults and JSON keys as annotated in the subclass.

    msgspec encodes and decodes these without a converter, and builds one without an
    ``object.__setattr__`` per field (a frozen slots dataclass needs one): a frame holds
    hundreds of records and the agent builds one every second. Change a copy with
    `msgspec.structs.replace`; ``dataclasses.replace``/``fields``/``asdict`` do not apply
    (`rigmon.typed.record_fields` reads the fields of records and dataclasses alike). Subclasses
    say ``frozen=True`` again (``class X(Record, frozen=True)``) so that mypy sees it.

    ``gc=False``: records are not tracked by the cycle collector (cheaper to build, and the
    collector does not walk every frame in the ring buffer: a full collection with 3600 frames
    held took 70-95 ms as dataclasses, 1.2 ms untracked; benchmarks/results-structs.md). That is safe because a record
    cannot be part of a reference cycle: it is frozen, so it can only refer to objects that
    existed before it (strings, numbers, tuples, other records), and the only mutable values
    it holds are dicts of plain data (``Event.data``, ``Alarm.labels``, ``NodeCapture.config``,
    the ``dict[str, Record]`` fields) that nothing writes a record back into. (A cycle through
    such a dict would never be collected: do not store a record in a dict that it holds.)
    """
