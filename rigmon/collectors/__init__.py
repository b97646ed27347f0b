"""Collectors, one module per source, and the explicit registry the agent builds them from."""

from __future__ import annotations

import importlib

from rigmon.collectors.base import Collector, CollectorContext, CollectorFactory


def _factory(module: str, name: str) -> CollectorFactory:
    """The factory ``name`` of ``rigmon.collectors.<module>``, that module imported when it first builds one.

    An agent imports the modules of the collectors it builds, not of those its configuration
    disables (``[collectors.<name>] enabled = false``).
    """

    def build(ctx: CollectorContext) -> Collector:
        factory: CollectorFactory = getattr(importlib.import_module(f"rigmon.collectors.{module}"), name)
        return factory(ctx)

    build.__name__ = build.__qualname__ = name
    return build


#: Every collector the agent knows, by name. Order is the order of the node screen.
REGISTRY: dict[str, CollectorFactory] = {
    "host": _factory("host", "make_host_collector"),
    "disks": _factory("disks", "make_disk_collector"),
    "raid": _factory("raid", "make_raid_collector"),
    "nvme": _factory("nvme", "make_nvme_collector"),
    "thunderbolt": _factory("thunderbolt", "make_thunderbolt_collector"),
    "infiniband": _factory("infiniband", "make_infiniband_collector"),
    "peer_probes": _factory("peer_probes", "make_peer_probe_collector"),
    "gpu": _factory("gpu", "make_gpu_collector"),
    "gpu_processes": _factory("gpu_processes", "make_gpu_process_collector"),
    "amd_gpu": _factory("amd_gpu", "make_amd_gpu_collector"),
    "kernel_log": _factory("kernel_log", "make_kernel_log_collector"),
    "psu": _factory("psu", "make_psu_collector"),
    "psu_hwmon": _factory("hwmon_power", "make_hwmon_power_collector"),
}
