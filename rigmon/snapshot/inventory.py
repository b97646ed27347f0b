"""A bundle's ``inventory.json``: what a node is made of (models, serials, firmware, capabilities), no readings.

A record's strings are not all facts: ``temp_warning_reason``, ``lost_reason``, an array's
``sync_action`` or a process's command line change from one minute to the next, and a link's
current width is a reading where its maximum width is a fact. So the facts are named here, per
record type (`FACTS`), and nothing else enters the inventory: a field a record gains later is
left out until it is named. A record type holding no fact maps to ``()`` and is left out; every
record type a frame carries must be in `FACTS` (a test holds it to the schema), so a new source
is a decision, not a silent default.

A device's facts come from the newest frame of the window that read them: a GPU that fell off the bus
is still listed in the latest frame, by its identity alone (its maximum PCIe width, clocks and memory
are null there), and a bug report about it needs exactly those facts (`facts_read_earlier`).
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from itertools import chain
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
    Readings,
    SchemaError,
    RaidMemberReading,
    RdmaHwCounterReading,
    TemperatureReading,
    ThunderboltDeviceReading,
    VoltageEnvelope,
    decode,
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


#: The fields naming one device from frame to frame, the first of them that is not null: what stays with
#: the device when its name moves (a GPU's NVML index after a GPU is gone, an NVMe's controller number
#: after a re-plug). A record type not named here is known by its first fact (a sensor, an interface).
IDENTITY: dict[type[Record], tuple[str, ...]] = {
    GpuReading: ("uuid", "serial", "pci_bus_id", "index"),
    NvmeReading: ("serial", "name"),
    ThunderboltDeviceReading: ("unique_id", "name"),
    AmdGpuReading: ("pci_bus_id", "card"),
}

#: A device of a frame: the readings field holding it and its identity (field name and value, `IDENTITY`).
DeviceKey = tuple[str, tuple[str, object]]


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


def _identity(record: Record) -> tuple[str, object]:
    """The field and value naming ``record``'s device (`IDENTITY`); ``("", None)`` when all are null."""
    for name in IDENTITY.get(type(record), FACTS[type(record)][:1]):
        value = getattr(record, name)
        if value is not None:
            return name, value
    return "", None


def _known(record: Record) -> int:
    """How many of ``record``'s facts it holds (neither null nor an empty list)."""
    return sum(getattr(record, name) not in (None, ()) for name in FACTS[type(record)])


def _devices(readings: Readings, fields: set[str] | None = None) -> dict[DeviceKey, Record]:
    """The records of ``readings`` whose type holds facts (of ``fields`` only, when given), by device."""
    out: dict[DeviceKey, Record] = {}
    for name in readings.__struct_fields__ if fields is None else sorted(fields):
        value = getattr(readings, name)
        for record in value if isinstance(value, tuple) else () if value is None else (value,):
            if isinstance(record, Record) and FACTS.get(type(record)):
                out[(name, _identity(record))] = record
    return out


def _frames(frames_gz: bytes) -> Iterator[Frame]:
    """The frames of a bundle's ``frames.jsonl.gz`` (gzip members of wire JSON lines), oldest first, read
    as they decompress; a line that does not decode is skipped, a stream that does not decompress ends."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(frames_gz)) as lines:
            for raw in lines:
                try:
                    yield decode(Frame, raw)
                except SchemaError:
                    continue
    except (OSError, EOFError, zlib.error):
        return


def facts_read_earlier(latest: Frame, frames_gz: bytes) -> dict[DeviceKey, tuple[Record, Frame]]:
    """The devices of ``latest`` holding fewer facts than an earlier frame of the window read, each with its
    record from the newest frame holding the most of them (and that frame).

    A GPU lost since is one (the latest frame names it, every reading and limit null); a device that lacks a
    fact everywhere (a sensor without a critical limit) is not. Only a device holding more facts in the
    window's oldest frame, or not there yet, is looked for: the other frames are decoded for it alone, not
    for every snapshot of a node with such a sensor.
    """
    short = {key: known for key, record in _devices(latest.readings).items()
             if (known := _known(record)) < len(FACTS[type(record)])}
    frames = _frames(frames_gz) if short and frames_gz else iter(())
    oldest = next(frames, None)
    if oldest is None:
        return {}
    then = _devices(oldest.readings, {field for field, _ in short})
    wanted = {key: known for key, known in short.items() if key not in then or _known(then[key]) > known}
    best: dict[DeviceKey, tuple[int, Record, Frame]] = {}
    for frame in chain((oldest,), frames) if wanted else ():
        devices = _devices(frame.readings, {field for field, _ in wanted})
        for key, known_now in wanted.items():
            record = devices.get(key)
            # Newest first among equals: the frames come oldest first.
            if record is not None and (known := _known(record)) > known_now and known >= best.get(key, (0,))[0]:
                best[key] = (known, record, frame)
    return {key: (record, frame) for key, (_, record, frame) in best.items()}


def inventory(info: Info | None, latest: Frame | None, frames_gz: bytes = b"") -> dict[str, Any]:
    """What the node is made of, from its identity and its latest frame (and the window's earlier frames).

    Args:
        info: ``/v1/info`` (or a journal's record of it).
        latest: the node's latest frame.
        frames_gz: the window's frames (`NodePart.frames_gz`): a device the latest frame holds fewer facts
            of than an earlier one read (a GPU lost since) takes them from the newest frame that read them
            (`facts_read_earlier`).

    Returns:
        ``info`` (``/v1/info``); with a frame, ``readings``: for each field of the frame's readings
        whose record type holds facts, each record's facts (a list for many records), a record whose
        facts come from an earlier frame with ``facts_from``: that frame's ``taken_at``, ``run_id`` and
        ``seq``; ``absent``: the collectors whose hardware the node does not have; ``taken_at``: the
        latest frame's time.
    """
    out: dict[str, Any] = {"info": to_data(info) if info else None}
    if latest is None:
        return out
    earlier = facts_read_earlier(latest, frames_gz)

    def facts(name: str, record: Record) -> dict[str, Any]:
        found = earlier.get((name, _identity(record)))
        if found is None:
            return record_facts(record)
        read, frame = found
        return {**record_facts(read),
                "facts_from": {"taken_at": frame.taken_at, "run_id": frame.run_id, "seq": frame.seq}}

    items: dict[str, Any] = {}
    for name in latest.readings.__struct_fields__:
        value = getattr(latest.readings, name)
        if isinstance(value, Record) and FACTS.get(type(value)):
            items[name] = facts(name, value)
        elif isinstance(value, tuple) and value and FACTS.get(type(value[0])):
            items[name] = [facts(name, v) for v in value]
    out["readings"] = items
    out["absent"] = sorted(name for name, status in latest.collectors.items() if status.state == "absent")
    out["taken_at"] = latest.taken_at
    return out
