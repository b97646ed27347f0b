"""A peer path's loss on the cluster screen (link matrix cell, the row's path line) stands on the same side of
its limit as the loss: the summary's path cells carry the limit, and 2.4 % over a 2 % limit is not "2%"."""

from __future__ import annotations

import pytest

from rigmon.cluster.incident import path_text
from rigmon.schema import PeerPathReading, decode, encode
from rigmon.summary import PathCell, loss_figure, path_cell
from rigmon.tui.widgets.link_table import LOSS_WIDTH, cell_text


def cell(loss: float, limit: float | None = 2.0, state: str = "degraded") -> PathCell:
    return PathCell(name="node04/roce", peer="node04", path="roce", state=state,  # type: ignore[arg-type]
                    rtt_p99_us=450.0, loss_pct=loss, loss_limit_pct=limit)


@pytest.mark.parametrize(("loss", "limit", "shown"), [
    (2.4, 2.0, "2.4%"),
    (1.6, 2.0, "1.6%"),
    (2.0, 2.0, "2%"),
    (11.7, 2.0, "12%"),
    (0.3, 2.0, "0%"),
    (2.4, None, "2%"),
    # The decimals do not fit the matrix's cell: the side of the limit instead.
    (12.4, 12.0, ">12%"),
    (1.96, 2.0, "<2%"),
    (2.04, 2.0, ">2%"),
])
def test_a_figure_that_fits_a_matrix_cell(loss: float, limit: float | None, shown: str) -> None:
    assert loss_figure(loss, limit, LOSS_WIDTH) == shown


def test_a_matrix_cell_is_never_on_the_other_side_of_its_limit() -> None:
    for sent in range(1, 300):
        for lost in range(sent + 1):
            loss = 100.0 * lost / sent
            for limit in (0.5, 1.0, 2.0, 5.0, 10.0):
                shown = loss_figure(loss, limit, LOSS_WIDTH)
                assert len(shown) <= LOSS_WIDTH, (loss, limit, shown)
                if shown[0] in "<>":
                    assert (shown[0] == ">") == (loss > limit) and loss != limit, (loss, limit, shown)
                    continue
                figure = float(shown.removesuffix("%"))
                assert (figure > limit) == (loss > limit) and (figure == limit) == (loss == limit), (loss, limit)


def test_the_link_matrix_cell_reads_over_the_limit() -> None:
    assert cell_text(cell(2.4), "loss").split()[-1] == "2.4%"
    assert cell_text(cell(1.6, state="ok"), "loss").split()[-1] == "1.6%"
    assert len(cell_text(cell(2.4), "loss")) == len(cell_text(cell(3.0), "loss"))


def test_the_cluster_row_s_path_line_reads_over_the_limit() -> None:
    assert path_text(cell(2.4)) == "roce to node04 p99 450 µs, loss 2.4%"
    assert path_text(cell(2.4, limit=None)) == "roce to node04 p99 450 µs, loss 2%"


def test_the_summary_cell_carries_the_agent_s_limit_and_older_agents_read_as_unknown() -> None:
    reading = PeerPathReading(name="node04/roce", peer="node04", path="roce", address="10.0.1.4", state="degraded",
                              sent=250, received=244, loss_pct=2.4, loss_limit_pct=2.0, loss_over_limit=True)
    made = path_cell(reading)
    assert made.loss_limit_pct == 2.0
    older = encode(made).replace(b',"loss_limit_pct":2.0', b"")
    assert older != encode(made) and decode(PathCell, older).loss_limit_pct is None
