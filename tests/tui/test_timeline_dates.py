"""The node screen's incident timeline dates its steps when they are of more than one UTC day."""

from __future__ import annotations

from textual.app import App, ComposeResult

from rigmon.cluster.incident import Step
from rigmon.tui.widgets.timeline import IncidentTimeline
from tests.tui.snapshot_apps.fake_agent import START_AT
from tests.tui.snapshot_apps.hostile import screen_lines

DAY_S = 86400.0


class Host(App[None]):
    """The timeline alone."""

    def compose(self) -> ComposeResult:
        yield IncidentTimeline()


async def test_steps_of_several_days_carry_their_date_and_of_one_day_only_the_time() -> None:
    # Before: a path resistance alarm of 11-29 02:43:58 above a rail warning of 12-06 01:22:05 read
    # "02:43:58" above "01:22:05", as if time ran backwards (the corroding connection, over weeks).
    resistance = Step(START_AT + 2 * 3600 + 43 * 60 + 58, "warn", "path resistance rising 0.064 mOhm/day", "psu:vpsu-v")
    rail = Step(START_AT + 7 * DAY_S + 3600 + 22 * 60 + 5, "warn", "12 V rail minimum 11.698 V is below 11.7 V", "psu")
    app = Host()
    async with app.run_test(size=(80, 8)) as pilot:
        story = app.query_one(IncidentTimeline)
        story.steps = (resistance, rail)
        await pilot.pause()
        lines, _ = screen_lines(app)
        assert any("01-01 02:43:58 ▲ path resistance" in line for line in lines), lines
        assert any("01-08 01:22:05 ▲ 12 V rail minimum" in line for line in lines), lines
        story.steps = (resistance,)
        await pilot.pause()
        lines, _ = screen_lines(app)
        assert any(line.lstrip(" │").startswith("02:43:58 ▲ path resistance") for line in lines), lines
