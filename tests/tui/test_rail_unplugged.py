"""The rail box of an ADC whose port is gone: the agent's reading says so (``connected`` false, stale,
no envelope, the counters as they stand) while the psu collector errors. The box shows the ADC as
disconnected, never as a healthy rail without numbers. The frames are a real agent's over the simulated
`adc-unplug` rig (the ADC's pty goes away 20 s in)."""

from __future__ import annotations

from rigmon.tui.widgets.rail_group import RailGroup
from tests.tui.snapshot_apps.recorded import build, open_node, settle
from tests.tui.snapshot_apps.record_frames import load_frames
from tests.tui.test_sources import SIZE, body_text


async def test_an_unplugged_adcs_reading_shows_disconnected_and_stale() -> None:
    frames = load_frames("adc-unplugged")
    last = frames[-1]
    # What the recording holds: the port gone, the collector failing, the reading there to say so.
    assert last.collectors["psu"].state == "error" and last.readings.psu_rail is not None
    assert not last.readings.psu_rail.connected and last.readings.psu_rail.stale
    app, fleet, _ = build([("adc", frames, len(frames))])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        shown = body_text(app.screen.query_one(RailGroup))
    assert "disconnected" in shown and "stale" in shown, shown
    assert " connected" not in shown.replace("disconnected", ""), shown
