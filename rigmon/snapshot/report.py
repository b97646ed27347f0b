"""REPORT.md of a bundle: nodes, events and alarms, and text charts (plotext) of rail, power, temperature and throughput.

Series are chosen by the unit suffix of their name, so sources added later are charted
without code here: ``*_volts`` (the bucket minimum: a sag must not be averaged away; the 12 V
rail's series alone when the node has any, see `rail_rank`),
``*_w`` (the bucket maximum, power limits left out), ``*temp_c`` (the bucket maximum; each
sensor's high and critical limits named in the legend, see `temperature_limits`) and
``*_bytes_per_s`` (the mean).
"""

from __future__ import annotations

import json
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

import plotext as plt
from msgspec.structs import replace

from rigmon import __version__
from rigmon.agent.journal.runs import rail_rank
from rigmon.agent.journal.tiers import MAX_POINTS
from rigmon.cluster.alarm_events import event_text
from rigmon.cluster.chart import notable_event
from rigmon.cluster.sanitise import clean_lines
from rigmon.cluster.xid_merge import merge_xid_events
from rigmon.lazy_re import lazy_compile
from rigmon.schema import Event, EventValue, History, HistorySeries, SchemaError
from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.history_decode import history_of_decoded
from rigmon.snapshot.report_first import (
    clock_lines,
    firing_section,
    gpus_gone_section,
    link_flaps_section,
)
from rigmon.snapshot.report_text import md_code, md_text

Stat = Literal["min", "mean", "max"]


@dataclass(frozen=True, slots=True)
class ChartSpec:
    """Which series one chart shows and which statistic of each bucket it draws."""

    title: str
    suffix: str
    stat: Stat
    unit: str
    limits: bool = False
    """Whether the legend names each series' limits (`temperature_limits`)."""


CHARTS = (
    ChartSpec("Rail voltage (minimum per point)", "_volts", "min", "V"),
    ChartSpec("Power (maximum per point)", "_w", "max", "W"),
    # A reading's name ends in ``temp_c``; its limits' in ``max_c``/``crit_c`` (not charted as lines).
    ChartSpec("Temperature (maximum per point)", "temp_c", "max", "°C", limits=True),
    ChartSpec("Throughput (mean per point)", "_bytes_per_s", "mean", "B/s"),
)
#: The limit series beside a temperature ``<base>temp_c``, by the word the legend uses: an NVMe's
#: ``<base>temp_max_c``/``<base>temp_crit_c``, a host sensor's ``<base>max_c``/``<base>crit_c``.
TEMPERATURE_LIMITS = (("high", ("temp_max_c", "max_c")), ("critical", ("temp_crit_c", "crit_c")))
#: Lines per chart; beyond this the most extreme series are kept.
MAX_LINES = 6
#: Warning and critical events listed per node: the first `FIRST_EVENTS_LISTED` and the latest.
MAX_EVENTS_LISTED = 40
FIRST_EVENTS_LISTED = 10
#: How REPORT.md says that it counts the two reports of one Xid once (`counted_events`).
XID_PAIR_NOTE = "an Xid reported by both NVML and the kernel log (a kernel-log + NVML pair) counts as one"
#: Alarms of the window listed per node (the latest to fire).
MAX_ALARMS_LISTED = 40
CHART_WIDTH = 100
#: Frames decoded for the charts of one report, all nodes together (`chart_history`): 8 nodes of 1500.
CHART_FRAMES_BUDGET = 12_000
CHART_HEIGHT = 20


def _stamp(at: float | None) -> str:
    if at is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def chart_series(history: History, spec: ChartSpec) -> list[tuple[str, HistorySeries]]:
    """The series of a chart: matching suffix, at most `MAX_LINES`, most extreme first."""
    chosen = [(name, s) for name, s in history.series.items()
              if name.endswith(spec.suffix) and s.at and not (spec.suffix == "_w" and "limit" in name)]
    if spec.suffix == "_volts":
        # The 12 V rail first, and alone when the node has one: a CPU core's 0.9 V would take its
        # place among the lowest minima and squash its sag into a row of the chart.
        ranks = {name: rail_rank(name, max(s.max)) for name, s in chosen}
        if any(rank < 2 for rank in ranks.values()):
            chosen = [item for item in chosen if ranks[item[0]] < 2]
        chosen.sort(key=lambda item: (ranks[item[0]], min(item[1].min)))
    elif spec.stat == "min":
        chosen.sort(key=lambda item: min(item[1].min))
    else:
        chosen.sort(key=lambda item: -max(getattr(item[1], spec.stat)))
    return chosen[:MAX_LINES]


def charted_span(history: History) -> tuple[float, float] | None:
    """The first and the last point of the series `CHARTS` draw of ``history`` (Unix seconds); ``None``
    when they draw none."""
    points = [s.at for spec in CHARTS for _, s in chart_series(history, spec)]
    if not points:
        return None
    return min(at[0] for at in points), max(at[-1] for at in points)


def render_chart(history: History, spec: ChartSpec,
                 span: tuple[float, float] | None = None) -> tuple[str, list[str]] | None:
    """One text chart (no colour codes) and its legend (a line per series: its name and worst
    point), or ``None`` when no series matches.

    Its time axis runs over ``span`` (`charted_span`: the same for every chart of a node, so that a sag
    and the power step under it are read at one time), else over its own series' points: from the
    first point, in minutes after it, not after the window's start (an agent up for less than the
    window had its data squeezed to the right of an axis reading "9.20 ... 10.00 minutes after" a
    time at which nothing was recorded).
    """
    chosen = chart_series(history, spec)
    if not chosen:
        return None
    if span is None:
        span = min(s.at[0] for _, s in chosen), max(s.at[-1] for _, s in chosen)
    t0 = span[0]
    fig = plt.figure
    # plotext keeps one module-level figure: clear it so charts never share state.
    fig.clear()
    legend: list[str] = []
    for name, s in chosen:
        values: Sequence[float] = getattr(s, spec.stat)
        xs = [(at - t0) / 60.0 for at in s.at]
        signal = fig.signal(xs, list(values))
        if len(xs) > 1:
            signal.lines()
        # No legend inside the plot: drawn over its left part, it hid what happened there (a sag at
        # the start of the data), and without colour its marks do not tell the lines apart anyway.
        fig.draw(signal)
        worst = min(range(len(values)), key=values.__getitem__) if spec.stat == "min" else \
            max(range(len(values)), key=values.__getitem__)
        word = {"min": "lowest", "max": "highest", "mean": "highest mean"}[spec.stat]
        limits = temperature_limits(history, name) if spec.limits else ""
        readable = readable_rate(values[worst]) if spec.unit == "B/s" else None
        legend.append(f"- {md_text(name)}: {word} {values[worst]:.6g} {spec.unit} at {_stamp(s.at[worst])}{limits}"
                      + (f" ({readable})" if readable else ""))
    fig.plot_size(CHART_WIDTH, CHART_HEIGHT)
    if span[1] > t0:
        fig.ruler("x").lim(0.0, (span[1] - t0) / 60.0)
    fig.title(f"{spec.title}, {spec.unit}")
    fig.label(f"minutes after {_stamp(t0)}", axis="x")
    text = str(plt.uncolorize(fig.build()))
    fig.clear()
    return "\n".join(line.rstrip() for line in text.splitlines()), legend


#: Decimal prefixes of a byte rate read by a person (a drive's and a link's makers count in 1000s).
_RATE_PREFIXES = ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"))


def readable_rate(bytes_per_s: float) -> str | None:
    """``1.12 GB/s`` for 1.11761e+09 B/s (three significant digits, decimal prefixes); ``None`` below 1 kB/s,
    which reads as it is. Beside the exact figure: two arrays at 1.08779e+09 and 1.11761e+09 B/s are read as
    1.09 and 1.12 GB/s, the figures an operator compares."""
    for scale, unit in _RATE_PREFIXES:
        if abs(bytes_per_s) >= scale:
            return f"{bytes_per_s / scale:.3g} {unit}"
    return None


def temperature_limits(history: History, name: str) -> str:
    """`` (its limits: high 81.85 °C, critical 84.85 °C)`` for the temperature series ``name``: the
    latest value of each limit series beside it (hwmon ``tempN_max``/``tempN_crit``, a thermal zone's
    trip points), so a reading at its limit reads as one; ``""`` when it has none."""
    base = name.removesuffix("temp_c")
    said = []
    for word, suffixes in TEMPERATURE_LIMITS:
        limit = next((history.series[base + sfx] for sfx in suffixes if base + sfx in history.series), None)
        if limit is not None and limit.max:
            said.append(f"{word} {limit.max[-1]:g} °C")
    return f" (its limits: {', '.join(said)})" if said else ""


def chart_history(part: NodePart, history: History, budget: int) -> History:
    """The history ``part``'s charts are drawn from: its ``history``, or every frame when it holds few enough.

    The agent chooses the tier of its answer by the window asked for (an hour: 60 s buckets), not by
    what its journal holds: an agent up for a minute, or a node that crashed minutes after its boot
    (a PSU trip), gave a chart of one or two buckets joined by a straight line, its sag's time known
    to the minute. Its frames (at most `MAX_POINTS`, and at most ``budget``: decoding them is the
    report's main cost) chart each reading at its second; a frame's rail figure is already its
    window's minimum, so nothing is averaged away.
    """
    if history.tier == "frames" or not 1 < part.frame_count <= min(MAX_POINTS, budget):
        return history
    try:
        frames = [json.loads(raw) for raw in part.frame_lines()]
        times = [float(f["taken_at"]) for f in frames]
        # The frames' own spacing, not the agent's configured interval: that is in real seconds, the
        # frames' times on the agent's clock (a simulator's runs `--speed` times as fast).
        spacing_s = median_gap_s(times)
        if spacing_s is None:
            return history
        charted = history_of_decoded(part.node, times[0], times[-1], spacing_s, zip(times, frames))
    except (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError, IndexError, SchemaError):
        # Frames the bundle cannot decode chart nothing better than the agent's own buckets.
        return history
    return replace(charted, events=history.events)


def median_gap_s(times: Sequence[float]) -> float | None:
    """The median of the gaps between ``times`` (ascending Unix seconds); ``None`` for fewer than two.

    The median, not the mean: a reading pushed between two ticks (an ADC window, an Xid) adds a frame
    and two short gaps, and an agent stopped for ten minutes one long one; neither is the usual spacing.
    """
    gaps = sorted(b - a for a, b in pairwise(times))
    return gaps[len(gaps) // 2] if gaps else None


def point_spacing_s(history: History) -> float | None:
    """Seconds per point of ``history``'s series: its tier's bucket, or for whole frames their usual spacing
    by their own times (`median_gap_s` of its longest series); ``None`` when no series has two points.

    A frames answer's ``step_s`` is the agent's configured interval, in real seconds: an agent on a
    simulator's clock (``rigmon sim --speed 4``) stamps frames 4 of its seconds apart at an interval of 1 s.
    """
    if history.tier != "frames":
        return history.step_s
    longest = max(history.series.values(), key=lambda s: len(s.at), default=None)
    return None if longest is None else median_gap_s(longest.at)


def _seconds(value_s: float) -> str:
    """``value_s`` to two significant digits, never in exponent notation: ``0.89``, ``4``, ``3600``."""
    return f"{float(f'{value_s:.2g}'):g}"


def _series_lines(part: NodePart, charted: History, span: tuple[float, float] | None) -> list[str]:
    """Which tier the charts are drawn from and how far apart their points are; and, when the charted data
    begins well into the window, that nothing was recorded before it and why when the agent says why."""
    spacing_s = point_spacing_s(charted)
    per_point = "a single point" if spacing_s is None else f"{_seconds(spacing_s)} s per point"
    lines = [f"Series from the {md_code(charted.tier)} tier ({per_point}).", ""]
    start_at = part.from_at if part.from_at is not None else charted.from_at
    if span is None or span[0] - start_at <= 2 * (spacing_s or charted.step_s):
        return lines
    # An agent up for less than the window (or a journal holding less of it): the charts begin at the
    # first point, and the empty part is said, with its cause when the agent's start explains it.
    agent_start = part.latest.agent_start if part.latest is not None else \
        part.info.agent_start if part.info is not None else None
    # A run's first frame comes at or after its start; data from an earlier run lies before that start.
    why = (f"the agent started at {_stamp(agent_start)}" if agent_start is not None
           and start_at < agent_start <= span[0] + 1.0 else "the node's history holds nothing earlier")
    return lines + [f"Nothing was recorded in the first {span[0] - start_at:.0f} s of the window ({why}): the "
                    f"charts begin at the first point, {_stamp(span[0])}.", ""]


def render_report(parts: Sequence[NodePart], since_s: float, created_at: float) -> str:
    """The whole REPORT.md."""
    out = [
        "# rigmon snapshot",
        "",
        # Which rigmon read the nodes: the agents' versions are in the table below, the bundle's maker here.
        (f"Created {_stamp(created_at)} by rigmon {__version__}; window: the last {since_s:g} s before each node's "
         "latest frame."),
        "",
        # First: a GPU lost before the window (or an agent restart) is in none of the frames below.
        *gpus_gone_section(parts),
        # And a link that flapped between frames, which reads up in every frame and raised no event.
        *link_flaps_section(parts),
        # And what fires on each node, which its own section says screens further down.
        *firing_section(parts),
        "| node | source | kernel | agent | NVIDIA driver | window | frames | events (warn/crit) | error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    merged_any = False
    for part in parts:
        info = part.info
        counted = counted_events(part.events)
        merged_any = merged_any or len(counted) < len(part.events)
        sev = Counter(e.severity for e in counted)
        # Its events come with its history: without it, "0 (0/0)" would say the node was quiet.
        events = "-" if part.history is None else f"{len(counted)} ({sev['warning']}/{sev['critical']})"
        driver = nvidia_driver(part.files)
        out.append(
            f"| {md_text(part.node)} | {md_text(part.source)} | {md_text(info.kernel) if info else '-'} | "
            f"{md_text(info.agent_version) if info else '-'} | {md_text(driver) if driver else '-'} | "
            f"{_stamp(part.from_at)} .. {_stamp(part.to_at)} | "
            f"{part.frame_count} | {events} | {md_text(part.error or '')} |")
    if merged_any:
        out += ["", f"Events: {XID_PAIR_NOTE}; events.jsonl and the manifest count both reports."]
    out += clock_lines(parts)
    budget = CHART_FRAMES_BUDGET
    for part in parts:
        out += ["", f"## {md_text(part.node)}", ""]
        if part.run_end is not None:
            # From a journal: whether the recording ends at a clean stop or at a crash.
            out += [md_text(part.run_end), ""]
        out += _collectors_section(part)
        out += _alarms_section(part)
        out += _window_alarms_section(part)
        if part.history is None:
            # Its events come with its history: "no events" would say the node was quiet.
            why = "see its error in the table above" if part.error else "its journal was not available"
            out += [f"No series and no events: the node's history is not in the bundle ({why}).", ""]
            continue
        out += _events_section(part)
        charted = chart_history(part, part.history, budget)
        if charted is not part.history:
            budget -= part.frame_count
        span = charted_span(charted)
        out += _series_lines(part, charted, span)
        for spec in CHARTS:
            drawn = render_chart(charted, spec, span)
            if drawn is not None:
                chart, legend = drawn
                out += [f"### {spec.title}", "", "```", chart, "```", "", *legend, ""]
    # Names, messages and errors come from agents and journals: REPORT.md is read with
    # `cat` in a terminal as often as in a viewer, so it carries no terminal control (and, in a
    # viewer, no Markdown of theirs: each is written through `md_text` where it goes in).
    return clean_lines("\n".join(out).rstrip()) + "\n"


#: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024"
_NVRM_VERSION = lazy_compile(r"Kernel Module\s+(\S+)")


def nvidia_driver(files: dict[str, str]) -> str | None:
    """The NVIDIA kernel driver's version from a node's captures (``sys/module/nvidia/version``, else the
    first line of ``proc/driver/nvidia/version``); ``None`` without them (no NVIDIA driver, a journal)."""
    captured = {path.lstrip("/"): text for path, text in files.items()}
    version = captured.get("sys/module/nvidia/version", "").strip()
    if version:
        return version
    found = _NVRM_VERSION.search(captured.get("proc/driver/nvidia/version", "").split("\n", 1)[0])
    return found.group(1) if found else None


def _collectors_section(part: NodePart) -> list[str]:
    if part.latest is None:
        return []
    lines = ["| collector | state | error |", "|---|---|---|"]
    for name, status in part.latest.collectors.items():
        lines.append(f"| {md_text(name)} | {md_text(status.state)} | {md_text(status.error or '')} |")
    return lines + [""]


def _alarms_section(part: NodePart) -> list[str]:
    """The alarms active when the agent was pulled (or, from a journal, when it last saved them): an
    incident that began before the window (its events outside it) still firing must not read as a quiet node."""
    if part.alarms is None:
        return []
    when = ("when the snapshot was taken" if part.alarms_saved_at is None else
            f"when the agent last saved its alarm state ({_stamp(part.alarms_saved_at)}; "
            "read from its state directory)")
    if not part.alarms:
        return [f"No alarm active {when}.", ""]
    lines = [f"Alarms active {when}:", "", "| alarm | severity | state | subject | since | message |",
             "|---|---|---|---|---|---|"]
    for a in part.alarms:
        acked = f" (acknowledged by {md_text(a.acknowledged_by or '?')})" if a.acknowledged_at is not None else ""
        lines.append(f"| {md_text(a.rule)} | {md_text(a.severity)} | {md_text(a.state)}{acked} | "
                     f"{md_text(a.subject)} | {_stamp(a.started_at)} | {md_text(a.message)} |")
    return lines + [""]


@dataclass(slots=True)
class _Episode:
    """One alarm of the window, from its ``alarm_*`` events: when it fired and when (and why) it ended."""

    first: Event
    fired_at: float | None = None
    worst: EventValue = None
    ended_at: float | None = None
    reason: str | None = None
    message: str = ""
    """The alarm's message as its latest ``alarm_*`` event said it (without the ``"<rule> <change>: "``)."""
    count: int = 1
    """How many events an event alarm counted (its latest ``alarm_repeated``'s ``count``)."""


def window_alarms(events: Sequence[Event]) -> list[_Episode]:
    """The alarms that fired in the window or ended in it, in the order they fired (those that fired
    before the window first): a pending alarm that never fired is left out."""
    episodes: dict[str, _Episode] = {}
    pending_only: set[str] = set()
    for e in sorted(events, key=lambda e: e.at):
        alarm_id = e.data.get("alarm_id")
        if not e.kind.startswith("alarm_") or not isinstance(alarm_id, str):
            continue
        episode = episodes.setdefault(alarm_id, _Episode(e))
        if e.kind != "alarm_acknowledged":
            episode.message = event_text(e, str(e.data.get("rule")), e.kind.removeprefix("alarm_"))
        if e.kind == "alarm_repeated":
            # An event alarm counted a further event (a second unclean shutdown): its message and count
            # move on; one whose firing came before the window is firing since before it.
            count = e.data.get("count")
            episode.count = count if isinstance(count, int) and count > episode.count else episode.count
            episode.worst = e.data.get("value", episode.worst)
        elif e.kind == "alarm_pending":
            pending_only.add(alarm_id)
        elif e.kind == "alarm_firing" and episode.fired_at is None:
            episode.fired_at = e.at
            episode.first = e
            episode.worst = e.data.get("value")
            pending_only.discard(alarm_id)
        elif e.kind == "alarm_resolved":
            episode.ended_at = e.at
            # Its value is the episode's worst (the lowest rail minimum), as the firing's may not be.
            episode.worst = e.data.get("value", episode.worst)
            reason = e.data.get("reason")
            episode.reason = reason if isinstance(reason, str) else None
    kept = [ep for alarm_id, ep in episodes.items() if alarm_id not in pending_only
            and (ep.fired_at is not None or ep.ended_at is not None or ep.count > 1)]
    return sorted(kept, key=lambda ep: -1.0 if ep.fired_at is None else ep.fired_at)


def _window_alarms_section(part: NodePart) -> list[str]:
    """Every alarm of the window with its end, so a reader sees how long the rail stayed low, not only
    that it went low (its resolution is an info event, left out of the events listed below)."""
    episodes = window_alarms(part.events)
    if not episodes:
        return []
    lines = ["Alarms of the window (fired, ended and how long they lasted):", "",
             "| alarm | severity | subject | fired | ended | lasted | value | message |",
             "|---|---|---|---|---|---|---|---|"]
    for ep in episodes[-MAX_ALARMS_LISTED:]:
        data = ep.first.data
        fired = "before the window" if ep.fired_at is None else _stamp(ep.fired_at)
        if ep.ended_at is None:
            ended, lasted = "still firing at the window's end", "-"
        else:
            ended = _stamp(ep.ended_at) + (f" ({md_text(ep.reason)})" if ep.reason else "")
            lasted = "-" if ep.fired_at is None else f"{ep.ended_at - ep.fired_at:.0f} s"
        value = "-" if ep.worst is None else ep.worst if isinstance(ep.worst, str) else json.dumps(ep.worst)
        lines.append(f"| {md_text(data.get('rule'))} | {md_text(data.get('severity'))} | {md_text(ep.first.subject)} | "
                     f"{fired} | {ended} | {lasted} | {md_text(value)} | {md_text(ep.message)} |")
    if len(episodes) > MAX_ALARMS_LISTED:
        lines += ["", f"({len(episodes) - MAX_ALARMS_LISTED} earlier alarms not listed: see events.jsonl)"]
    return lines + [""]


def counted_events(events: Sequence[Event]) -> tuple[Event, ...]:
    """A node's events (oldest first) as REPORT.md counts and lists them: an Xid that NVML and the kernel log
    both reported is one event (`merge_xid_events`, as the dashboard shows it), though events.jsonl keeps both."""
    return merge_xid_events(events)


def _events_section(part: NodePart) -> list[str]:
    events = part.events
    if not events:
        return ["No events in the window.", ""]
    # One Xid once, naming its sources, as the dashboard lists it: the agent keeps NVML's report and the
    # kernel log's (events.jsonl has both), and counting or listing the two read as two Xids.
    counted = counted_events(events)
    kinds = Counter((e.kind, e.severity) for e in counted)
    lines = ["| event | severity | count |", "|---|---|---|"]
    lines += [f"| {md_text(kind)} | {md_text(sev)} | {n} |" for (kind, sev), n in sorted(kinds.items())]
    reports = sum(e.kind == "xid" for e in events)
    xids = sum(e.kind == "xid" for e in counted)
    if xids < reports:
        lines += ["", f"`xid`: {XID_PAIR_NOTE} ({xids} Xid{'' if xids == 1 else 's'}, {reports} reports in "
                      "events.jsonl)."]
    # The events the dashboard's chart and incident timeline show (`notable_event`): the job's own
    # marks ("epoch 3 checkpoint") say what it was doing when the hardware failed, and a worker's
    # exit after the hardware trouble is the run's end even when its exit code was not seen.
    notable = [e for e in counted if notable_event(e)]
    if notable:
        lines += ["", ("Warnings and critical events (alarms included), the job's marks and its processes' exits "
                       "after hardware trouble, latest last:"), ""]
        lines += [_event_line(e) for e in notable[:FIRST_EVENTS_LISTED]]
        if len(notable) > MAX_EVENTS_LISTED:
            # The first of an incident is its cause as often as the last is its end: both are listed,
            # and what is left out between them is said, not dropped without a word.
            left_out = len(notable) - MAX_EVENTS_LISTED
            lines.append(f"- ({left_out} events between these not listed: see the node's events.jsonl)")
        lines += [_event_line(e) for e in notable[FIRST_EVENTS_LISTED:][-(MAX_EVENTS_LISTED - FIRST_EVENTS_LISTED):]]
    return lines + [""]


def _event_line(e: Event) -> str:
    return f"- {_stamp(e.at)} **{md_text(e.severity)}** {md_code(e.kind)} {md_text(e.subject)}: {md_text(e.message)}"
