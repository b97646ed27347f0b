"""The incident timeline of a thermally throttling enclosure at 80 columns: each drive's step is one line,
the advice (check the enclosure's fan and airflow) is said once, and the lagging array's step stays in sight."""

from __future__ import annotations

from textual.app import App, ComposeResult

from rigmon.cluster.incident import Problem, timeline
from rigmon.schema import Event
from rigmon.tui.widgets.timeline import IncidentTimeline
from tests.tui.snapshot_apps.fake_agent import START_AT
from tests.tui.snapshot_apps.hostile import screen_lines
from tests.tui.snapshot_apps.recorded import build, open_node, settle

ADVICE = "check the enclosure's fan and airflow"


def hot_drive(n: int, at: float) -> Event:
    """Drive ``nvme<n>`` of md127 at its warning temperature, as the agent's NVMe collector words the event."""
    return Event(id=f"hot{n}", at=at, kind="nvme_temp_over_max", severity="warning", subject=f"nvme:nvme{n}",
                 message=f"NVMe nvme{n} (Samsung SSD 990 PRO 2TB) at 81.86 °C, at or over its warning limit 81.85 °C "
                         f"(critical 84.85 °C), in md127: it throttles its reads; {ADVICE}",
                 data={"serial": f"S{n}", "temp_c": 81.859, "temp_max_c": 81.85, "temp_crit_c": 84.85,
                       "md_arrays": "md127"})


class Host(App[None]):
    """The timeline alone, as wide as the node screen's box is at 80 columns."""

    def compose(self) -> ComposeResult:
        yield IncidentTimeline()


async def test_four_hot_drives_are_a_line_each_and_the_array_after_them_stays_on_an_80x24_screen() -> None:
    # Before: each drive's step carried its event's whole message, model, critical limit and advice: three
    # lines each at 80 columns, twelve for an enclosure of four drives, and the array's step went off screen.
    events = [hot_drive(n, START_AT + n) for n in range(4)]
    lag = Problem("warn", "md127 at 12 % of md126", "md:md127")
    steps = timeline(events, now=(lag,), now_at=START_AT + 60)
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        story = app.query_one(IncidentTimeline)
        story.now, story.steps = (lag,), steps
        await pilot.pause()
        lines = [line for line in screen_lines(app)[0] if line.strip()]
    # The now line, the first drive's step with the advice (two lines), the other three, the array (two lines).
    assert len(lines) == 1 + 2 + 3 + 2, lines
    assert sum(ADVICE in line for line in lines) == 1, lines
    for n in range(4):
        (line,) = [line for line in lines if f"NVMe nvme{n} at" in line]
        assert "81.85 °C, in md127" in line, lines
    assert "md127 at 12 % of md126 now, after NVMe nvme3" in lines[-2] and lines[-1].strip() == "temperature"


async def test_the_recorded_enclosure_reads_a_line_a_drive_on_the_node_screen_at_80x24_and_200x50() -> None:
    app, fleet, _ = build([("strix", "nvme-enclosure-thermal-throttle", 90)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        for size in ((80, 24), (200, 50)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            await pilot.pause()
            lines, _ = screen_lines(app)
            story = lines[:next(i for i, line in enumerate(lines) if "╰" in line)]
            assert sum(ADVICE in line for line in story) == 1, (size, story)
            (second,) = [line for line in story if "NVMe nvme1 at" in line]
            assert second.rstrip(" │").endswith("≥ warning limit 81.85 °C, in md127"), (size, story)
            assert any("after NVMe nvme1 reached its" in line for line in story), (size, story)
