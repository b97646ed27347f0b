"""REPORT.md's charts run from a node's first point, not from the window's start (an agent up for less than the
window), say why nothing came before it, and say how far apart their points are by the points' own times."""

from __future__ import annotations

import time

from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame, History, HistorySeries, Info, Readings
from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.report import render_report

T0 = 1_790_000_000.0
RAIL = "psu_rail.volts.min_volts"
POWER = "gpus[0].power_w"


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def part(at: list[float], agent_start: float, window_s: float = 600.0, step_s: float = 1.0) -> NodePart:
    """A node whose agent answered a window ending at its last point in whole frames at ``at``; the rail sags
    at its third point, the power steps up there."""
    rail = tuple(11.3 if i == 2 else 12.0 for i in range(len(at)))
    power = tuple(900.0 if i >= 2 else 200.0 for i in range(len(at)))
    to_at = at[-1]
    history = History(schema=SCHEMA_VERSION, node="n1", from_at=to_at - window_s, to_at=to_at, tier="frames",
                      step_s=step_s, series={RAIL: HistorySeries(at=tuple(at), min=rail, mean=rail, max=rail),
                                             POWER: HistorySeries(at=tuple(at), min=power, mean=power, max=power)})
    latest = Frame(schema=SCHEMA_VERSION, node="n1", run_id="r2", seq=len(at), taken_at=to_at,
                   agent_start=agent_start, collectors={"psu": CollectorStatus(state="ok", ok=True)},
                   readings=Readings())
    info = Info(schema=SCHEMA_VERSION, node="n1", run_id="r2", agent_version="0.1", agent_start=agent_start,
                interval_s=step_s, collectors=("psu",))
    return NodePart(node="n1", source="x", from_at=to_at - window_s, to_at=to_at, info=info, latest=latest,
                    history=history)


def chart_of(report: str, title: str) -> str:
    return report.split(f"### {title}")[1].split("```")[1]


def test_an_agent_up_for_less_than_the_window_is_charted_from_its_first_point() -> None:
    # Up 48 s at the end of a 10 minute window: the axis read "9.20 ... 10.00 minutes after" the window's start.
    start = T0 + 551.6
    at = [T0 + 552.0 + i for i in range(49)]
    report = render_report([part(at, agent_start=start)], 600.0, at[-1])
    for title in ("Rail voltage (minimum per point)", "Power (maximum per point)"):
        chart = chart_of(report, title)
        assert f"minutes after {_stamp(at[0])}" in chart, chart
        ticks = [line for line in chart.splitlines() if line.strip()][-2].split()
        assert float(ticks[0]) == 0.0 and 0.7 <= float(ticks[-1]) <= 0.8, ticks
    # The sag (the third of 49 points) is at the left of the plot, not squeezed into its right part.
    chart = chart_of(report, "Rail voltage (minimum per point)")
    bottom = next(line for line in chart.splitlines() if "┤" in line and line.split("┤")[0].strip().startswith("11.3"))
    plot = bottom.split("┤", 1)[1]
    assert any(c != " " for c in plot[: len(plot) // 10]), chart
    assert (f"Nothing was recorded in the first 552 s of the window (the agent started at {_stamp(start)}): the "
            f"charts begin at the first point, {_stamp(at[0])}.") in report


def test_data_of_an_earlier_run_is_not_said_to_begin_with_the_agent() -> None:
    # The journal holds an earlier run from 400 s into the window; this run's agent started later.
    at = [T0 + 400.0 + i for i in range(201)]
    report = render_report([part(at, agent_start=T0 + 500.0)], 600.0, at[-1])
    assert ("Nothing was recorded in the first 400 s of the window (the node's history holds nothing earlier): "
            f"the charts begin at the first point, {_stamp(at[0])}.") in report
    assert "the agent started" not in report


def test_a_window_full_of_data_says_nothing_of_its_start() -> None:
    at = [T0 + i for i in range(601)]
    report = render_report([part(at, agent_start=T0 - 3600.0)], 600.0, at[-1])
    assert "Nothing was recorded" not in report
    assert f"minutes after {_stamp(T0)}" in chart_of(report, "Power (maximum per point)")


def test_points_per_second_come_from_the_points_own_times_not_the_configured_interval() -> None:
    # `rigmon sim --speed 4`: the agent's interval is 1 s of real time, its frames are 4 s apart on its clock,
    # and a pushed reading (an ADC window, an Xid) now and then adds a frame between two ticks.
    at = sorted([T0 + 4.0 * i for i in range(150)] + [T0 + 4.0 * i + 1.5 for i in range(0, 150, 10)])
    report = render_report([part(at, agent_start=T0 - 10.0, step_s=1.0)], 600.0, at[-1])
    assert "Series from the `frames` tier (4 s per point)." in report
    one = render_report([part([T0], agent_start=T0 - 10.0)], 600.0, T0)
    assert "Series from the `frames` tier (a single point)." in one
