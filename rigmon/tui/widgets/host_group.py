"""HostGroup: the node screen's box for CPU, memory, load and temperatures."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from rigmon.cluster.sensor_names import temperature_names
from rigmon.schema import Frame, TemperatureReading
from rigmon.tui import format as fmt
from rigmon.tui.text import plain
from rigmon.tui.widgets.source_group import Level, SourceGroup


def sensor_temp(sensor: TemperatureReading) -> tuple[str, Level | None]:
    """``42 °C``; against its critical limit (``bad``) or its high limit (``warn``) when at or over
    it (``82 °C ≥ 81.85``: an NVMe drive over its warning temperature throttles)."""
    if sensor.crit_c is not None and sensor.temp_c >= sensor.crit_c:
        return fmt.temp_at_limit(sensor.temp_c, sensor.crit_c), "bad"
    if sensor.max_c is not None and sensor.temp_c >= sensor.max_c:
        return fmt.temp_at_limit(sensor.temp_c, sensor.max_c), "warn"
    return fmt.temp(sensor.temp_c), None


class HostGroup(SourceGroup):
    """CPU and network trends, load, memory, uptime and temperature sensors (interfaces are under Links)."""

    TITLE: ClassVar[str] = "Host"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("host",)

    def body(self, frame: Frame) -> RenderableType | None:
        readings = frame.readings
        host = readings.host
        if host is None and not readings.net and not readings.temperatures:
            return None
        label = self.get_component_rich_style("source-group--label", partial=True)
        parts: list[RenderableType] = []
        cpu = host.cpu_pct if host else None
        parts.append(self.trend("CPU", "cpu_pct", "max", fmt.pct(cpu)))
        net = [r for n in readings.net if n.name != "lo" for r in (n.rx_bytes_per_s, n.tx_bytes_per_s) if r is not None]
        parts.append(self.trend("net", "net_bytes_per_s", "max", fmt.rate(sum(net) if net else None)))
        if host is not None:
            facts = Table.grid(padding=(0, 2))
            for _ in range(4):
                facts.add_column(no_wrap=True)
            used = (host.mem_total_bytes - host.mem_available_bytes
                    if host.mem_total_bytes is not None and host.mem_available_bytes is not None else None)
            load = " ".join(fmt.number(v) for v in (host.load_1, host.load_5, host.load_15))
            facts.add_row(Text("load", style=label), load,
                          Text("memory", style=label), f"{fmt.size(used)} of {fmt.size(host.mem_total_bytes)}")
            facts.add_row(Text("CPUs", style=label), fmt.MISSING if host.cpu_count is None else str(host.cpu_count),
                          Text("uptime", style=label), fmt.age(host.uptime_s))
            parts.append(facts)
        if readings.temperatures:
            temps = Table.grid(padding=(0, 2))
            temps.add_column(no_wrap=True)
            temps.add_column(justify="right", no_wrap=True)
            names = temperature_names(readings.temperatures, readings.nvme)
            for sensor, name in zip(readings.temperatures, names, strict=True):
                temps.add_row(plain(name, label), self.styled(*sensor_temp(sensor)))
            parts.append(temps)
        return Group(*parts)
