"""The rail box of an ADC whose port is gone: the agent's reading says so (``connected`` false, stale,
no envelope, the counters as they stand) while the psu collector errors. The box shows the ADC as
disconnected, never as a healthy rail without numbers."""

from __future__ import annotations

from msgspec.structs import replace

from rigmon.tui.widgets.rail_group import RailGroup
from tests.tui.snapshot_apps.recorded import build, open_node, settle, v100_frames
from tests.tui.test_sources import SIZE, body_text


async def test_an_unplugged_adcs_reading_shows_disconnected_and_stale() -> None:
    error = "CollectorError: psu.port /dev/ttyACM0: cannot open: no such device (unplugged?); retrying"

    def unplugged(frame):  # type: ignore[no-untyped-def]
        psu = replace(frame.collectors["psu"], state="error", ok=False, error=error)
        rail = replace(frame.readings.psu_rail, connected=False, stale=True, windows=0, volts=None, amps=None,
                       channels_volts={}, channels_amps={}, samples=None, sag=False, under_voltage_latched=False,
                       power_w=None)
        return replace(frame, collectors={**frame.collectors, "psu": psu},
                       readings=replace(frame.readings, psu_rail=rail))

    frames = v100_frames()
    frames = frames[:40] + [unplugged(f) for f in frames[40:60]]
    app, fleet, _ = build([("v100", frames, 60)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        shown = body_text(app.screen.query_one(RailGroup))
    assert "disconnected" in shown and "stale" in shown, shown
    assert " connected" not in shown.replace("disconnected", ""), shown
