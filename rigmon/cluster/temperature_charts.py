"""The history view's temperature charts: the NVMe drives' composite temperatures and the host's sensors
by chip, each drawn against its limits, and which series a problem's subject is about."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rigmon.cluster.chart_model import Chart, Line, Threshold, indexes
from rigmon.schema import Readings

#: Lines of one temperature chart at most (the subject's and the hottest kept): as many as the chart has
#: colours for its lines, so no two share one.
MAX_TEMPERATURE_LINES = 5
#: The chart of the host's thermal zones (``x86_pkg_temp``, ``acpitz``): sensors named without a chip.
ZONES = "thermal zones"


def subject_series(subject: str) -> str | None:
    """The temperature series a problem's subject is about (`rigmon.cluster.incident.Problem.subject`):
    ``temp:<sensor>`` (a host sensor at its critical limit) that sensor's, ``nvme:<drive>`` (a drive at its
    warning temperature) that drive's composite; ``None`` for any other subject."""
    if subject.startswith("temp:"):
        return f"temperatures[{subject.removeprefix('temp:')}].temp_c"
    if subject.startswith("nvme:"):
        return f"nvme[{subject.removeprefix('nvme:')}].temp_c"
    return None


def _limits(values: Mapping[str, float], highs: Sequence[str], crits: Sequence[str]) -> tuple[Threshold, ...]:
    """The distinct high limits (warning colour) and critical limits (error colour) of the series named,
    in °C; a limit of 0 or less is none (a thermal zone's unprogrammed trip point)."""
    high = sorted({values[n] for n in highs if values.get(n, 0.0) > 0})
    crit = sorted({values[n] for n in crits if values.get(n, 0.0) > 0})
    return (tuple(Threshold(f"high {v:g} °C", v, "warn") for v in high)
            + tuple(Threshold(f"critical {v:g} °C", v, "bad") for v in crit))


def _limits_text(thresholds: Sequence[Threshold]) -> str:
    """`` · high 80, critical 100`` for the title, whose unit is °C (the lines on the chart carry no label)."""
    return f" · {', '.join(t.label.removesuffix(' °C') for t in thresholds)}" if thresholds else ""


def _chosen(keys: Sequence[str], temps: Mapping[str, float], first: str | None) -> list[str]:
    """Of ``keys`` (sensors or drives, their latest temperature in ``temps``), the `MAX_TEMPERATURE_LINES`
    a chart draws: ``first`` (the subject's) leading, then the others in their order; when they are too
    many, the hottest of them."""
    rest = [k for k in keys if k != first]
    room = MAX_TEMPERATURE_LINES - (first in keys)
    if len(rest) > room:
        hottest = set(sorted(rest, key=lambda k: -temps.get(k, float("-inf")))[:room])
        rest = [k for k in rest if k in hottest]
    return ([first] if first is not None and first in keys else []) + rest


def _chip(sensor: str) -> str:
    """The chip of a host sensor's boot-stable name (``coretemp-isa-0000`` of ``coretemp-isa-0000/Package
    id 0``), `ZONES` for a thermal zone (``x86_pkg_temp``, named by its type alone)."""
    return sensor.rpartition("/")[0] if "/" in sensor else ZONES


def nvme_chart(values: Mapping[str, float], subject: str | None) -> Chart | None:
    """The NVMe drives' composite temperatures (the highest of each point) against their warning (WCTEMP,
    where they throttle) and critical (CCTEMP) limits; ``None`` when no drive reports one."""
    drives = indexes(values, "nvme[", ".temp_c")
    if not drives:
        return None
    first = subject.removeprefix("nvme:") if subject is not None and subject.startswith("nvme:") else None
    temps = {d: values[f"nvme[{d}].temp_c"] for d in drives}
    shown = _chosen(drives, temps, first)
    limits = _limits(values, [f"nvme[{d}].temp_max_c" for d in shown], [f"nvme[{d}].temp_crit_c" for d in shown])
    return Chart("nvme_temp", f"NVMe temperature (°C): highest{_limits_text(limits)}", "°C",
                 tuple(Line(d, f"nvme[{d}].temp_c", "max") for d in shown), limits)


def host_charts(values: Mapping[str, float], subject: str | None) -> list[Chart]:
    """A chart of the host's temperature sensors per chip (`_chip`), each line labelled by the sensor's
    boot-stable name and drawing the highest of each point, against the sensors' high and critical limits."""
    sensors = indexes(values, "temperatures[", ".temp_c")
    first = subject.removeprefix("temp:") if subject is not None and subject.startswith("temp:") else None
    chips: dict[str, list[str]] = {}
    for sensor in sensors:
        chips.setdefault(_chip(sensor), []).append(sensor)
    charts = []
    for chip, members in chips.items():
        temps = {s: values[f"temperatures[{s}].temp_c"] for s in members}
        shown = _chosen(members, temps, first)
        limits = _limits(values, [f"temperatures[{s}].max_c" for s in shown],
                         [f"temperatures[{s}].crit_c" for s in shown])
        charts.append(Chart(f"temp:{chip}", f"{chip} temperatures (°C): highest{_limits_text(limits)}",
                            "°C", tuple(Line(s, f"temperatures[{s}].temp_c", "max") for s in shown), limits))
    return charts


def temperature_charts(values: Mapping[str, float], subject: str | None = None) -> list[Chart]:
    """The temperature charts a node offers from its latest frame's series: its NVMe drives', then its host
    sensors' by chip. ``subject``: the node's worst problem's; a hot sensor's or drive's line is kept, first."""
    nvme = nvme_chart(values, subject)
    return ([nvme] if nvme is not None else []) + host_charts(values, subject)


def temperature_values(readings: Readings) -> dict[str, float]:
    """What the temperature charts read of one frame, named as its series are (`rigmon.series.frame_series`,
    the agent's ``/v1/history``): each NVMe drive's ``nvme[<name>].temp_c`` with its ``temp_max_c`` and
    ``temp_crit_c``, each host sensor's ``temperatures[<sensor>].temp_c`` with its ``max_c`` and ``crit_c``.
    Read from the records themselves, not from a walk of the whole frame: the dashboard does it for every
    frame of every node (a summary record's slim frame has the drives and the sensors at their critical limit)."""
    out: dict[str, float] = {}
    for drive in readings.nvme:
        for field, value in (("temp_c", drive.temp_c), ("temp_max_c", drive.temp_max_c),
                             ("temp_crit_c", drive.temp_crit_c)):
            if value is not None:
                out[f"nvme[{drive.name}].{field}"] = value
    for sensor in readings.temperatures:
        out[f"temperatures[{sensor.sensor}].temp_c"] = sensor.temp_c
        for field, limit in (("max_c", sensor.max_c), ("crit_c", sensor.crit_c)):
            if limit is not None:
                out[f"temperatures[{sensor.sensor}].{field}"] = limit
    return out


def held_temperatures(readings: Readings) -> dict[str, float]:
    """Of one frame, the temperatures its charts draw (as `temperature_charts` chooses them: every drive, every
    sensor of a chip, the hottest `MAX_TEMPERATURE_LINES` of more), by series name: what the dashboard keeps
    of a node's temperatures, so that its history can be charted when the agent cannot answer. Chosen from
    the records without building the charts: the dashboard does it for every frame of every node."""
    drives = {f"nvme[{d.name}].temp_c": d.temp_c for d in readings.nvme if d.temp_c is not None}
    out = {name: drives[name] for name in _chosen(list(drives), drives, None)}
    chips: dict[str, dict[str, float]] = {}
    for sensor in readings.temperatures:
        chips.setdefault(_chip(sensor.sensor), {})[f"temperatures[{sensor.sensor}].temp_c"] = sensor.temp_c
    for temps in chips.values():
        out.update((name, temps[name]) for name in _chosen(list(temps), temps, None))
    return out
