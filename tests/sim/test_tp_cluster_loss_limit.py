"""tp-cluster end to end: the slow RoCE path's loss (about 10 %) against a 10 % limit, as the dashboard shows it
from the agents' summary stream: the link matrix cell and the row's path line never put the loss on the other side
of its limit (``10%`` for 10.4 % over it read as at it)."""

from __future__ import annotations

import asyncio
import time

from rigmon.cluster.incident import path_text
from rigmon.sim.rig import running_rig
from rigmon.tui.widgets.link_table import cell_text
from tests.sim.test_tp_cluster import dashboard_view

LIMIT = 10.0
DEADLINE_S = 120.0


def side(shown: str, limit: float) -> int:
    """Which side of ``limit`` a loss as shown stands on: 1 over, -1 under, 0 at."""
    if shown[0] in "<>":
        return 1 if shown[0] == ">" else -1
    figure = float(shown.removesuffix("%"))
    return (figure > limit) - (figure < limit)


async def test_the_slow_path_s_loss_reads_on_its_side_of_the_limit() -> None:
    near = 0
    async with running_rig("tp-cluster", 4, base_port=0, speed=1.0,
                           extra_config={"probes": {"loss_limit_pct": LIMIT}}) as rig:
        deadline = time.monotonic() + DEADLINE_S
        while near < 2 and time.monotonic() < deadline:
            await asyncio.sleep(1.0)
            matrix, _ = await dashboard_view(rig.urls)
            for row in matrix.rows:
                for cell in row.cells:
                    if cell is None or cell.loss_pct is None or cell.state == "silent":
                        continue
                    assert cell.loss_limit_pct == LIMIT, cell
                    truth = (cell.loss_pct > LIMIT) - (cell.loss_pct < LIMIT)
                    assert side(cell_text(cell, "loss").split()[-1], LIMIT) == truth, cell
                    if cell.loss_pct:
                        line = path_text(cell).rsplit("loss ", 1)[-1]
                        assert side(line, LIMIT) == truth, (path_text(cell), cell)
                    # A window whose loss rounds to the limit without being at it: the case whole percent got wrong.
                    near += round(cell.loss_pct) == LIMIT and cell.loss_pct != LIMIT
    assert near, "no window's loss came near the limit"
