"""The node box's loss figure against its limit: never on the other side of the limit than the loss."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from rigmon.schema import CollectorStatus, Frame, PeerPathReading, Readings
from rigmon.tui.widgets.peer_path_group import PeerPathGroup, loss_text


@pytest.mark.parametrize(("loss", "limit", "shown"), [
    (2.4, 2.0, "2.4%"),  # over the limit: "2%" read as at it, yet amber
    (1.6, 2.0, "1.6%"),  # under it: "2%" read as at it
    (2.0, 2.0, "2%"),
    (2.04, 2.0, "2.04%"),
    (1.96, 2.0, "1.96%"),
    (5.0, 2.0, "5%"),  # far from the limit: whole
    (0.3, 2.0, "0%"),
    (33.33, 2.0, "33%"),
    (2.4, None, "2%"),  # no limit known: whole
    (None, 2.0, "—"),
])
def test_loss_text_shows_the_side_of_the_limit_it_is_on(loss: float | None, limit: float | None, shown: str) -> None:
    assert loss_text(loss, limit) == shown


def test_a_loss_figure_is_never_on_the_other_side_of_its_limit() -> None:
    for sent in range(1, 400):
        for lost in range(sent + 1):
            loss = 100.0 * lost / sent
            for limit in (0.5, 1.0, 2.0, 5.0):
                shown = float(loss_text(loss, limit).removesuffix("%"))
                assert (shown > limit) == (loss > limit) and (shown == limit) == (loss == limit), (loss, limit)


class _BoxApp(App[None]):
    def compose(self) -> ComposeResult:
        yield PeerPathGroup()


async def test_the_amber_loss_in_the_node_box_reads_over_its_limit() -> None:
    over = PeerPathReading(name="node04/roce", peer="node04", path="roce", address="10.0.1.4", state="degraded",
                           sent=250, received=244, loss_pct=2.4, loss_limit_pct=2.0, loss_over_limit=True)
    frame = Frame(schema=1, node="node03", run_id="r", seq=1, taken_at=1.0, agent_start=0.0,
                  collectors={"peer_probes": CollectorStatus(ok=True, state="ok")}, readings=Readings(peer_paths=(over,)))
    app = _BoxApp()
    async with app.run_test(size=(120, 10)):
        group = app.query_one(PeerPathGroup)
        body = group.body(frame)
        (loss,) = [c for c in body.columns if c.header == "loss"]  # type: ignore[union-attr]
    assert [str(cell) for cell in loss.cells] == ["2.4%"]
