"""What following an agent yields: `Update`s (connected, frames or summaries, gap, failed), built from items.

The updates are frozen msgspec Structs untracked by the cycle collector (``gc=False``): one is
built for every frame or summary record of every node followed, every second. They cannot be part
of a reference cycle: frozen, they hold only strings, numbers, tuples and frozen wire records
(`rigmon.schema.Record`), all of which existed before them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import msgspec

from rigmon.schema import Frame, Gap, Info
from rigmon.summary import SummaryRecord


class Connected(msgspec.Struct, frozen=True, gc=False):
    """The agent answered /v1/info."""

    info: Info


class Sampled(msgspec.Struct, frozen=True, gc=False):
    """New frames, oldest first (one from the stream, several from a backfill)."""

    frames: tuple[Frame, ...]


class Summarized(msgspec.Struct, frozen=True, gc=False):
    """New summary records (``view="summary"``), oldest first."""

    records: tuple[SummaryRecord, ...]


class GapReported(msgspec.Struct, frozen=True, gc=False):
    """The agent said frames we asked for are gone (it restarted, or its buffer moved on)."""

    gap: Gap


class Failed(msgspec.Struct, frozen=True, gc=False):
    """Getting data failed; the client retries after ``retry_in_s`` seconds."""

    reason: str
    retry_in_s: float


Update = Union[Connected, Sampled, Summarized, GapReported, Failed]
#: What a page or the stream carries: a full frame, or a summary record of one.
Item = Union[Frame, SummaryRecord]


def frame_of(item: Item) -> Frame:
    """The frame ``item`` is, or summarises."""
    return item.frame if isinstance(item, SummaryRecord) else item


def as_updates(items: Sequence[Item]) -> list[Update]:
    """``items`` as updates in their order: runs of frames as `Sampled`, of records as `Summarized`."""
    out: list[Update] = []
    for item in items:
        if isinstance(item, SummaryRecord):
            if out and isinstance(out[-1], Summarized):
                out[-1] = Summarized(out[-1].records + (item,))
            else:
                out.append(Summarized((item,)))
        elif out and isinstance(out[-1], Sampled):
            out[-1] = Sampled(out[-1].frames + (item,))
        else:
            out.append(Sampled((item,)))
    return out
