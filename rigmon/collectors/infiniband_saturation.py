"""RDMA error counters that stop at their maximum: the PMA's PortCounters are 4 to 16 bits wide and saturate.

The InfiniBand PortCounters attribute does not wrap: a counter that reaches its width's maximum stays there
until it is cleared (``perfquery -R``). The kernel reads them at those widths (drivers/infiniband/core/sysfs.c,
``PORT_PMA_ATTR(symbol_error, 0, 16, 32)``, ``PORT_PMA_ATTR(link_downed, 2, 8, 56)``...), so a marginal link's
``symbol_error`` stops at 65535 within minutes: its errors no longer count, and a sum of them stands still.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Standard counter file -> (schema field, scale). The data counters count 4-byte words.
COUNTERS: dict[str, tuple[str, int]] = {
    "symbol_error": ("symbol_error_total", 1),
    "link_downed": ("link_downed_total", 1),
    "link_error_recovery": ("link_error_recovery_total", 1),
    "port_rcv_errors": ("port_errors_received_total", 1),
    "port_xmit_discards": ("port_discards_transmitted_total", 1),
    "port_xmit_wait": ("port_transmit_wait_total", 1),
    "local_link_integrity_errors": ("local_link_integrity_errors_total", 1),
    "excessive_buffer_overrun_errors": ("excessive_buffer_overrun_errors_total", 1),
    "port_rcv_remote_physical_errors": ("port_receive_remote_physical_errors_total", 1),
    "port_rcv_data": ("port_data_received_bytes_total", 4),
    "port_xmit_data": ("port_data_transmitted_bytes_total", 4),
    "port_rcv_packets": ("port_packets_received_total", 1),
    "port_xmit_packets": ("port_packets_transmitted_total", 1),
}
#: (Here, not in `rigmon.collectors.infiniband`, so that /metrics names them without importing the collector.)

#: Counter file -> its largest value (the counter's width in PortCounters).
COUNTER_MAX: dict[str, int] = {
    "symbol_error": 0xFFFF,
    "link_error_recovery": 0xFF,
    "link_downed": 0xFF,
    "port_rcv_errors": 0xFFFF,
    "port_rcv_remote_physical_errors": 0xFFFF,
    "port_xmit_discards": 0xFFFF,
    "local_link_integrity_errors": 0xF,
    "excessive_buffer_overrun_errors": 0xF,
}


def saturated(counters: Mapping[str, int]) -> frozenset[str]:
    """The counters of ``counters`` (file -> value) that stand at their maximum."""
    return frozenset(n for n, v in counters.items() if n in COUNTER_MAX and v >= COUNTER_MAX[n])


class SaturationWatch:
    """Which of a port's counters newly stand at their maximum: each once per saturation, again only after it
    was cleared (read below it); a read that could not read the counter changes nothing."""

    def __init__(self) -> None:
        self._saturated: dict[str, frozenset[str]] = {}

    def newly(self, key: str, counters: Mapping[str, int]) -> list[str]:
        """The counters of port ``key`` that reached their maximum since its last read of them (``counters``:
        file -> value, those this read could read), by name."""
        before = self._saturated.get(key, frozenset())
        now = saturated(counters) | {n for n in before if n not in counters}
        self._saturated[key] = now
        return sorted(now - before)

    def forget_missing(self, present: set[str]) -> None:
        """Forget ports no longer read."""
        self._saturated = {k: v for k, v in self._saturated.items() if k in present}
