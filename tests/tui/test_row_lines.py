"""The cluster row drawn directly (`rigmon.tui.row_lines`) gives what the Rich table gave."""

from __future__ import annotations

import io
import math
import random
from pathlib import Path

import msgspec
import pytest
from rich.color import Color
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.renderables.sparkline import Sparkline

import rigmon.tui
from rigmon.cluster.node_view import NodeView
from rigmon.summary import NodeSummary, PathCell, PathFigures
from rigmon.tui import gauge, row_lines
from rigmon.tui.row_columns import COLUMNS, column_widths, columns_for
from rigmon.tui.widgets.node_row import NodeRow


class RowApp(App[None]):
    CSS_PATH = str(Path(rigmon.tui.__file__).parent / "rigmon.tcss")

    def compose(self) -> ComposeResult:
        yield NodeRow()


def trend(rng: random.Random, count: int) -> tuple[float, ...]:
    return tuple(round(rng.uniform(0, 100), 1) for _ in range(count))


def views() -> list[NodeView]:
    rng = random.Random(7)
    full = NodeSummary(node="node01", seq=5, taken_at=1.0, cpu_pct=43.2, net_bytes_per_s=1.2e9, rail_min_volts=11.6,
                       gpu_power_w=2345.0, gpus_present=7, gpus_expected=8, links_healthy=2, links_total=2,
                       storage_bytes_per_s=3.4e8, arrays_degraded=1, arrays_total=2, alarms=3)
    silent = PathCell("node03/tbnet", "node03", "tbnet", "silent", None, 100.0, 40.0, 12.0)
    slow = PathCell("node02/roce", "node02", "roce", "degraded", 1234.0, 0.0, 100.0)
    probing = NodeSummary(node="node08", seq=3, taken_at=1.0, paths=PathFigures(silent, (slow, silent), 1, 1),
                          path_worst=silent)
    degraded = NodeSummary(node="node09", seq=3, taken_at=1.0, paths=PathFigures(slow, (slow,), 0, 1),
                           path_worst=slow)
    trends = {name: trend(rng, 60) for name in ("rail_min_volts", "gpu_power_w", "cpu_pct", "net_bytes_per_s",
                                                "storage_bytes_per_s")}
    short = {name: trend(rng, n) for name, n in (("rail_min_volts", 2), ("gpu_power_w", 7), ("cpu_pct", 1))}
    flat = {"cpu_pct": (5.0,) * 30, "gpu_power_w": (0.0, 1e12)}
    return [
        NodeView("a", "node01", "http://a", "live", None, 0.4, full, trends),
        NodeView("b", "a-very-long-node-name-that-does-not-fit", "http://b", "live", None, 1.0,
                 NodeSummary(node="x", seq=1, taken_at=1.0, alarms=0, rail_min_volts=11.1), short),
        NodeView("c", "node03", "http://c", "live", None, 0.0, None, flat),
        NodeView("d", "node04", "http://d", "stale", None, 75.0, full, trends),
        NodeView("e", "node05", "http://e", "unreachable", "connection refused " * 20, 4000.0, full, trends),
        NodeView("f", "10.0.0.6:9400", "http://f", "connecting", None, None, None, {}),
        NodeView("g", "node07", "http://g", "unreachable", None, None, None, {}),
        NodeView("h", "node08", "http://h", "live", None, 0.2, probing, trends),
        NodeView("i", "node09-with-a-long-name", "http://i", "live", None, 0.2, degraded, short),
        # The undervolt guard's marks, each in its own style after the state (cut in the narrowest name column).
        *(NodeView(f"g{mark}", f"node1{i}", f"http://g{i}", state, None, 0.2,
                   msgspec.structs.replace(full, guard_mark=mark), trends)
          for i, (mark, state) in enumerate((("G1", "live"), ("Goff", "live"), ("dry2h", "stale"),
                                             ("G1?", "live"), ("dryoff", "live")))),
    ]


def lines(app: App[None], row: NodeRow, renderable: object) -> list[list[Segment]]:
    """Lines as Textual gets them from the widget: base style added, same-style runs merged."""
    base = row.visual_style.rich_style
    console = app.console
    segments = [Segment(text, base + style if style else base) for text, style, _ in
                console.render(renderable, app.console_options.update_width(row.size.width))]  # type: ignore[arg-type]
    return [list(Segment.simplify(line)) for line in Segment.split_and_crop_lines(segments, row.size.width, pad=False,
                                                                                  include_new_lines=False)]


@pytest.mark.parametrize("width", [200, 120, 90, 79])
async def test_direct_lines_are_the_table_s(width: int) -> None:
    app = RowApp()
    async with app.run_test(size=(width, 4)) as pilot:
        row = app.query_one(NodeRow)
        for focused in (False, True):
            if focused:
                row.focus()
                await pilot.pause()
            for columns in (COLUMNS, columns_for(row.size.width, True)):
                for view in views():
                    widths = column_widths(row.size.width, columns)
                    assert sum(widths) + len(widths) - 1 <= row.size.width
                    fast = lines(app, row, row._render_lines(view, columns, widths))
                    table = lines(app, row, row._render_table(view, columns, widths))
                    assert fast == table, (width, view.key, focused, len(columns))


def test_sparkline_bars_are_textual_s() -> None:
    console = Console(width=80, force_terminal=True, color_system="truecolor")
    rng = random.Random(3)
    low, high = Color.parse("#203040"), Color.parse("#80c0ff")
    for count, width in ((60, 20), (60, 60), (61, 7), (2, 2), (120, 33)):
        data = trend(rng, count)
        for extreme, pick in (("min", min), ("max", max)):
            ours = row_lines.sparkline(data, width, low, high, extreme)  # type: ignore[arg-type]
            theirs = list(console.render(Sparkline(data, width=width, min_color=low, max_color=high,
                                                   summary_function=pick)))
            assert list(Segment.simplify(ours)) == list(Segment.simplify(theirs))
            assert len(ours) == len(list(Segment.simplify(ours)))
    assert not math.isnan(sum(data))


def test_cell_cuts_with_an_ellipsis_and_pads_in_its_style() -> None:
    bold = Style(bold=True)
    assert row_lines.cell("node01", bold, 8) == Segment("node01  ", bold)
    assert row_lines.cell("12 W", bold, 6, "right") == Segment("  12 W", bold)
    assert row_lines.cell("long-name", None, 5) == Segment("long…", None)


async def test_row_styles_follow_the_theme() -> None:
    app = RowApp()
    async with app.run_test(size=(120, 4)) as pilot:
        row = app.query_one(NodeRow)
        seen = []
        for theme in ("textual-dark", "textual-light", "nord"):
            app.theme = theme
            await pilot.pause()
            row._style("live")
            row.refresh()
            await pilot.pause()
            assert row._style("live") == row.get_component_rich_style("node-row--live", partial=True)
            seen.append(row._style("live"))
        assert len(set(seen)) > 1  # nord's green is not textual's


async def _why_line(problems: tuple[object, ...]) -> tuple[int, str]:
    """The row's height and its third line (the why line) for a live node with ``problems``, at 80 columns."""
    from rigmon.tui.widgets.node_row import NodeRow

    view = NodeView(key="k", name="node03", url="http://n:1", state="live", reason=None, age_s=0.0,
                    summary=NodeSummary(node="node03", seq=1, taken_at=1.0, alarms=1), problems=problems)

    class RowApp(App[None]):
        def compose(self) -> ComposeResult:
            yield NodeRow(view)

    app = RowApp()
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        row = app.query_one(NodeRow)
        console = Console(width=80, record=True, color_system=None, file=io.StringIO())
        console.print(row.render())
        return row.size.height, console.export_text().splitlines()[2].rstrip()


async def test_the_why_line_keeps_whole_problems_at_80_columns() -> None:
    from rigmon.cluster.incident import Problem

    height, why = await _why_line((
        Problem("warn", "USB4 0-1 at 20 of 40 Gb/s", "link:0-1"),
        Problem("warn", "md127 at 67 % of md126 while loading the model weights of the run", "md:md127"),
        Problem("warn", "collector gpu failing", "collector:gpu")))
    assert height == 3
    # Two problems do not fit whole: the worst one and how many more.
    assert why == "  ↳ USB4 0-1 at 20 of 40 Gb/s (+2 more)"


async def test_a_worst_problem_too_long_is_cut_before_its_count_of_more() -> None:
    from rigmon.cluster.incident import Problem

    _, why = await _why_line((
        Problem("bad", "USB4 0-1 link flapping: 14 drops in 10 min (flapping): re-plug the cable or the dock",
                "link:0-1"),
        Problem("warn", "collector gpu failing", "collector:gpu")))
    # The words are cut, the count of the other problems is whole.
    assert why.endswith("… (+1 more)") and why.startswith("  ↳ USB4 0-1 link flapping")
    assert len(why) <= 80


async def test_a_stale_or_unreachable_row_draws_its_last_figures_faint() -> None:
    # A dead node's last figures (CPU 43%, 1.20 GB/s) must not read as current: they are drawn
    # faint, in their colours; the live row's are not, and the alarm count stays as it is.
    app = RowApp()
    async with app.run_test(size=(120, 4)):
        row = app.query_one(NodeRow)
        by_key = {v.key: v for v in views()}
        widths = column_widths(row.size.width, COLUMNS)
        for key, old in (("a", False), ("d", True), ("e", True)):
            top = lines(app, row, row._render_lines(by_key[key], COLUMNS, widths))[0]
            styles = [s.style for s in top for _ in s.text]
            text = "".join(s.text for s in top)
            cpu = styles[text.index("43%")]
            count = styles[text.index(" 3 ") + 1]
            assert bool(cpu and cpu.dim) is old, key
            assert not (count and count.dim), key


def test_a_gap_in_a_trend_stays_a_blank_bar_at_any_width() -> None:
    # A node down for five minutes between two stretches of frames: its trend holds a gap marker
    # (nan) that must survive the bars' own reduction (before, nan was skipped like a missing value).
    data = (11.9,) * 60 + (math.nan,) + (11.4,) * 60
    for width in (5, 12, 30, 121):
        text = "".join(s.text for s in row_lines.sparkline(data, min(width, len(data)), Color.parse("green"),
                                                           Color.parse("red"), "min", gauge.RAIL))
        assert len(text) == min(width, len(data)) and text.count(" ") == 1, (width, text)
        left, right = text.split(" ")
        assert abs(len(left) - len(right)) <= 1
        assert len(set(left)) == 1 and len(set(right)) == 1 and left[0] > right[0]
