"""RailGroup: the node screen's box for the 12 V rail: ADC envelope, path resistance, PMBus PSUs, hwmon voltages."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import ClassVar

import msgspec
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive

from rigmon.summary import RAIL_CRITICAL_VOLTS, RAIL_WARN_VOLTS, WORST_WINDOW_S
from rigmon.schema import Frame, PsuAdcCounters, PsuRailReading
from rigmon.tui import format as fmt
from rigmon.tui import gauge
from rigmon.tui.text import plain
from rigmon.tui.widgets.source_group import Column, Level, SourceGroup, cell_width

#: Counters of lines and windows the ADC reader dropped, with how the screen names them.
DROPPED: dict[str, str] = {
    "ignored_lines_total": "ignored",
    "partial_lines_total": "partial",
    "long_lines_total": "too long",
    "checksum_errors_total": "checksum",
    "malformed_lines_total": "malformed",
    "nonsense_lines_total": "nonsense",
    "lost_windows_total": "lost windows",
    "overrun_windows_total": "overruns",
    "read_errors_total": "read errors",
}


#: Label/value pairs per line of the rail facts when they fit; cells between grid columns.
FACT_PAIRS = 2
FACT_GAP = 2
#: Cells before the path resistance's detail line (the trend lines' label column).
PATH_INDENT = 12
#: What a /dev/serial/by-id name wraps around the part that tells adapters apart.
BY_ID_DIR = "/dev/serial/by-id/"
_BY_ID_INTERFACE = re.compile(r"-if\d+(-port\d+)?$")


def short_port(path: str) -> str:
    """The distinctive part of a ``/dev/serial/by-id/`` path: ``Raspberry_Pi_Pico_E6614103E7452D2F``
    for ``/dev/serial/by-id/usb-Raspberry_Pi_Pico_E6614103E7452D2F-if00``; other paths unchanged."""
    if not path.startswith(BY_ID_DIR):
        return path
    name = path.removeprefix(BY_ID_DIR)
    short = _BY_ID_INTERFACE.sub("", name.removeprefix("usb-"))
    return short or name


def facts_width(facts: Sequence[tuple[str, RenderableType]], pairs: int) -> int:
    """Cells a `fact_grid` of ``pairs`` label/value pairs a line takes without wrapping."""
    widths = [0] * (2 * pairs)
    for index, (label, value) in enumerate(facts):
        column = 2 * (index % pairs)
        widths[column] = max(widths[column], cell_len(label))
        widths[column + 1] = max(widths[column + 1], cell_width(value))
    return sum(widths) + FACT_GAP * (len(widths) - 1)


def fact_grid(facts: Sequence[tuple[str, RenderableType]], pairs: int,
              label: Callable[[str], Text]) -> Table:
    """``facts`` as label/value pairs, ``pairs`` a line; labels stay whole, values wrap rather than lose their end."""
    grid = Table.grid(padding=(0, FACT_GAP))
    for column in range(2 * pairs):
        grid.add_column(no_wrap=column % 2 == 0)
    for start in range(0, len(facts), pairs):
        row: list[RenderableType] = []
        for name, value in facts[start:start + pairs]:
            row += [label(name), value]
        grid.add_row(*row)
    return grid


def rail_level(volts: float | None) -> Level | None:
    """``bad`` below the critical rail minimum, ``warn`` below the warning one."""
    if volts is None:
        return None
    if volts < RAIL_CRITICAL_VOLTS:
        return "bad"
    if volts < RAIL_WARN_VOLTS:
        return "warn"
    return "ok"


def dropped_counts(counters: PsuAdcCounters) -> list[str]:
    """``checksum 3`` for every drop counter above zero, in `DROPPED` order."""
    values = msgspec.structs.asdict(counters)
    return [f"{name} {values[key]}" for key, name in DROPPED.items() if values.get(key)]


def rail_min_line(worst_volts: float | None, latest_volts: float | None) -> tuple[str, float | None]:
    """The label and figure of the rail minimum's trend line: the lowest rail minimum of the
    last `WORST_WINDOW_S` (``rail min 60s``), as the cluster row's *rail 60s*, since a figure
    beside a trend stands for its period and must show the sag; the latest ADC window's minimum
    (``rail min now``) only while the node's store has no such worst yet."""
    if worst_volts is None:
        return "rail min now", latest_volts
    return f"rail min {WORST_WINDOW_S:.0f}s", worst_volts


class RailGroup(SourceGroup):
    """Rail minimum (min-keeping trend; the worst of the last `WORST_WINDOW_S`) and the latest
    mean, current, the ADC's connection and dropped-line counters, path resistance and its trend,
    PMBus PSUs with current share, and hwmon voltage inputs."""

    TITLE: ClassVar[str] = "PSU rail"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("psu", "psu_hwmon")

    rail_worst_volts: reactive[float | None] = reactive(None)
    """Lowest rail minimum of the node's frames of the last `WORST_WINDOW_S` (the node
    summary's ``rail_worst_volts``); ``None`` when unknown."""

    def watch_rail_worst_volts(self) -> None:
        self._schedule()

    def body(self, frame: Frame) -> RenderableType | None:
        readings = frame.readings
        rail = readings.psu_rail
        # An ADC unplugged or failing has no reading while its collector errors: that is
        # news on the rail's box, not a rail "not present" on this node.
        status = frame.collectors.get("psu")
        failing = rail is None and status is not None and status.state in ("error", "hung")
        if (rail is None and not failing and not readings.pmbus_psus and not readings.hwmon_volts
                and not readings.path_resistance):
            return None
        parts: list[RenderableType] = []
        if rail is not None:
            parts.extend(self._rail(rail))
        elif failing and status is not None:
            adc = Table.grid(padding=(0, 1))
            adc.add_column(width=12, no_wrap=True)
            adc.add_column()
            adc.add_row(self.label("rail ADC"),
                        self.styled(f"no reading, collector {status.state}: {status.error or 'no error given'}", "bad"))
            parts.append(adc)
        for path in readings.path_resistance:
            parts.append(self.trend(
                "path", "", "max",
                fmt.MISSING if path.resistance_mohm is None else f"{path.resistance_mohm:.3f} mΩ",
                self.details.get(f"path[{path.path}].resistance_mohm", ())))
            trend = fmt.MISSING if path.trend_mohm_per_day is None else f"{path.trend_mohm_per_day:+.3f} mΩ/day"
            rising = path.trend_mohm_per_day is not None and path.trend_mohm_per_day > 0
            line = Text.assemble(
                f"{path.path} {path.method.replace('_', ' ')}, ± {fmt.number(path.uncertainty_mohm, 3)} mΩ, "
                f"{path.points} points; trend ", (trend, self.style_of("warn") if rising else ""),
                f" over {path.trend_days:.1f} d; baseline {fmt.number(path.baseline_mohm, 3)} mΩ")
            # Under the figure; on a narrow box it wraps there too, not back to the label column.
            indented = Table.grid()
            indented.add_column(width=PATH_INDENT, no_wrap=True)
            indented.add_column()
            indented.add_row("", line)
            parts.append(indented)
        if readings.pmbus_psus:
            parts.append(self._pmbus(frame))
        if readings.hwmon_volts:
            parts.append(self._hwmon(frame))
        return Group(*parts)

    def _rail(self, rail: PsuRailReading) -> list[RenderableType]:
        volts = rail.volts
        label, low = rail_min_line(self.rail_worst_volts, volts.min_volts if volts else None)
        parts: list[RenderableType] = [
            self.trend(label, "rail_min_volts", "min", self.styled(fmt.rail(low), rail_level(low))),
            # The latest window's mean, named so: the worst of the period is the line above.
            self.trend("mean now", "", "min", fmt.rail(volts.mean_volts if volts else None),
                       self.details.get("rail.mean_volts", ()), gauge.RAIL),
        ]
        window = (f"min {fmt.rail(volts.min_volts)}  mean {fmt.rail(volts.mean_volts)}  max {fmt.rail(volts.max_volts)}"
                  if volts else fmt.MISSING)
        amps = rail.amps
        current = (f"{amps.mean_amps:.1f} A (max {amps.max_amps:.1f} A)" if amps else fmt.MISSING)
        others = ", ".join(f"{name} {fmt.rail(env.min_volts)} min" for name, env in sorted(rail.channels_volts.items())
                           if env is not volts and name != "v")
        flags: list[tuple[str, Level]] = []
        if rail.sag:
            flags.append(("sag", "bad"))
        if rail.under_voltage_latched:
            flags.append(("under-voltage latched", "bad"))
        if rail.stale:
            flags.append(("stale", "warn"))
        flag_text = Text(", ").join(self.styled(t, lvl) for t, lvl in flags) if flags else Text("none")
        state = self.styled("connected", "ok") if rail.connected else self.styled("disconnected", "bad")
        source = "device min/max" if rail.envelope_source == "device" else "host samples (short sags invisible)"
        counters = rail.counters
        dropped = dropped_counts(counters)
        identity = " ".join(x for x in (rail.device_id, rail.firmware, rail.sensor) if x) or fmt.MISSING
        facts: list[tuple[str, RenderableType]] = [
            ("window", window), ("current", current),
            ("channels", plain(others or None)), ("flags", flag_text),
            ("ADC", Text.assemble(f"{rail.port} {rail.protocol} ", state)), ("envelope", source),
            ("lines", f"{counters.lines_total} lines, {counters.windows_total} windows"),
            ("dropped", self.styled(", ".join(dropped), "warn") if dropped else Text("none")),
            ("device", plain(identity)),
            ("reconnects", f"{counters.disconnects_total} disconnects, {counters.reboots_total} reboots"),
        ]
        width = self.content_size.width
        if width <= 0 or facts_width(facts, FACT_PAIRS) <= width:
            parts.append(fact_grid(facts, FACT_PAIRS, self.label))
            return parts
        # Too narrow for two facts a line (an 80-column terminal): one a line, and a by-id
        # port path shortened to the name that tells the adapter apart when it does not fit.
        value_width = width - max(cell_len(label) for label, _ in facts) - FACT_GAP
        if cell_width(facts[4][1]) > value_width:
            facts[4] = ("ADC", Text.assemble(f"{short_port(rail.port)} {rail.protocol} ", state))
        parts.append(fact_grid(facts, 1, self.label))
        return parts

    def _pmbus(self, frame: Frame) -> Table:
        columns = (Column("PSU"), Column("in V", True, optional=True), Column("out V", True), Column("out A", True),
                   Column("out W", True), Column("temp", True, optional=True), Column("share", True),
                   Column("vs equal", True), Column("alarms"))
        rows: list[list[RenderableType]] = []
        for psu in frame.readings.pmbus_psus:
            rows.append([
                plain(f"{psu.sensor} {psu.chip}"),
                fmt.number(psu.vin_volts, 1),
                fmt.number(psu.vout_volts, 3),
                fmt.number(psu.iout_amps, 1),
                fmt.number(psu.pout_w, 0),
                fmt.temp(psu.temp_c),
                fmt.pct(psu.share_pct),
                self.styled(fmt.signed(psu.share_deviation_pct, 1), "bad" if psu.imbalanced else None),
                self.styled(", ".join(psu.alarms), "bad") if psu.alarms else Text("none"),
            ])
        return self.table(columns, rows)

    def _hwmon(self, frame: Frame) -> Table:
        columns = (Column("voltage input"), Column("V", True), Column("min", True), Column("max", True),
                   Column("alarm", True))
        rows: list[list[RenderableType]] = []
        for sensor in frame.readings.hwmon_volts:
            rows.append([
                plain(f"{sensor.chip} {sensor.label or sensor.sensor}"),
                fmt.number(sensor.volts, 3),
                fmt.number(sensor.min_volts, 3),
                fmt.number(sensor.max_volts, 3),
                self.styled("ALARM", "bad") if sensor.alarm else Text(fmt.MISSING if sensor.alarm is None else "no"),
            ])
        return self.table(columns, rows)
