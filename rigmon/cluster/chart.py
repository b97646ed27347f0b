"""What the history view draws, without UI: the charts a node offers, the time window and its
zoom and pan, and the lines, thresholds and events of one chart from a `/v1/history` answer.

The agent's journal answers ``/v1/history`` with min/mean/max per point (whole frames for a
short window, 60 s or 900 s buckets for a long one). A chart keeps the extreme that matters
(the rail's lowest minimum, a GPU's highest peak, a link's lowest speed), so zooming out never
averages a sag away. `history_from_frames` makes the same answer from frames held in memory
(a replay has no agent to ask).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from rigmon.cluster.chart_model import Chart, Line, Stat, Threshold, indexes
from rigmon.cluster.history_answer import history_answer
from rigmon.cluster.temperature_charts import subject_series, temperature_charts
from rigmon.summary import RAIL_CRITICAL_VOLTS, RAIL_WARN_VOLTS
from rigmon.schema import Event, Frame, History, HistorySeries
from rigmon.series import frame_series
from rigmon.typed import to_data

#: Spans the zoom keys step through, shortest first: a minute to a week.
ZOOM_SPANS_S: tuple[float, ...] = (60.0, 120.0, 300.0, 900.0, 3600.0, 6 * 3600.0, 86400.0, 3 * 86400.0, 7 * 86400.0)
#: The span the history view opens with.
DEFAULT_SPAN_S = 900.0
#: Events drawn at most (those that matter most, `keep_events`).
MAX_EVENTS = 12
#: Events of a process gone from its GPU: its exit, or its leaving the GPU where the agent cannot see
#: whether it exited (a process in another PID namespace).
PROCESS_END_KINDS = frozenset({"gpu_process_exited", "gpu_process_left"})
#: Which events a full chart keeps first, by severity: critical, then warning, then the rest
#: (the job's marks, its processes' exits after hardware trouble).
SEVERITY_RANK: dict[str, int] = {"critical": 0, "warning": 1}


def _order(keys: list[str]) -> list[str]:
    return sorted(keys, key=lambda k: (0, int(k), "") if k.isdigit() else (1, 0, k))


#: Lines of the bus error chart at most (a loose SXM2 module shows on a few counters).
MAX_ERROR_LINES = 8


def _bus_error_lines(values: Mapping[str, float], gpus: Sequence[str]) -> list[Line]:
    """Rates of the GPU bus error counters that have counted anything (PCIe replays, and NVLink
    CRC errors and replays per link: a badly seated SXM2 module shows there first)."""
    lines: list[Line] = []
    for i in gpus:
        if values.get(f"gpus[{i}].pcie_replay_total", 0.0) > 0:
            lines.append(Line(f"GPU {i} PCIe replay", f"gpus[{i}].pcie_replay_per_s", "max"))
        for link in _order(indexes(values, f"gpus[{i}].nvlinks[", ".link")):
            base = f"gpus[{i}].nvlinks[{link}]"
            if values.get(f"{base}.crc_flit_total", 0.0) > 0:
                lines.append(Line(f"GPU {i} NVLink {link} CRC", f"{base}.crc_flit_per_s", "max"))
            if values.get(f"{base}.replay_total", 0.0) > 0:
                lines.append(Line(f"GPU {i} NVLink {link} replay", f"{base}.replay_per_s", "max"))
    return lines[:MAX_ERROR_LINES]


def charts_for(values: Mapping[str, float], subject: str | None = None) -> list[Chart]:
    """The charts a node offers, from its latest frame's series (`frame_series`): the rail,
    GPU power, GPU bus error rates (when a counter has counted), Thunderbolt/USB4 link speeds, md array throughput,
    path resistance, CPU, NVMe and host temperatures (`temperature_charts`), each where the node reports it.
    ``subject``: the node's worst problem's (`rigmon.cluster.incident.Problem.subject`), whose temperature line
    its chart keeps first (`opening_chart` opens the view on it)."""
    names = list(values)
    charts: list[Chart] = []
    if "psu_rail.volts.min_volts" in values:
        charts.append(Chart(
            "rail", "12 V rail (V): lowest minimum, mean, highest maximum", "V",
            (Line("min", "psu_rail.volts.min_volts", "min"), Line("mean", "psu_rail.volts.mean_volts", "mean"),
             Line("max", "psu_rail.volts.max_volts", "max")),
            (Threshold(f"warning {RAIL_WARN_VOLTS:g} V", RAIL_WARN_VOLTS, "warn"),
             Threshold(f"critical {RAIL_CRITICAL_VOLTS:g} V", RAIL_CRITICAL_VOLTS, "bad")),
            floor=11.0, ceiling=12.6))
    # Every GPU listed, a lost one too (it reports no power now, but it did before).
    gpus = _order(indexes(names, "gpus[", ".index"))
    amds = _order(indexes(names, "amd_gpus[", ".power_w"))
    if gpus or amds:
        # The peak between polls where the driver has it: a V100's peaks are what sag the rail.
        peak = any(f"gpus[{i}].power_peak_w" in values for i in gpus)
        lines = [Line(f"GPU {i}", f"gpus[{i}].power_peak_w" if peak else f"gpus[{i}].power_w", "max") for i in gpus]
        # By PCI address (`rigmon.series.ELEMENT_KEY_FIELDS`): the card number may be another GPU's after a reboot.
        lines += [Line(f"AMD {key}", f"amd_gpus[{key}].power_w", "max") for key in amds]
        limits = sorted({values[f"gpus[{i}].power_limit_w"] for i in gpus if f"gpus[{i}].power_limit_w" in values})
        charts.append(Chart(
            "gpu_power", "GPU power (W): highest peak of each GPU", "W", tuple(lines),
            tuple(Threshold(f"limit {v:g} W", v, "limit") for v in limits), floor=0.0,
            ceiling=max(limits) if limits else None))
    errors = _bus_error_lines(values, gpus)
    if errors:
        charts.append(Chart("bus_errors", "GPU bus errors (/s): highest rate of each counter", "/s",
                            tuple(errors), floor=0.0))
    links = _order(indexes(names, "thunderbolt[", ".rx_gbps"))
    if links:
        expected = sorted({values[f"thunderbolt[{k}].expected_gbps"] for k in links
                           if f"thunderbolt[{k}].expected_gbps" in values})
        charts.append(Chart(
            "links", "Thunderbolt/USB4 link speed (Gb/s): lowest of each link", "Gb/s",
            tuple(Line(f"{k}", f"thunderbolt[{k}].rx_gbps", "min") for k in links),
            tuple(Threshold(f"expected {v:g} Gb/s", v, "limit") for v in expected), floor=0.0,
            ceiling=max(expected) if expected else None))
    arrays = _order(indexes(names, "raid[", ".read_bytes_per_s"))
    if arrays:
        lines = []
        for name in arrays:
            lines.append(Line(f"{name} read", f"raid[{name}].read_bytes_per_s", "max"))
            lines.append(Line(f"{name} write", f"raid[{name}].write_bytes_per_s", "max"))
        charts.append(Chart("storage", "md array throughput (MB/s): highest of each", "MB/s", tuple(lines),
                            floor=0.0, divide=1e6))
    paths = indexes(names, "path_resistance[", ".resistance_mohm")
    if paths:
        charts.append(Chart("path", "supply path resistance (mΩ): mean", "mΩ",
                            tuple(Line(p, f"path_resistance[{p}].resistance_mohm", "mean") for p in paths)))
    if "host.cpu_pct" in values:
        charts.append(Chart("cpu", "CPU busy (%): highest", "%", (Line("CPU", "host.cpu_pct", "max"),),
                            floor=0.0, ceiling=100.0))
    return charts + temperature_charts(values, subject)


def opening_chart(charts: Sequence[Chart], subject: str | None) -> int:
    """Which of ``charts`` the history view opens on: the one drawing the series of ``subject``, the node's
    worst problem (`subject_series`: a hot sensor's or drive's temperature), else the first."""
    series = subject_series(subject) if subject is not None else None
    if series is None:
        return 0
    return next((i for i, chart in enumerate(charts) if series in chart.series), 0)


def opening_span_s(held_s: float | None) -> float:
    """The span the history view opens with: the shortest zoom step covering the ``held_s``
    seconds the dashboard has seen of the node, at most `DEFAULT_SPAN_S` (a node followed for
    a minute opens on five minutes, not on a quarter hour of empty chart)."""
    if held_s is None:
        return DEFAULT_SPAN_S
    return next((s for s in ZOOM_SPANS_S if s >= held_s), ZOOM_SPANS_S[-1]) if held_s < DEFAULT_SPAN_S \
        else DEFAULT_SPAN_S


def frame_values(frame: Frame | None) -> dict[str, float]:
    """Every numeric series of ``frame`` by name (what `charts_for` reads); empty for ``None``."""
    if frame is None:
        return {}
    return frame_series(to_data(frame))


@dataclass(frozen=True, slots=True)
class Window:
    """The time the history view shows: ``span_s`` seconds up to ``end_at`` (Unix seconds)."""

    end_at: float
    span_s: float = DEFAULT_SPAN_S

    @property
    def from_at(self) -> float:
        return self.end_at - self.span_s

    def zoom(self, step: int) -> Window:
        """``step`` zoom levels out (positive) or in (negative) of `ZOOM_SPANS_S`, same end."""
        spans = ZOOM_SPANS_S
        index = min(range(len(spans)), key=lambda i: abs(spans[i] - self.span_s))
        index = max(0, min(len(spans) - 1, index + step))
        return Window(self.end_at, spans[index])

    def pan(self, halves: int, now: float) -> Window:
        """Move ``halves`` half spans later (positive) or earlier; never past ``now``."""
        return Window(min(now, self.end_at + halves * self.span_s / 2), self.span_s)


#: Points of a line more than this many steps of the answer apart (frames or buckets) are not
#: joined: the node sent nothing between them (dead, rebooting after a PSU trip, agent stopped),
#: and a straight line across would draw readings nobody took.
GAP_STEPS = 3.0


@dataclass(frozen=True, slots=True)
class PlottedLine:
    """One line ready to draw: x in seconds since the window's start, y in the chart's unit.

    ``breaks`` are the indexes of the points that follow a gap (`GAP_STEPS`): the line is drawn
    in runs, not joined across them.
    """

    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    breaks: tuple[int, ...] = ()

    def runs(self) -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
        """The line's runs between gaps: (xs, ys) of each, oldest first."""
        bounds = [0, *self.breaks, len(self.xs)]
        return [(self.xs[a:b], self.ys[a:b]) for a, b in zip(bounds, bounds[1:])]


@dataclass(frozen=True, slots=True)
class Plotted:
    """One chart of one window, ready to draw.

    Attributes:
        lines: the chart's lines that have points.
        thresholds: its horizontal lines.
        events: the node's warning and critical events, the job's marks and its processes' exits
            after hardware trouble in the window (`notable_event`; the `MAX_EVENTS` that matter
            most, `keep_events`), oldest first.
        y_low: bottom of the y axis.
        y_high: top of the y axis.
        lowest: the lowest value drawn (``None`` without points).
        highest: the highest value drawn.
        tier: the journal tier the answer came from (``frames``, ``60s``...).
        window_events: how many such events the window holds, those not kept too.
    """

    lines: tuple[PlottedLine, ...]
    thresholds: tuple[Threshold, ...]
    events: tuple[Event, ...]
    y_low: float
    y_high: float
    lowest: float | None
    highest: float | None
    tier: str
    window_events: int = 0


def _column(series: HistorySeries, stat: Stat) -> tuple[float, ...]:
    return series.min if stat == "min" else series.max if stat == "max" else series.mean


def plot_data(chart: Chart, history: History, window: Window,
              merge: Callable[[Sequence[Event]], Sequence[Event]] | None = None) -> Plotted:
    """The lines, thresholds and events of ``chart`` from a ``/v1/history`` answer, for ``window``.

    Each line draws its statistic of every point of the answer (the lowest minimum of a
    bucket for the rail, the highest maximum for power); points outside the window are left
    out, and points further apart than `GAP_STEPS` steps are not joined. The y axis spans the
    data and the chart's floor, ceiling and thresholds.

    Args:
        chart: the chart to draw.
        history: the agent's answer for the window.
        window: the time shown.
        merge: makes one event of several reports of one thing (the dashboard's merge of an Xid
            that NVML and the kernel log both report), given the window's notable events oldest
            first; applied before the events are counted and `keep_events` chooses among them.
    """
    lines: list[PlottedLine] = []
    values: list[float] = []
    for line in chart.lines:
        series = history.series.get(line.series)
        if series is None:
            continue
        xs: list[float] = []
        ys: list[float] = []
        for at, value in zip(series.at, _column(series, line.stat)):
            if window.from_at <= at <= window.end_at and math.isfinite(value):
                xs.append(at - window.from_at)
                ys.append(value / chart.divide)
        if xs:
            gap_s = GAP_STEPS * history.step_s
            breaks = tuple(i for i in range(1, len(xs)) if xs[i] - xs[i - 1] > gap_s) if gap_s > 0 else ()
            lines.append(PlottedLine(line.label, tuple(xs), tuple(ys), breaks))
            values.extend(ys)
    bounds = list(values) + [t.value for t in chart.thresholds]
    bounds += [v for v in (chart.floor, chart.ceiling) if v is not None]
    low = min(bounds, default=0.0)
    high = max(bounds, default=1.0)
    pad = (high - low) * 0.05 if high > low else 1.0
    # A floor at 0 (power, throughput) stays the axis' bottom; other ends get a margin.
    y_low = low if chart.floor is not None and low >= chart.floor and chart.floor == 0.0 else low - pad
    events: Sequence[Event] = sorted((e for e in history.events
                                      if notable_event(e) and window.from_at <= e.at <= window.end_at),
                                     key=lambda e: e.at)
    if merge is not None:
        events = merge(events)
    return Plotted(tuple(lines), chart.thresholds, keep_events(events, MAX_EVENTS),
                   y_low, high + pad, min(values, default=None), max(values, default=None), history.tier,
                   window_events=len(events))


def keep_events(events: Sequence[Event], most: int) -> tuple[Event, ...]:
    """The ``most`` of ``events`` that matter most, oldest first (all of them when they are fewer).

    Severity first (`SEVERITY_RANK`: critical, then warning, then the job's marks and other info
    events), then closeness to the incident's start (the first critical or warning event): the rail
    alarms, the Xid and the lost GPU that began an incident, not its aftermath, and the marks saying
    what the job was doing then. Without an incident, the newest events: a healthy run's latest marks
    (where the job is now, the one just put among them). On a tie the earlier event.
    """
    if len(events) <= most:
        return tuple(sorted(events, key=lambda e: e.at))
    if most <= 0:
        return ()
    trouble = [e.at for e in events if e.severity in SEVERITY_RANK]
    start = min(trouble) if trouble else max(e.at for e in events)
    ranked = sorted(range(len(events)), key=lambda i: (SEVERITY_RANK.get(events[i].severity, len(SEVERITY_RANK)),
                                                      abs(events[i].at - start), events[i].at, i))
    return tuple(events[i] for i in sorted(ranked[:most], key=lambda i: (events[i].at, i)))


def notable_event(event: Event) -> bool:
    """Whether an event stands on the chart (and on the node's incident timeline): warnings and
    critical events, the job's own marks ("epoch 3 checkpoint"), and a process's exit (or its leaving
    the GPU, `PROCESS_END_KINDS`) that followed hardware trouble (``after_event``), the run's end in
    the incident even when its exit code was not seen (torchrun reaps its workers at once: such an
    exit is "info")."""
    if event.severity != "info" or event.kind == "mark":
        return True
    return event.kind in PROCESS_END_KINDS and "after_event" in event.data


def history_from_frames(frames: Sequence[Frame], node: str, from_at: float, to_at: float,
                        names: Iterable[str] | None, interval_s: float = 1.0,
                        events: Sequence[Event] = ()) -> History:
    """A ``/v1/history`` answer made from frames in memory, as the agent's journal makes it
    (`rigmon.cluster.history_answer.history_answer`): every frame while the window holds at most
    `~rigmon.cluster.history_answer.MAX_POINTS` intervals, else buckets of the finest tier that fits, each with the min, mean and
    max of its frames.

    Args:
        frames: the node's frames (any order).
        node: node name put in the answer.
        from_at: window start, Unix seconds.
        to_at: window end.
        names: only these series (all when ``None``).
        interval_s: the agent's frame interval.
        events: events to add besides those the frames carry.
    """
    inside = sorted((f for f in frames if from_at <= f.taken_at <= to_at), key=lambda f: f.taken_at)
    return history_answer(((f.taken_at, frame_values(f)) for f in inside), node, from_at, to_at, names, interval_s,
                          [e for f in inside for e in f.events] + list(events))


#: Steps between time ticks, shortest first.
TICK_STEPS_S = (10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800)


def time_ticks(window: Window, most: int) -> list[tuple[float, str]]:
    """At most ``most`` ticks of the time axis: (seconds since the window's start, UTC label),
    on round times (``14:05``, ``14:05:30``; ``11-26 14:00`` for windows over a day)."""
    most = max(2, most)
    step = next((s for s in TICK_STEPS_S if window.span_s / s <= most), TICK_STEPS_S[-1])
    first = math.ceil(window.from_at / step) * step
    ticks = []
    at = float(first)
    while at <= window.end_at:
        ticks.append((at - window.from_at, clock_label(at, step, window.span_s)))
        at += step
    return ticks


#: Steps between value ticks, times a power of ten.
VALUE_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)


def value_ticks(low: float, high: float, most: int) -> list[tuple[float, str]]:
    """Ticks of the value axis from ``low`` to ``high``, ``most`` steps apart at most: round values
    (steps of 1, 2, 2.5 or 5 times a power of ten), each written with the decimals its step needs
    (``1500``, ``11.25``, ``1.75``), never in exponent form (``1.5e3`` MB/s) or to five decimals."""
    most = max(2, most)
    span = high - low
    if not (math.isfinite(span) and span > 0):
        return []
    raw = span / most
    scale = 10.0 ** math.floor(math.log10(raw))
    step = next(m * scale for m in VALUE_STEPS if m * scale >= raw * (1 - 1e-9))
    # The fewest decimals that write the step exactly (0.25 two, 2.5 one, 500 none).
    decimals = next((d for d in range(10) if abs(round(step, d) - step) <= step * 1e-6), 9)
    ticks = []
    index = math.ceil(low / step - 1e-9)
    while index * step <= high + step * 1e-9:
        value = 0.0 if index == 0 else index * step  # never "-0"
        ticks.append((value, f"{value:.{decimals}f}"))
        index += 1
    return ticks


def clock_label(at: float, step_s: float = 60.0, span_s: float = 0.0) -> str:
    """``at`` (Unix seconds) as UTC: seconds only when ``step_s`` needs them, the date when
    ``span_s`` is over a day."""
    parts = time.gmtime(at)
    clock = time.strftime("%H:%M:%S" if step_s % 60 else "%H:%M", parts)
    return time.strftime("%m-%d ", parts) + clock if span_s > 86400 else clock
