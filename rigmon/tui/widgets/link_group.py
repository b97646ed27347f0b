"""LinkGroup: the node screen's box for Thunderbolt/USB4 links and network interfaces."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from rigmon.summary import nic_is_healthy, nic_is_link
from rigmon.schema import Frame, NetInterfaceReading, ThunderboltDeviceReading
from rigmon.tui import format as fmt
from rigmon.tui import gauge
from rigmon.tui.text import plain
from rigmon.tui.widgets.source_group import NARROW_WIDTH, Column, Level, SourceGroup

#: Cells of each interface's throughput sparkline.
SPARK_WIDTH = 12
#: Bytes a second of one Mb/s (a link's speed_mbps to the scale of its throughput trend).
BYTES_PER_S_PER_MBPS = 125_000


def tb_speed(device: ThunderboltDeviceReading) -> str:
    """``rx 2x10 tx 2x10 = 20 Gb/s``; one side when rx and tx agree."""
    rx = fmt.lanes(device.rx_speed_gbps, device.rx_lanes)
    tx = fmt.lanes(device.tx_speed_gbps, device.tx_lanes)
    total = device.rx_gbps if device.rx_gbps == device.tx_gbps else None
    if rx == tx:
        return f"{rx} = {fmt.gbps(total)}" if total is not None else rx
    return f"rx {rx} tx {tx}"


class LinkGroup(SourceGroup):
    """Every Thunderbolt/USB4 link (speed x lanes against expected, state and why it is
    degraded), and every network interface (kind, state, speed, throughput with its trend,
    errors, drops, stalled)."""

    TITLE: ClassVar[str] = "Links"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("thunderbolt", "host")
    PARTS: ClassVar[tuple[tuple[str, str], ...]] = (("thunderbolt", "Thunderbolt"),)

    def body(self, frame: Frame) -> RenderableType | None:
        readings = frame.readings
        if not readings.thunderbolt and not readings.net:
            return None
        parts: list[RenderableType] = []
        if readings.thunderbolt:
            parts.append(self._thunderbolt(frame))
        nics = [n for n in readings.net if n.name != "lo"]
        if nics:
            parts.append(self._nics(nics))
        return Group(*parts)

    def _thunderbolt(self, frame: Frame) -> Table:
        columns = (Column("Thunderbolt"), Column("device", optional=True), Column("gen", optional=True),
                   Column("speed x lanes"), Column("expected"), Column("state", wrap=True))
        rows: list[list[RenderableType]] = []
        for device in frame.readings.thunderbolt:
            level: Level | None = "ok" if device.link_state == "ok" else "bad" if device.link_state == "degraded" else None
            state: str = device.link_state if device.kind in ("device", "xdomain") else device.kind
            if device.degraded_reason:
                state += f": {device.degraded_reason}"
            named = " ".join(x for x in (device.vendor, device.device_name) if x) or fmt.MISSING
            expected = fmt.gbps(device.expected_gbps)
            if device.expected_source is not None and self.content_size.width >= NARROW_WIDTH:
                expected += f" ({device.expected_source.replace('_', ' ')})"
            rows.append([
                plain(device.name),
                plain(named),
                fmt.MISSING if device.generation is None else str(device.generation),
                self.styled(tb_speed(device), "bad" if device.link_state == "degraded" else None),
                expected,
                self.styled(state, level),
            ])
        return self.table(columns, rows)

    def _nics(self, nics: list[NetInterfaceReading]) -> Table:
        # The state is the one column of words: it wraps ("up," over "STALLED") so that the
        # figures stay whole at 80 columns, where the required columns are wider than the box.
        columns = (Column("interface"), Column("kind", optional=True), Column("state", wrap=True),
                   Column("speed", True),
                   Column("rx", True), Column("tx", True), Column("", width=SPARK_WIDTH, optional=True),
                   Column("errors", True), Column("drops", True))
        rows: list[list[RenderableType]] = []
        for nic in nics:
            errors = nic.rx_errors_total + nic.tx_errors_total
            drops = nic.rx_dropped_total + nic.tx_dropped_total
            state = nic.operstate or fmt.MISSING
            if nic.carrier is False:
                state += ", no carrier"
            level: Level | None = None
            if nic.stalled:
                state += ", STALLED"
                level = "bad"
            elif nic_is_link(nic):
                level = "ok" if nic_is_healthy(nic) else "bad"
            rows.append([
                plain(nic.name),
                plain(nic.kind),
                self.styled(state, level),
                fmt.MISSING if nic.speed_mbps is None else f"{nic.speed_mbps / 1000:g} Gb/s",
                fmt.rate(nic.rx_bytes_per_s),
                fmt.rate(nic.tx_bytes_per_s),
                self.sparkline(self.details.get(f"net[{nic.name}].bytes_per_s", ()), SPARK_WIDTH, "max",
                               gauge.link(None if nic.speed_mbps is None else 2 * nic.speed_mbps * BYTES_PER_S_PER_MBPS)),
                self.styled(str(errors), "bad") if errors else Text("0"),
                self.styled(str(drops), "warn") if drops else Text("0"),
            ])
        return self.table(columns, rows)
