"""RailGroup: the node screen's box for the 12 V rail: ADC envelope, path resistance, PMBus PSUs, hwmon voltages."""

from __future__ import annotations

from dataclasses import fields
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from rigmon.cluster.summary import RAIL_CRITICAL_VOLTS, RAIL_WARN_VOLTS
from rigmon.schema import Frame, PsuAdcCounters, PsuRailReading
from rigmon.tui import format as fmt
from rigmon.tui.widgets.source_group import Column, Level, SourceGroup

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
    values = {f.name: getattr(counters, f.name) for f in fields(counters)}
    return [f"{name} {values[key]}" for key, name in DROPPED.items() if values.get(key)]


class RailGroup(SourceGroup):
    """Rail minimum (min-keeping trend) and mean, current, the ADC's connection and
    dropped-line counters, path resistance and its trend, PMBus PSUs with current share,
    and hwmon voltage inputs."""

    TITLE: ClassVar[str] = "PSU rail"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("psu", "psu_hwmon")

    def body(self, frame: Frame) -> RenderableType | None:
        readings = frame.readings
        rail = readings.psu_rail
        if rail is None and not readings.pmbus_psus and not readings.hwmon_volts and not readings.path_resistance:
            return None
        parts: list[RenderableType] = []
        if rail is not None:
            parts.extend(self._rail(rail))
        for path in readings.path_resistance:
            parts.append(self.trend(
                "path", "", "max",
                fmt.MISSING if path.resistance_mohm is None else f"{path.resistance_mohm:.3f} mΩ",
                self.details.get(f"path[{path.path}].resistance_mohm", ())))
            trend = fmt.MISSING if path.trend_mohm_per_day is None else f"{path.trend_mohm_per_day:+.3f} mΩ/day"
            rising = path.trend_mohm_per_day is not None and path.trend_mohm_per_day > 0
            line = Text.assemble(
                self.label("            "),
                f"{path.path} {path.method.replace('_', ' ')}, ± {fmt.number(path.uncertainty_mohm, 3)} mΩ, "
                f"{path.points} points; trend ", (trend, self.style_of("warn") if rising else ""),
                f" over {path.trend_days:.1f} d; baseline {fmt.number(path.baseline_mohm, 3)} mΩ")
            parts.append(line)
        if readings.pmbus_psus:
            parts.append(self._pmbus(frame))
        if readings.hwmon_volts:
            parts.append(self._hwmon(frame))
        return Group(*parts)

    def _rail(self, rail: PsuRailReading) -> list[RenderableType]:
        volts = rail.volts
        low = volts.min_volts if volts else None
        parts: list[RenderableType] = [
            self.trend("rail min", "rail_min_volts", "min", self.styled(fmt.rail(low), rail_level(low))),
            self.trend("rail mean", "", "min", fmt.rail(volts.mean_volts if volts else None),
                       self.details.get("rail.mean_volts", ())),
        ]
        facts = Table.grid(padding=(0, 2))
        for column in range(4):
            # Labels stay whole; values wrap on a narrow screen rather than lose their end.
            facts.add_column(no_wrap=column % 2 == 0)
        window = (f"min {fmt.rail(volts.min_volts)}  mean {fmt.rail(volts.mean_volts)}  max {fmt.rail(volts.max_volts)}"
                  if volts else fmt.MISSING)
        amps = rail.amps
        current = (f"{amps.mean_amps:.1f} A (max {amps.max_amps:.1f} A)" if amps else fmt.MISSING)
        facts.add_row(self.label("window"), window, self.label("current"), current)
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
        facts.add_row(self.label("channels"), others or fmt.MISSING, self.label("flags"), flag_text)
        state = self.styled("connected", "ok") if rail.connected else self.styled("disconnected", "bad")
        source = "device min/max" if rail.envelope_source == "device" else "host samples (short sags invisible)"
        facts.add_row(self.label("ADC"), Text.assemble(f"{rail.port} {rail.protocol} ", state),
                      self.label("envelope"), source)
        counters = rail.counters
        dropped = dropped_counts(counters)
        facts.add_row(self.label("lines"), f"{counters.lines_total} lines, {counters.windows_total} windows",
                      self.label("dropped"), self.styled(", ".join(dropped), "warn") if dropped else Text("none"))
        identity = " ".join(x for x in (rail.device_id, rail.firmware, rail.sensor) if x) or fmt.MISSING
        facts.add_row(self.label("device"), identity, self.label("reconnects"),
                      f"{counters.disconnects_total} disconnects, {counters.reboots_total} reboots")
        parts.append(facts)
        return parts

    def _pmbus(self, frame: Frame) -> Table:
        columns = (Column("PSU"), Column("in V", True, optional=True), Column("out V", True), Column("out A", True),
                   Column("out W", True), Column("temp", True, optional=True), Column("share", True),
                   Column("vs equal", True), Column("alarms"))
        rows: list[list[RenderableType]] = []
        for psu in frame.readings.pmbus_psus:
            rows.append([
                f"{psu.sensor} {psu.chip}",
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
                f"{sensor.chip} {sensor.label or sensor.sensor}",
                fmt.number(sensor.volts, 3),
                fmt.number(sensor.min_volts, 3),
                fmt.number(sensor.max_volts, 3),
                self.styled("ALARM", "bad") if sensor.alarm else Text(fmt.MISSING if sensor.alarm is None else "no"),
            ])
        return self.table(columns, rows)
