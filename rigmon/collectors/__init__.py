"""Collectors, one module per source, and the explicit registry the agent builds them from."""

from __future__ import annotations

from rigmon.collectors.base import CollectorFactory
from rigmon.collectors.host import make_host_collector
from rigmon.collectors.hwmon_power import make_hwmon_power_collector
from rigmon.collectors.psu import make_psu_collector

#: Every collector the agent knows, by name. Order is the order of the node screen.
REGISTRY: dict[str, CollectorFactory] = {
    "host": make_host_collector,
    "psu": make_psu_collector,
    "psu_hwmon": make_hwmon_power_collector,
}
