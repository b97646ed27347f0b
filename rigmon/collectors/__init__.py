"""Collectors, one module per source, and the explicit registry the agent builds them from."""

from __future__ import annotations

from rigmon.collectors.amd_gpu import make_amd_gpu_collector
from rigmon.collectors.base import CollectorFactory
from rigmon.collectors.disks import make_disk_collector
from rigmon.collectors.gpu import make_gpu_collector
from rigmon.collectors.gpu_processes import make_gpu_process_collector
from rigmon.collectors.host import make_host_collector
from rigmon.collectors.hwmon_power import make_hwmon_power_collector
from rigmon.collectors.infiniband import make_infiniband_collector
from rigmon.collectors.kernel_log import make_kernel_log_collector
from rigmon.collectors.nvme import make_nvme_collector
from rigmon.collectors.peer_probes import make_peer_probe_collector
from rigmon.collectors.psu import make_psu_collector
from rigmon.collectors.raid import make_raid_collector
from rigmon.collectors.thunderbolt import make_thunderbolt_collector

#: Every collector the agent knows, by name. Order is the order of the node screen.
REGISTRY: dict[str, CollectorFactory] = {
    "host": make_host_collector,
    "disks": make_disk_collector,
    "raid": make_raid_collector,
    "nvme": make_nvme_collector,
    "thunderbolt": make_thunderbolt_collector,
    "infiniband": make_infiniband_collector,
    "peer_probes": make_peer_probe_collector,
    "gpu": make_gpu_collector,
    "gpu_processes": make_gpu_process_collector,
    "amd_gpu": make_amd_gpu_collector,
    "kernel_log": make_kernel_log_collector,
    "psu": make_psu_collector,
    "psu_hwmon": make_hwmon_power_collector,
}
