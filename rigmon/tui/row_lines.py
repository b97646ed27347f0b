"""RowLines: the segments of a cluster-screen row drawn directly, without a Rich ``Table`` per row.

The cluster screen draws about 30 rows a second with 64 nodes; a Rich ``Table`` of two rows
and five ``Sparkline``s cost about 4 ms of CPU each time. These functions give the same
segments (same characters, same styles; the SVG snapshots check it) for the case where every
column gets its full width: cells truncated with an ellipsis and padded in their own style,
one unstyled space between neighbours, and sparkline bars as Textual's ``Sparkline`` draws
them at a height of one line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import pairwise
from typing import Literal

from rich.cells import cell_len, set_cell_size
from rich.color import Color
from rich.color_triplet import ColorTriplet
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from rigmon.tui.gauge import Gauge, worst_per_bar

#: Bars of a sparkline, lowest first (as `textual.renderables.sparkline.Sparkline.BARS`).
BARS = "▁▂▃▄▅▆▇█"
#: Between two cells (a ``Table.grid(padding=(0, 1))`` with collapsed padding).
GAP = Segment(" ", Style())

Justify = Literal["left", "right"]


def cell(text: str, style: Style | None, width: int, justify: Justify = "left") -> Segment:
    """``text`` cut to ``width`` cells with an ellipsis and padded to it in its own ``style``
    (a table cell with ``no_wrap`` and ``overflow="ellipsis"``)."""
    size = cell_len(text)
    if size > width:
        text = set_cell_size(text, width - 1) + "…" if width > 0 else ""
        size = cell_len(text)
    pad = " " * (width - size)
    return Segment(text + pad if justify == "left" else pad + text, style)


def text_cell(text: Text, width: int) -> list[Segment]:
    """A ``Text`` of one base style and spans (a node's state and its guard mark) as the table draws it:
    cut to ``width`` cells with an ellipsis (in the style of what it ends in), padded in the base style,
    each part in the base style plus its spans'."""
    text = text.copy()
    text.truncate(width, overflow="ellipsis", pad=True)
    base = text.style if isinstance(text.style, Style) else Style()
    plain = text.plain
    cuts = sorted({0, len(plain), *(min(len(plain), p) for span in text.spans for p in (span.start, span.end))})
    out: list[Segment] = []
    for start, end in pairwise(cuts):
        style = base
        for span in text.spans:
            if span.start <= start and end <= span.end and isinstance(span.style, Style):
                style = style + span.style
        out.append(Segment(plain[start:end], style))
    return out


@lru_cache(maxsize=4096)
def _bar_style(red: int, green: int, blue: int) -> Style:
    return Style.from_color(Color.from_triplet(ColorTriplet(red, green, blue)))


def sparkline(data: Sequence[float], width: int, low: Color, high: Color, extreme: Literal["min", "max"],
              gauge: Gauge | None = None, warn: Color | None = None, bad: Color | None = None) -> list[Segment]:
    """One line of ``width`` bars over ``data`` (at least ``width`` values, at least two), each
    bar the ``extreme`` of its share of the values.

    Without a ``gauge`` the bars span the data's own minimum to maximum and are coloured from
    ``low`` to ``high`` by height: what ``Sparkline(data, width=width, min_color=low,
    max_color=high, summary_function=min or max)`` draws. With one, they are drawn on the
    gauge's scale, and a bar beyond its thresholds takes the ``warn`` or ``bad`` colour.
    """
    if gauge is not None:
        return _gauged(data, width, low, high, extreme, gauge, warn, bad)
    pick = min if extreme == "min" else max
    minimum, maximum = min(data), max(data)
    extent = maximum - minimum or 1
    size = len(data)
    top = len(BARS) - 1
    blend = low.triplet is not None and high.triplet is not None
    if blend:
        assert low.triplet is not None and high.triplet is not None
        r1, g1, b1 = low.triplet
        r2, g2, b2 = high.triplet
    else:
        # Textual's blend falls back to the second colour when either is not RGB.
        fixed = Style.from_color(high)
    # Bars of one colour are one segment (the screen shows the same; fewer segments to style).
    out: list[Segment] = []
    run: list[str] = []
    run_style: Style | None = None
    for index in range(width):
        # int(Fraction(size, width) * index) for whole numbers.
        ratio = (pick(data[size * index // width:size * (index + 1) // width]) - minimum) / extent
        if blend:
            style = _bar_style(int(r1 + (r2 - r1) * ratio), int(g1 + (g2 - g1) * ratio), int(b1 + (b2 - b1) * ratio))
        else:
            style = fixed
        if style is not run_style and run:
            out.append(Segment("".join(run), run_style))
            run.clear()
        run_style = style
        run.append(BARS[int(ratio * top) % len(BARS)])
    if run:
        out.append(Segment("".join(run), run_style))
    return out


def _colour_style(color: Color | None) -> Style | None:
    if color is None:
        return None
    if color.triplet is not None:
        return _bar_style(*color.triplet)
    return Style.from_color(color)


def _gauged(data: Sequence[float], width: int, low: Color, high: Color, extreme: Literal["min", "max"],
            gauge: Gauge, warn: Color | None, bad: Color | None) -> list[Segment]:
    """`sparkline` on a gauge's scale: worst value per bar, threshold colours."""
    values = worst_per_bar(data, width, extreme)
    heights = gauge.heights(values)
    top = len(BARS) - 1
    blend = low.triplet is not None and high.triplet is not None
    fixed = Style.from_color(high)
    by_level = {"warn": _colour_style(warn), "bad": _colour_style(bad)}
    out: list[Segment] = []
    run: list[str] = []
    run_style: Style | None = None
    for value, height in zip(values, heights):
        style = by_level.get(gauge.level(value))
        if style is None:
            if blend:
                assert low.triplet is not None and high.triplet is not None
                ratio = height / top
                r1, g1, b1 = low.triplet
                r2, g2, b2 = high.triplet
                style = _bar_style(int(r1 + (r2 - r1) * ratio), int(g1 + (g2 - g1) * ratio),
                                   int(b1 + (b2 - b1) * ratio))
            else:
                style = fixed
        if style is not run_style and run:
            out.append(Segment("".join(run), run_style))
            run.clear()
        run_style = style
        run.append(" " if math.isnan(value) else BARS[height])
    if run:
        out.append(Segment("".join(run), run_style))
    return out


class Bars:
    """Segments of one line (a `sparkline`) as a renderable ``width`` cells wide, for tables."""

    def __init__(self, segments: Sequence[Segment]) -> None:
        self.segments = list(segments)
        self.width = sum(cell_len(s.text) for s in self.segments)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.segments

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(self.width, self.width)


class RowLines:
    """Lines of segments, then optionally one more renderable on the line after them."""

    def __init__(self, lines: Iterable[Sequence[Segment]], tail: RenderableType | None = None) -> None:
        self.lines = list(lines)
        self.tail = tail

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for number, line in enumerate(self.lines):
            if number:
                yield Segment.line()
            yield from line
        if self.tail is not None:
            yield Segment.line()
            yield self.tail
