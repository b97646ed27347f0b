"""What hardware a node has, read once through the agent's own collectors (for the generated config)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from rigmon.clock import SystemClock
from rigmon.collectors import REGISTRY
from rigmon.collectors.base import Collector, CollectorContext, CollectorStarting, NoData
from rigmon.config import AgentConfig, AgentSection
from rigmon.hw.root import HostRoot
from rigmon.hw.serial_ports import SerialDevice, list_serial_devices
from rigmon.schema import (
    AmdGpuReading,
    GpuReading,
    InfinibandPortReading,
    NvmeReading,
    RaidArrayReading,
    ThunderboltDeviceReading,
)

#: Collectors whose records describe what the node has (the others are rates and state).
INVENTORY_COLLECTORS = ("gpu", "amd_gpu", "raid", "nvme", "thunderbolt", "infiniband")
#: Seconds one collector may take (an NVML call can hang in the driver).
COLLECT_TIMEOUT_S = 10.0


@dataclass
class Hardware:
    """The node's hardware as the collectors see it, and each collector's state."""

    gpus: list[GpuReading] = field(default_factory=list)
    amd_gpus: list[AmdGpuReading] = field(default_factory=list)
    arrays: list[RaidArrayReading] = field(default_factory=list)
    nvme: list[NvmeReading] = field(default_factory=list)
    thunderbolt: list[ThunderboltDeviceReading] = field(default_factory=list)
    rdma: list[InfinibandPortReading] = field(default_factory=list)
    serial: list[SerialDevice] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)
    """Collector name -> ``ok``, ``absent: why``, ``starting: why``, ``error: why`` or ``hung``."""


def _collect_once(collector: Collector, timeout_s: float) -> tuple[str, list[object]]:
    """One ``collect()`` in a daemon thread, so a hung driver call cannot hold set-up."""
    out: list[tuple[str, list[object]]] = []

    def target() -> None:
        try:
            out.append(("ok", list(collector.collect())))
        except NoData as exc:
            out.append((f"absent: {exc}" if str(exc) else "absent", []))
        except CollectorStarting as exc:
            out.append((f"starting: {exc}" if str(exc) else "starting", []))
        except Exception as exc:  # noqa: BLE001 - reported in the generated file, never fatal
            out.append((f"error: {type(exc).__name__}: {exc}", []))

    thread = threading.Thread(target=target, name=f"rigmon-setup-{collector.name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return out[0] if out else ("hung", [])


def detect_hardware(hw_root: str = "/", collectors: Sequence[str] = INVENTORY_COLLECTORS,
                    timeout_s: float = COLLECT_TIMEOUT_S) -> Hardware:
    """Read the inventory collectors once below ``hw_root``, and list serial devices."""
    root = HostRoot(hw_root)
    ctx = CollectorContext(root=root, clock=SystemClock(), config=AgentConfig(agent=AgentSection(root=hw_root)))
    hardware = Hardware(serial=list_serial_devices(root))
    for name in collectors:
        collector = REGISTRY[name](ctx)
        state, records = _collect_once(collector, timeout_s)
        if state != "hung":
            # A call stuck in the driver keeps its thread; closing under it could hang set-up too.
            collector.close()
        hardware.states[name] = state
        for record in records:
            if isinstance(record, GpuReading):
                hardware.gpus.append(record)
            elif isinstance(record, AmdGpuReading):
                hardware.amd_gpus.append(record)
            elif isinstance(record, RaidArrayReading):
                hardware.arrays.append(record)
            elif isinstance(record, NvmeReading):
                hardware.nvme.append(record)
            elif isinstance(record, ThunderboltDeviceReading):
                hardware.thunderbolt.append(record)
            elif isinstance(record, InfinibandPortReading):
                hardware.rdma.append(record)
    return hardware
