"""GPUs a node had within its journal's span that it does not have now (incident 1 after an agent restart or a
reboot: the GPU that fell off the bus is in no frame of the window), from earlier frames and the GPU events,
against the latest frame. Pure: the frames and events are read by `rigmon.snapshot.gpus_gone_read`.

A GPU is known by its UUID, or by its PCI bus id when its UUID was never read; its NVML index alone names
nothing across runs (NVML numbers the GPUs it finds at each start). A GPU the latest frame lists as lost
without an identity (an agent started after the loss cannot read the UUID of a GPU that is gone) is matched
by its index, which NVML keeps until the driver is reloaded.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rigmon.schema import Event, Frame, GpuReading

#: Event kinds read for gone GPUs: the loss, and the Xids that name the GPU they concern.
GPU_EVENT_KINDS = ("gpu_lost", "xid")
#: Distinct Xid codes kept per GPU (the first reported of each, oldest first).
MAX_XIDS = 8

#: What the latest frame says of a gone GPU: not listed at all (a reboot: NVML no longer finds it), listed as
#: lost, or listed as a lost GPU of its index without an identity (an agent started after the loss: NVML still
#: counts the GPU and cannot name it).
NowState = Literal["absent", "lost", "lost_unnamed"]

#: How `gone_gpu_text` says each `NowState`.
NOW_TEXT: dict[str, str] = {
    "absent": "the latest frame does not list it (not on the bus)",
    "lost": "the latest frame lists it as lost",
    "lost_unnamed": ("the latest frame lists a lost GPU of its index without UUID or bus id (the agent started "
                     "after the loss and cannot read them): this one"),
}


@dataclass(frozen=True, slots=True)
class GoneGpu:
    """One GPU the node had within the span examined and lacks now.

    Attributes:
        index: its NVML index when last listed with an identity.
        uuid: its UUID (``GPU-...``), ``None`` when never read.
        pci_bus_id: its PCI address, sysfs spelling (``0000:1d:00.0``).
        name: its product name.
        serial: its board serial.
        last_seen_at: the newest frame examined that listed it on the bus (Unix s, the node's clock); ``None``
            when only its loss is recorded.
        last_seen_run: that frame's agent run.
        lost_at: when it was first said lost (its ``gpu_lost`` event or a frame's ``lost_at``); ``None``: no
            loss recorded (it was gone at an agent's start: a reboot, or a loss while no agent ran).
        lost_reason: why, as the agent said then.
        xids: Xid codes the kernel or NVML reported for it, the first of each code, ``(code, at)``, oldest first.
        now: what the latest frame says of it (`NowState`).
        absent_since_at: the first frame examined (an agent run's start) that no longer listed it on the bus.
    """

    index: int | None
    uuid: str | None
    pci_bus_id: str | None
    name: str | None
    serial: str | None
    last_seen_at: float | None
    last_seen_run: str | None
    lost_at: float | None
    lost_reason: str | None
    xids: tuple[tuple[int, float], ...]
    now: NowState
    absent_since_at: float | None = None


@dataclass(slots=True)
class _Known:
    """What is gathered of one GPU while the frames and events are read."""

    index: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    pci_bus_id_xid: str | None = None
    name: str | None = None
    serial: str | None = None
    last_seen_at: float | None = None
    last_seen_run: str | None = None
    lost_at: float | None = None
    lost_reason: str | None = None
    xids: dict[int, float] = field(default_factory=dict)
    runs_seen: set[str] = field(default_factory=set)

    def learn(self, index: int | None, uuid: object, pci: object, pci_xid: object, name: object,
              serial: object = None) -> None:
        """Take each identity field that is known (text), newest last."""
        self.index = index if index is not None else self.index
        self.uuid = uuid if isinstance(uuid, str) and uuid else self.uuid
        self.pci_bus_id = pci if isinstance(pci, str) and pci else self.pci_bus_id
        self.pci_bus_id_xid = pci_xid if isinstance(pci_xid, str) and pci_xid else self.pci_bus_id_xid
        self.name = name if isinstance(name, str) and name else self.name
        self.serial = serial if isinstance(serial, str) and serial else self.serial

    def lost(self, at: float | None, reason: object) -> None:
        """The first loss recorded is the one that counts (a restart's agent says it again, knowing less)."""
        if at is not None and (self.lost_at is None or at < self.lost_at):
            self.lost_at = at
            self.lost_reason = reason if isinstance(reason, str) else self.lost_reason


def _key(uuid: object, pci: object) -> str | None:
    """How a GPU is known across runs: its UUID, else its PCI bus id; ``None`` when neither was read."""
    if isinstance(uuid, str) and uuid:
        return uuid
    if isinstance(pci, str) and pci:
        return f"pci:{pci.lower()}"
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def gpus_gone(latest: Frame | None, frames: Iterable[Frame], events: Iterable[Event]) -> list[GoneGpu]:
    """The GPUs of ``frames`` and ``events`` that ``latest`` does not list on the bus, by index.

    Args:
        latest: the node's newest frame: what it has now (``None``: nothing to compare with, none listed).
        frames: earlier frames (any order): each agent run's first and last frame are enough, as a GPU lost
            during a run stays listed, as lost, until that run ends.
        events: the ``gpu_lost`` and ``xid`` events of the span (others are ignored).
    """
    if latest is None:
        return []
    known: dict[str, _Known] = {}
    starts: list[tuple[float, set[str]]] = []
    for frame in sorted(frames, key=lambda f: f.taken_at):
        on_bus: set[str] = set()
        for gpu in frame.readings.gpus:
            key = _key(gpu.uuid, gpu.pci_bus_id)
            if key is None:
                continue
            k = known.setdefault(key, _Known())
            k.learn(gpu.index, gpu.uuid, gpu.pci_bus_id, gpu.pci_bus_id_xid, gpu.name, gpu.serial)
            k.runs_seen.add(frame.run_id)
            if gpu.state == "lost":
                k.lost(gpu.lost_at, gpu.lost_reason)
            else:
                on_bus.add(key)
                if k.last_seen_at is None or frame.taken_at >= k.last_seen_at:
                    k.last_seen_at, k.last_seen_run = frame.taken_at, frame.run_id
        starts.append((frame.taken_at, on_bus))
    ordered = sorted(events, key=lambda e: e.at)
    for event in ordered:
        if event.kind == "gpu_lost":
            key = _key(event.data.get("uuid"), event.data.get("pci_bus_id"))
            if key is not None:
                k = known.setdefault(key, _Known())
                k.learn(_int(event.data.get("gpu_index")), event.data.get("uuid"), event.data.get("pci_bus_id"),
                        event.data.get("pci_bus_id_xid"), event.data.get("name"))
                k.lost(event.at, event.data.get("reason"))
    for event in ordered:
        code = _int(event.data.get("xid"))
        if event.kind == "xid" and code is not None:
            k2 = _xid_gpu(known, event.data)
            if k2 is not None and code not in k2.xids and len(k2.xids) < MAX_XIDS:
                k2.xids[code] = event.at
    return _compare(latest, known, starts)


def _xid_gpu(known: Mapping[str, _Known], data: Mapping[str, Any]) -> _Known | None:
    """The GPU an Xid names: by UUID (NVML's report), else by PCI address (the kernel's, in either spelling)."""
    uuid = data.get("uuid")
    if isinstance(uuid, str) and uuid in known:
        return known[uuid]
    pci, pci_xid = data.get("pci_bus_id"), data.get("pci_bus_id_xid")
    for k in known.values():
        if (isinstance(pci, str) and k.pci_bus_id is not None and pci.lower() == k.pci_bus_id.lower()) or \
                (isinstance(pci_xid, str) and k.pci_bus_id_xid is not None and pci_xid.lower() == k.pci_bus_id_xid.lower()):
            return k
    return None


def _compare(latest: Frame, known: Mapping[str, _Known], starts: list[tuple[float, set[str]]]) -> list[GoneGpu]:
    """The known GPUs ``latest`` does not list on the bus."""
    on_bus: set[str] = set()
    lost_now: set[str] = set()
    lost_unnamed: set[int] = set()
    for gpu in latest.readings.gpus:
        key = _key(gpu.uuid, gpu.pci_bus_id)
        if key is None:
            if gpu.state == "lost":
                lost_unnamed.add(gpu.index)
            continue
        (lost_now if gpu.state == "lost" else on_bus).add(key)
    out: list[GoneGpu] = []
    for key, k in known.items():
        if key in on_bus or _same_gpu_on_bus(k, latest.readings.gpus):
            continue
        now: NowState = "lost" if key in lost_now else \
            "lost_unnamed" if k.index in lost_unnamed and k.lost_at is not None else "absent"
        # The first frame after its last sighting that lists other GPUs and not it: where it went missing
        # (an agent's start after a reboot) when no loss was recorded.
        absent_since = next((at for at, keys in starts if k.last_seen_at is not None and at > k.last_seen_at
                             and keys and key not in keys), None)
        out.append(GoneGpu(index=k.index, uuid=k.uuid, pci_bus_id=k.pci_bus_id, name=k.name, serial=k.serial,
                           last_seen_at=k.last_seen_at, last_seen_run=k.last_seen_run, lost_at=k.lost_at,
                           lost_reason=k.lost_reason, xids=tuple(sorted(k.xids.items(), key=lambda x: x[1])),
                           now=now, absent_since_at=absent_since))
    return sorted(out, key=lambda g: (g.index is None, g.index or 0, g.uuid or "", g.pci_bus_id or ""))


def _same_gpu_on_bus(k: _Known, gpus: Iterable[GpuReading]) -> bool:
    """Whether the latest frame lists ``k`` on the bus under its other name (a UUID now read where only its
    PCI address was, or the other way round)."""
    for gpu in gpus:
        if gpu.state == "lost":
            continue
        if k.uuid is not None and gpu.uuid == k.uuid:
            return True
        if k.uuid is None and k.pci_bus_id is not None and gpu.pci_bus_id is not None \
                and gpu.pci_bus_id.lower() == k.pci_bus_id.lower():
            return True
    return False


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def gone_gpu_text(gpu: GoneGpu) -> str:
    """One sentence of plain text on a gone GPU: which, when last seen, its loss and Xids, what the node lists now.

    ``GPU 3 (Tesla V100-SXM2-16GB, GPU-0000...-91ad, PCI 0000:1d:00.0): lost 2026-11-28 12:00:41 UTC (NVML: GPU
    is lost; ...); Xid 79 at 2026-11-28 12:00:41 UTC; last seen on the bus 2026-11-28 12:00:40 UTC; the latest
    frame lists it as lost``
    """
    ids = ", ".join(x for x in (gpu.name, gpu.uuid, f"PCI {gpu.pci_bus_id}" if gpu.pci_bus_id else None) if x)
    head = f"GPU {gpu.index if gpu.index is not None else '?'}" + (f" ({ids})" if ids else "")
    parts = [head]
    if gpu.lost_at is not None:
        parts.append(f"lost {_stamp(gpu.lost_at)}" + (f" ({gpu.lost_reason})" if gpu.lost_reason else ""))
    if gpu.xids:
        parts.append(", ".join(f"Xid {code} at {_stamp(at)}" for code, at in gpu.xids))
    if gpu.last_seen_at is not None:
        parts.append(f"last seen on the bus {_stamp(gpu.last_seen_at)}")
    if gpu.absent_since_at is not None and gpu.lost_at is None:
        parts.append(f"not found from {_stamp(gpu.absent_since_at)} (an agent start) on")
    parts.append(NOW_TEXT[gpu.now])
    return parts[0] + ": " + "; ".join(parts[1:])


def gone_gpu_data(gpu: GoneGpu) -> dict[str, Any]:
    """``gpu`` as ``inventory.json`` keeps it (JSON-ready; ``xids`` as ``{"xid", "at"}`` objects)."""
    return {"index": gpu.index, "uuid": gpu.uuid, "pci_bus_id": gpu.pci_bus_id, "name": gpu.name,
            "serial": gpu.serial, "last_seen_at": gpu.last_seen_at, "last_seen_run": gpu.last_seen_run,
            "lost_at": gpu.lost_at, "lost_reason": gpu.lost_reason,
            "xids": [{"xid": code, "at": at} for code, at in gpu.xids], "now": gpu.now,
            "absent_since_at": gpu.absent_since_at}


def gone_gpu_of_data(data: object) -> GoneGpu | None:
    """A `GoneGpu` from `gone_gpu_data`'s shape, as a bundle holds it; ``None`` when it is not one."""
    if not isinstance(data, dict):
        return None

    def text(name: str) -> str | None:
        value = data.get(name)
        return value if isinstance(value, str) else None

    def at(value: object) -> float | None:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    xids = tuple((x["xid"], float(x["at"])) for x in data.get("xids") or () if isinstance(x, dict)
                 and _int(x.get("xid")) is not None and at(x.get("at")) is not None)
    return GoneGpu(index=_int(data.get("index")), uuid=text("uuid"), pci_bus_id=text("pci_bus_id"), name=text("name"),
                   serial=text("serial"), last_seen_at=at(data.get("last_seen_at")), last_seen_run=text("last_seen_run"),
                   lost_at=at(data.get("lost_at")), lost_reason=text("lost_reason"), xids=xids,
                   now=_now(data.get("now")), absent_since_at=at(data.get("absent_since_at")))


def _now(value: object) -> NowState:
    return "lost" if value == "lost" else "lost_unnamed" if value == "lost_unnamed" else "absent"
