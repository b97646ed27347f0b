"""The shape of a history chart, without UI: its lines, threshold lines and the chart itself (what
`rigmon.cluster.chart` offers and draws), and how its series are found among a frame's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Stat = Literal["min", "mean", "max"]
#: How a threshold line is drawn: in the warning or error colour, or as a limit (plain).
ThresholdLevel = Literal["warn", "bad", "limit"]


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a chart: series ``series``, the statistic of each point it draws."""

    label: str
    series: str
    stat: Stat


@dataclass(frozen=True, slots=True)
class Threshold:
    """A horizontal line: an alarm threshold or a limit, in the chart's unit."""

    label: str
    value: float
    level: ThresholdLevel


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart of the history view.

    Attributes:
        key: short name (``rail``, ``gpu_power``...).
        title: what it shows, with its unit.
        unit: the unit of its values after ``divide``.
        lines: what it draws, the first being the one whose extreme matters.
        thresholds: horizontal lines.
        floor: the y axis reaches at least down to this (``None``: the data's minimum).
        ceiling: and at least up to this.
        divide: raw series values are divided by this (bytes/s to MB/s).
    """

    key: str
    title: str
    unit: str
    lines: tuple[Line, ...]
    thresholds: tuple[Threshold, ...] = ()
    floor: float | None = None
    ceiling: float | None = None
    divide: float = 1.0

    @property
    def series(self) -> tuple[str, ...]:
        """Series names to ask ``/v1/history`` for."""
        return tuple(dict.fromkeys(line.series for line in self.lines))


def indexes(names: Iterable[str], prefix: str, suffix: str) -> list[str]:
    """The ``X`` of every ``prefix[X]suffix`` in ``names``, in order of first appearance."""
    out: list[str] = []
    for name in names:
        if name.startswith(prefix) and name.endswith(suffix):
            inner = name[len(prefix):len(name) - len(suffix)]
            if inner.endswith("]") and "[" not in inner[:-1] and inner[:-1] not in out:
                out.append(inner[:-1])
    return out
