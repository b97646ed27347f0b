"""The cluster screen's rows tell apart followed agents of one node name, as the alarms screen does
(``node01 (http://10.0.0.2:9871)``), and the node screen's title says which one it shows."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console
from textual.app import App, ComposeResult

from rigmon.cluster.node_view import NodeView
from rigmon.cluster.store import ClusterStore
from rigmon.tui.row_columns import name_label
from rigmon.tui.widgets.node_row import NodeRow
from tests.tui.snapshot_apps.fake_agent import FakeClock, make_frame

URLS = ("http://10.0.0.1:9871", "http://10.0.0.2:9871", "http://10.0.0.3:9871")


def cluster_views() -> list[NodeView]:
    """Views of two agents that both call themselves node01 and one node02."""
    cluster = ClusterStore(FakeClock())
    rng = random.Random(3)
    for n, (url, name) in enumerate(zip(URLS, ("node01", "node01", "node02")), 1):
        cluster.add(url, url).add_frames([make_frame(name, f"run{n}", 1, rng)])
    return sorted(cluster.views(), key=lambda v: v.key)


def test_views_of_one_name_carry_their_agent() -> None:
    assert [v.label for v in cluster_views()] == [
        "node01 (http://10.0.0.1:9871)", "node01 (http://10.0.0.2:9871)", "node02"]


async def rendered_first_lines(width: int) -> list[str]:
    views = cluster_views()

    class RowsApp(App[None]):
        def compose(self) -> ComposeResult:
            for view in views:
                yield NodeRow(view)

    app = RowsApp()
    out = []
    async with app.run_test(size=(width, 12)) as pilot:
        await pilot.pause()
        for row in app.query(NodeRow):
            console = Console(width=width, record=True, color_system=None, file=io.StringIO())
            console.print(row.render())
            out.append(console.export_text().splitlines()[0])
    return out


@pytest.mark.parametrize("width", [80, 200])
async def test_rows_of_one_name_are_told_apart(width: int) -> None:
    # Before: both rows began "node01" and nothing else in them said which agent each was.
    first = await rendered_first_lines(width)
    names = [line.split("  ")[0] for line in first]
    assert names[0] != names[1]
    assert names[0].startswith("node01 (") and names[1].startswith("node01 (")
    assert names[0].endswith("1:9871)") and names[1].endswith("2:9871)")
    assert names[2] == "node02"
    if width == 200:
        assert names[:2] == ["node01 (http://10.0.0.1:9871)", "node01 (http://10.0.0.2:9871)"]


def test_a_label_too_wide_keeps_the_end_of_its_key() -> None:
    view = NodeView("http://10.0.0.2:9871", "node01", "http://10.0.0.2:9871", "live", None, 0.0, None,
                    label="node01 (http://10.0.0.2:9871)")
    assert name_label(view, 18) == "node01 (…0.2:9871)"
    long = NodeView("http://10.0.0.2:9871", "a-very-long-node-name", "http://10.0.0.2:9871", "live", None, 0.0, None,
                    label="a-very-long-node-name (http://10.0.0.2:9871)")
    cut = name_label(long, 18)
    assert len(cut) == 18 and cut.endswith("(…2:9871)") and cut.startswith("a-very")
    # A name of its own is cut at its end, as before.
    assert name_label(NodeView("k", "node02", "u", "live", None, 0.0, None, label="node02"), 4) == "node02"
