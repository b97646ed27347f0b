"""RdmaGroup: the node screen's box for RDMA ports (InfiniBand, RoCE, iWARP)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text

from rigmon.schema import Frame, InfinibandPortReading
from rigmon.tui import format as fmt
from rigmon.tui.text import plain
from rigmon.tui.widgets.source_group import NARROW_WIDTH, Column, Level, SourceGroup

_LEVELS: dict[str, Level | None] = {"ok": "ok", "degraded": "bad", "down": "bad", "unused": None, "unknown": None}


def port_state(port: InfinibandPortReading) -> str:
    """``ACTIVE``, ``DOWN (Polling)``, with the judgement when it is not ``ok``."""
    text = port.state or fmt.MISSING
    if port.phys_state and port.phys_state != "LinkUp":
        text += f" ({port.phys_state})"
    if port.link_state != "ok":
        text += f", {port.link_state}"
        if port.degraded_reason:
            text += f": {port.degraded_reason}"
    return text


class RdmaGroup(SourceGroup):
    """Every RDMA port: link layer, state, rate against expected, traffic, error and link-down counts."""

    TITLE: ClassVar[str] = "RDMA ports"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("infiniband",)

    def body(self, frame: Frame) -> RenderableType | None:
        ports = frame.readings.infiniband
        if not ports:
            return None
        columns = (Column("port"), Column("layer", optional=True), Column("rate", True),
                   Column("expected", True, optional=True), Column("rx", True), Column("tx", True),
                   Column("errors", True), Column("downed", True), Column("state", wrap=True))
        rows: list[list[RenderableType]] = []
        for port in ports:
            level = _LEVELS.get(port.link_state)
            layer = {"InfiniBand": "IB", "Ethernet": "RoCE"}.get(port.link_layer or "", port.link_layer)
            expected = fmt.gbps(port.expected_gbps)
            if port.expected_source == "config" and self.content_size.width >= NARROW_WIDTH:
                expected += " (config)"
            errors = port.errors_total
            rising = port.errors_per_s is not None and port.errors_per_s > 0
            rows.append([
                plain(port.name),
                plain(layer),
                self.styled(fmt.gbps(port.rate_gbps), "bad" if port.link_state == "degraded" else None),
                expected,
                fmt.rate(port.port_data_received_bytes_per_s),
                fmt.rate(port.port_data_transmitted_bytes_per_s),
                Text(fmt.MISSING) if errors is None else self.styled(str(errors), "bad" if rising else None),
                Text(fmt.MISSING) if port.link_downed_total is None else Text(str(port.link_downed_total)),
                self.styled(port_state(port), level),
            ])
        return self.table(columns, rows)
