"""What following an agent yields: `Update`s (connected, frames or summaries, gap, failed), built from items."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from rigmon.schema import Frame, Gap, Info
from rigmon.summary import SummaryRecord


@dataclass(frozen=True, slots=True)
class Connected:
    """The agent answered /v1/info."""

    info: Info


@dataclass(frozen=True, slots=True)
class Sampled:
    """New frames, oldest first (one from the stream, several from a backfill)."""

    frames: tuple[Frame, ...]


@dataclass(frozen=True, slots=True)
class Summarized:
    """New summary records (``view="summary"``), oldest first."""

    records: tuple[SummaryRecord, ...]


@dataclass(frozen=True, slots=True)
class GapReported:
    """The agent said frames we asked for are gone (it restarted, or its buffer moved on)."""

    gap: Gap


@dataclass(frozen=True, slots=True)
class Failed:
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
