"""A bundle's ``inventory.json``: what a node is made of (models, serials, firmware, capabilities), no readings.

A record's strings are not all facts: ``temp_warning_reason``, ``lost_reason``, an array's
``sync_action`` or a process's command line change from one minute to the next, and a link's
current width is a reading where its maximum width is a fact. So the facts are named here, per
record type (`FACTS`), and nothing else enters the inventory: a field a record gains later is
left out until it is named. A record type holding no fact maps to ``()`` and is left out; every
record type a frame carries must be in `FACTS` (a test holds it to the schema), so a new source
is a decision, not a silent default.
"""

from __future__ import annotations

from typing import Any

from rigmon.schema import (
    AmdGpuReading,
    CurrentEnvelope,
    DiskReading,
    Frame,
    GpuProcessReading,
    GpuReading,
    GuardGpuSettings,
    GuardReading,
    HostReading,
    HwmonVoltageReading,
    InfinibandPortReading,
    Info,
    KernelLogLine,
    KernelLogReading,
    NetInterfaceReading,
    NvLinkReading,
    NvmeReading,
    PathResistanceReading,
    PeerPathReading,
    PmbusPsuReading,
    ProbeResponderReading,
    PsuAdcCounters,
    PsuRailReading,
    RaidArrayReading,
    RaidMemberReading,
    RdmaHwCounterReading,
    TemperatureReading,
    ThunderboltDeviceReading,
    VoltageEnvelope,
)
from rigmon.schema.record import Record
from rigmon.typed import to_data

#: The fact fields of each record type, in the order they are written. A field naming a record (or a
#: tuple of them) holds that record's own facts. Limits a device or its driver sets (an NVMe's
#: ``temp_crit_c``, a link's maximum width and speed, a GPU's default power limit) are facts; what it
#: reads, counts, negotiates or is set to now (current link width, power limit, state, reasons) is not.
FACTS: dict[type[Record], tuple[str, ...]] = {
    HostReading: ("cpu_count", "mem_total_bytes", "swap_total_bytes"),
    TemperatureReading: ("sensor", "label", "max_c", "crit_c"),
    NetInterfaceReading: ("name", "kind", "mtu"),
    DiskReading: ("name", "major", "minor"),
    RaidArrayReading: ("name", "md_name", "level", "uuid", "raid_disks", "size_bytes", "chunk_bytes", "members"),
    RaidMemberReading: ("name", "slot", "device"),
    NvmeReading: ("name", "model", "serial", "firmware", "transport", "address", "namespaces", "md_arrays",
                  "max_link_speed_gts", "max_link_width", "max_link_gen", "port_max_link_speed_gts",
                  "port_max_link_width", "temp_max_c", "temp_crit_c"),
    ThunderboltDeviceReading: ("name", "kind", "domain", "vendor", "device_name", "generation", "unique_id",
                               "nvm_version"),
    GpuReading: ("index", "uuid", "name", "serial", "pci_bus_id", "pci_bus_id_nvml", "pci_bus_id_xid",
                 "mem_total_bytes", "power_limit_default_w", "clock_max_sm_mhz", "clock_max_mem_mhz",
                 "clock_max_graphics_mhz", "pcie_gen_max", "pcie_width_max", "nvlinks"),
    NvLinkReading: ("link",),
    AmdGpuReading: ("card", "pci_bus_id", "vram_total_bytes"),
    PsuRailReading: ("port", "protocol", "device_id", "firmware", "sensor"),
    HwmonVoltageReading: ("sensor", "chip", "label", "min_volts", "max_volts"),
    PmbusPsuReading: ("sensor", "chip"),
    InfinibandPortReading: ("name", "device", "port", "link_layer", "hca_type", "board_id", "fw_version"),
    # Readings, counters, running processes, the guard's actions, probes and fits: no facts.
    KernelLogReading: (),
    KernelLogLine: (),
    VoltageEnvelope: (),
    CurrentEnvelope: (),
    PsuAdcCounters: (),
    PathResistanceReading: (),
    GpuProcessReading: (),
    GuardReading: (),
    GuardGpuSettings: (),
    RdmaHwCounterReading: (),
    PeerPathReading: (),
    ProbeResponderReading: (),
}


def record_facts(record: Record) -> dict[str, Any]:
    """The facts of one record (`FACTS`), nested records by their own facts; ``{}`` for a type not named."""
    out: dict[str, Any] = {}
    for name in FACTS.get(type(record), ()):
        value = getattr(record, name)
        if isinstance(value, Record):
            out[name] = record_facts(value)
        elif isinstance(value, tuple) and value and all(isinstance(v, Record) for v in value):
            out[name] = [record_facts(v) for v in value]
        else:
            out[name] = to_data(value)
    return out


def inventory(info: Info | None, latest: Frame | None) -> dict[str, Any]:
    """What the node is made of, from its identity and its latest frame.

    Returns:
        ``info`` (``/v1/info``); with a frame, ``readings``: for each field of the frame's readings
        whose record type holds facts, each record's facts (a list for many records);
        ``absent``: the collectors whose hardware the node does not have; ``taken_at``: the frame's time.
    """
    out: dict[str, Any] = {"info": to_data(info) if info else None}
    if latest is None:
        return out
    items: dict[str, Any] = {}
    for name in latest.readings.__struct_fields__:
        value = getattr(latest.readings, name)
        if isinstance(value, Record) and FACTS.get(type(value)):
            items[name] = record_facts(value)
        elif isinstance(value, tuple) and value and FACTS.get(type(value[0])):
            items[name] = [record_facts(v) for v in value]
    out["readings"] = items
    out["absent"] = sorted(name for name, status in latest.collectors.items() if status.state == "absent")
    out["taken_at"] = latest.taken_at
    return out
