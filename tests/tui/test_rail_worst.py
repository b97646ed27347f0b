"""The rail box's figure beside the rail trend is the worst of the period it names, as the cluster
row's *rail 60s*: the lowest rail minimum of the last 60 s (the sag the critical alarm named), not the
newest ADC window's, which the box shows only labelled as the window's. Frames of a real agent over the
simulated V100 rig whose rail sags to 11.255 V and recovers to an 11.384 V window minimum."""

from __future__ import annotations

from rigmon.tui.widgets.rail_group import RailGroup, rail_min_line
from tests.tui.snapshot_apps.recorded import build, open_node, settle, v100_frames
from tests.tui.test_sources import SIZE, body_text, row_text


async def test_rail_box_shows_the_60s_worst_beside_the_trend_and_the_window_as_the_window() -> None:
    app, fleet, _ = build([("v100", v100_frames(), 60)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        assert "11.255 V" in row_text(app, "v100").splitlines()[0]
        await open_node(app, next(iter(fleet.agents)), pilot)
        lines = body_text(app.screen.query_one(RailGroup)).splitlines()
    # The figure beside the trend and the cluster row agree: the sag, named by its period.
    assert lines[0].split()[:4] == ["rail", "min", "60s", "11.255"], lines
    assert "11.384" not in lines[0], lines
    # The newest ADC window's figures are labelled as now / the window.
    assert lines[1].split()[:2] == ["mean", "now"], lines
    window = next(line for line in lines if line.split()[:1] == ["window"])
    assert "min 11.384 V" in window, lines


def test_without_a_worst_the_latest_minimum_is_labelled_now() -> None:
    assert rail_min_line(None, 11.5) == ("rail min now", 11.5)
    assert rail_min_line(11.25, 11.5) == ("rail min 60s", 11.25)
