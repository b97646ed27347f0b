"""A node out of touch whose reason does not fit its row's line goes on to a third line, so the end of the
reason, often what to do (an HTTPS agent's ``use an https:// URL``), is on screen at 80 columns."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.widgets.node_row import NodeRow
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent
from tests.tui.test_app import dashboard

#: What an agent serving HTTPS answers a plain HTTP request (400), as `rigmon.agent` words it.
HTTPS_ONLY = ("this agent serves HTTPS, and this request came in plain HTTP: use an https:// URL "
              "(Prometheus: scheme: https, with a tls_config ca_file naming the agent's certificate)")


def drawn(row: NodeRow, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(row.render())
    return console.export_text().splitlines()


async def rows_at(width: int, height: int) -> tuple[list[str], list[str], list[int]]:
    """The rows of an agent answering 400 with `HTTPS_ONLY` and of one that is down, drawn ``width`` wide,
    and the heights of both rows."""
    https = FakeAgent("aaa", frames=0)
    https.status, https.error = 400, HTTPS_ONLY
    down = FakeAgent("bbb", frames=0)
    down.down = True
    app, _ = dashboard(https, down)
    async with app.run_test(size=(width, height)) as pilot:
        await wait_for(lambda: all(app.cluster.nodes[a.url].error is not None for a in (https, down)))
        app.refresh_screen()
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ClusterScreen)
        rows = {r.view.key: r for r in screen.query(NodeRow) if r.view is not None}
        first, second = rows[https.url], rows[down.url]
        return drawn(first, width), drawn(second, width), [int(r.size.height) for r in (first, second)]


@pytest.mark.parametrize("width", [80, 200])
async def test_the_https_agents_words_are_on_the_row_whole_enough_to_act_on(width: int) -> None:
    https, down, heights = await rows_at(width, 24 if width == 80 else 50)
    # Before: "unreachable, no data yet: HTTP 400: this agent serves HTTPS, and this reques…" at 80 columns.
    assert len(https) == 3 and heights[0] == 3
    # The agent answered: "refused" (its URL is wrong), not "unreachable".
    assert https[1].startswith("refused, no data yet: HTTP 400: this agent serves HTTPS")
    assert https[2].startswith("  ")
    said = " ".join(line.strip() for line in https[1:])
    assert "this request came in plain HTTP: use an https:// URL" in said
    assert all(len(line) <= width for line in https)
    # Words are not broken across the two lines.
    assert not https[1].endswith("…") and https[1][-1] != " "
    # A reason that fits keeps its row two lines high.
    assert down[1].startswith("unreachable, no data yet: cannot connect") and len(down) == 2 and heights[1] == 2


async def test_the_rest_of_the_reason_is_cut_at_the_edge_of_its_second_line() -> None:
    https, _, _ = await rows_at(80, 24)
    assert https[2].endswith("…") and len(https[2]) <= 80
    assert https[2].startswith("  came in plain HTTP: use an https:// URL")
