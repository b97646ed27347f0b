"""NVMe collector: controllers from /sys/class/nvme, their PCIe link, namespaces and hwmon temperature."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from rigmon.collectors.base import (
    CollectorContext,
    EventDraft,
    NoData,
    PolledCollector,
    PushFn,
)
from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.hwmon_chips import device_hwmon_dirs, hwmon_registrations
from rigmon.collectors.nvme_md import MdHolders
from rigmon.collectors.nvme_temp import judge_over_max, md_arrays_data, parse_alarm, temp_events, temp_reason
from rigmon.collectors.sysfs_values import parse_int, parse_millidegrees
from rigmon.collectors.udev_rescan import UdevRescan
from rigmon.hw.names import TextNames
from rigmon.hw.root import HostRoot
from rigmon.hw.udev import UdevEvent, UdevSource, open_udev_source
from rigmon.lazy_re import lazy_compile
from rigmon.schema import NvmeLinkState, NvmeReading

MILLI = 1000.0
#: PCIe generation by per-lane transfer rate in GT/s.
PCIE_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
#: A function whose config space reads all ones (fell off the bus) shows this link width.
LOST_LINK_WIDTH = 63

# "16.0 GT/s PCIe" (5.7+), "8 GT/s" (older), "Unknown" / "Unknown speed" (link lost)
_GTS = lazy_compile(r"^(\d+(?:\.\d+)?) GT/s")
_NAMESPACE = lazy_compile(r"^nvme\d+n\d+$")
# Hidden per-path disk under the controller with native multipath: nvme<subsys>c<ctrl>n<nsid>.
_PATH_NAMESPACE = lazy_compile(r"^nvme(?P<subsys>\d+)c\d+n(?P<nsid>\d+)$")


def parse_link_speed(text: str | None) -> float | None:
    """Per-lane rate in GT/s from ``current_link_speed``/``max_link_speed``.

    Accepts both the current (``"8.0 GT/s PCIe"``) and the pre-5.7 format (``"8 GT/s"``);
    ``Unknown``, ``Unknown speed`` or an unreadable file give ``None``.
    """
    if text is None:
        return None
    m = _GTS.match(text.strip())
    if m is None:
        return None
    # More digits than a float holds (a garbled read) would be an infinite link speed.
    speed = float(m.group(1))
    return speed if math.isfinite(speed) else None


def pcie_gen(speed_gts: float | None) -> int | None:
    """PCIe generation of a per-lane rate (8.0 -> 3), ``None`` when unknown."""
    return None if speed_gts is None else PCIE_GEN_BY_GTS.get(speed_gts)


def parse_link_width(text: str | None) -> int | None:
    """Lane count from ``current_link_width``; ``None`` when absent or zero."""
    width = parse_int(text)
    return width if width is not None and width > 0 else None


def is_link_lost(speed_text: str | None, width: int | None) -> bool:
    """Whether a PCIe function's link reads as lost (``Unknown`` speed, or width 63 from all-ones)."""
    if width == LOST_LINK_WIDTH:
        return True
    return speed_text is not None and speed_text.strip().lower().startswith("unknown")


def namespace_of(entry: str) -> str | None:
    """The visible block device for a controller child (``nvme0n1``, or ``nvme0c1n1`` -> ``nvme0n1``)."""
    if _NAMESPACE.match(entry):
        return entry
    m = _PATH_NAMESPACE.match(entry)
    return f"nvme{m['subsys']}n{m['nsid']}" if m else None




_BDF = lazy_compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def upstream_port(function_path: str | None) -> str | None:
    """The sysfs directory of the PCIe port above a function, from the function's real path.

    ``/sys/devices/pci0000:00/0000:00:01.2/0000:64:00.0`` -> ``.../0000:00:01.2``; ``None``
    when the parent is a host bridge (``pci0000:00``) or the path is not a device tree.
    """
    if not function_path:
        return None
    parent, _, leaf = function_path.rstrip("/").rpartition("/")
    if not _BDF.match(leaf) or not _BDF.match(parent.rpartition("/")[2]):
        return None
    return parent


def judge_nvme_link(speed_gts: float | None, width: int | None, max_speed_gts: float | None,
                    max_width: int | None, port_speed_gts: float | None, port_width: int | None,
                    lost: bool) -> tuple[NvmeLinkState, str | None]:
    """Whether a drive's PCIe link runs at what both of its ends can do.

    A link trains at most at the lower of the drive's and its port's maximum (the kernel's
    ``pcie_bandwidth_available`` reasoning, and NVML's "max possible with this device and
    system" for GPUs): a Gen4 drive in a Gen3 slot is not degraded, one trained at Gen3 in
    a Gen4 slot is.

    Returns:
        The state and, when ``degraded``, the reason (``"8 GT/s x4, drive and port can do
        16 GT/s x4"``).
    """
    if lost:
        return "lost", None
    if speed_gts is None or width is None:
        return "unknown", None
    cap_speed = _lower(max_speed_gts, port_speed_gts)
    cap_width = _lower(max_width, port_width)
    if cap_speed is None and cap_width is None:
        return "unknown", None
    slow = cap_speed is not None and speed_gts < cap_speed - 1e-6
    narrow = cap_width is not None and width < cap_width
    if not (slow or narrow):
        return "ok", None
    who = "drive and port" if port_speed_gts is not None or port_width is not None else "drive"
    cap = f"{_gts(cap_speed)} x{cap_width if cap_width is not None else '?'}"
    return "degraded", f"{_gts(speed_gts)} x{width}, {who} can do {cap}"


def _lower(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def _gts(speed: float | None) -> str:
    return "?" if speed is None else f"{speed:g} GT/s"


def strip_padded(text: str | None) -> str | None:
    """An Identify string field without the kernel's space padding; empty -> ``None``."""
    if text is None:
        return None
    return text.strip() or None


@dataclass(frozen=True, slots=True)
class ControllerFacts:
    """What does not change while a controller stays plugged in and live (read once, see `DeviceFacts`)."""

    model: str | None
    serial: str | None
    firmware: str | None
    transport: str | None
    address: str | None
    #: sysfs directory of the controller's PCI function.
    pci: str
    max_link_speed_gts: float | None
    max_link_width: int | None
    port_max_link_speed_gts: float | None = None
    port_max_link_width: int | None = None


@dataclass(frozen=True, slots=True)
class HwmonFacts:
    """The controller's hwmon directory and its temperature limits (°C)."""

    path: str
    temp_max_c: float | None
    temp_crit_c: float | None


class NvmeCollector(PolledCollector):
    """NVMe controllers: identity, state, namespaces, PCIe link and temperature.

    Identity, maximum link, the hwmon directory and the namespaces (the controller's directory
    listing) are read once per controller (see `DeviceFacts`): again when the controller set
    changes, on a udev event (a namespace attached or detached sends the controller a ``change``
    with ``NVME_AEN``), when the controller's state changes (a reset can bring new firmware),
    and every `device_facts.REFRESH_EVERY` reads; the hwmon directory also when the hwmon devices
    registered change (a controller reset registers its hwmon device again, maybe as another
    ``hwmonN``, and its old ``hwmonN`` may go to another device, see `hwmon_registrations`). A
    controller listed without namespaces (they come a moment after the controller, or never on a
    drive that has none) and one without its hwmon directory (it comes a moment after too, or never
    on a kernel before 5.5) are looked at again soon, backing off (`DeviceFacts.recheck`). The md
    arrays holding its namespaces are listed again also when the arrays of /proc/mdstat change (an
    array assembled or stopped sends the controller no event): at the next read (see `MdHolders`).

    Args:
        root: the machine's files.
        events: udev source for immediate re-reads (``None``: polling only).
    """

    name = "nvme"

    def __init__(self, root: HostRoot, events: UdevSource | None = None) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._seen: dict[str, NvmeReading] | None = None
        #: Controller names as records (and ``_seen``) carry them: a directory entry may hold
        #: bytes that are not UTF-8 (`rigmon.hw.names.text_name`); paths use the entry as listed.
        self._names = TextNames()
        self._facts: DeviceFacts[str, ControllerFacts] = DeviceFacts()
        self._hwmon: DeviceFacts[str, HwmonFacts | None] = DeviceFacts()
        #: Per controller, its directory's entries and the namespaces they name (see `_list`).
        self._entries: DeviceFacts[str, tuple[tuple[str, ...], tuple[str, ...]]] = DeviceFacts()
        #: Per controller, the md arrays holding its namespaces.
        self._held = MdHolders(root)
        #: Per controller, its last reading whose link was read (or read as lost): a link that
        #: cannot be read for a while (EINVAL in D3cold or during a reset) is not a link change.
        self._link_read: dict[str, NvmeReading] = {}
        #: Per controller, whether it was at or over its warning temperature when last told (see
        #: `judge_over_max`): a read that cannot tell is no cooling down.
        self._hot: dict[str, bool] = {}
        #: Per controller, the last state word read: an empty or unreadable state file between two
        #: reads says nothing, so it is no change (``live -> `` then `` -> live``).
        self._state_read: dict[str, str] = {}
        self._rescan = UdevRescan(events, ("nvme",), self._on_udev, "rigmon-nvme-udev")

    def start(self, push: PushFn) -> None:
        self._rescan.start(push)

    def close(self) -> None:
        self._rescan.close()

    def _on_udev(self, _events: Sequence[UdevEvent]) -> Sequence[object]:
        with self._lock:
            self._facts.invalidate()
            self._hwmon.invalidate()
            self._entries.invalidate()
            self._held.invalidate()
        return self.collect()

    def collect(self) -> Sequence[object]:
        with self._lock:
            names = [n for n in self.root.listdir("/sys/class/nvme") if n.startswith("nvme")]
            if not names and self._seen is None:
                raise NoData("no NVMe controllers")
            self._facts.begin(names)
            self._hwmon.begin((*names, *hwmon_registrations(self.root)))
            self._entries.begin(names)
            self._held.begin(names)
            readings = [r for r in (self._controller(n) for n in names) if r is not None]
            records: list[object] = list(self._events(readings))
            records.extend(readings)
            return records

    def _read_facts(self, name: str) -> ControllerFacts:
        base = f"/sys/class/nvme/{name}"
        attr = self.root.read_attr
        address = attr(f"{base}/address")
        pci = f"{base}/device"
        # Without the ``device`` link (some kernels, NVMe behind VMD, trees copied without
        # symlinks) the PCI function is found by the controller's ``address``.
        if attr(f"{pci}/current_link_speed") is None and address:
            pci = f"/sys/bus/pci/devices/{address}"
        port = upstream_port(self.root.realpath(pci))
        return ControllerFacts(
            model=strip_padded(attr(f"{base}/model")),
            serial=strip_padded(attr(f"{base}/serial")),
            firmware=strip_padded(attr(f"{base}/firmware_rev")),
            transport=attr(f"{base}/transport"),
            address=address,
            pci=pci,
            max_link_speed_gts=parse_link_speed(attr(f"{pci}/max_link_speed")),
            max_link_width=parse_link_width(attr(f"{pci}/max_link_width")),
            port_max_link_speed_gts=None if port is None else parse_link_speed(attr(f"{port}/max_link_speed")),
            port_max_link_width=None if port is None else parse_link_width(attr(f"{port}/max_link_width")),
        )

    def _controller(self, name: str) -> NvmeReading | None:
        base = f"/sys/class/nvme/{name}"
        attr = self.root.read_attr
        state_text = attr(f"{base}/state")
        # An empty state file is no state: not present, like an unreadable one.
        state = state_text or None
        text = self._names(name)
        before = self._seen.get(text) if self._seen is not None else None
        if state_text is None or (before is not None and state is not None and before.state != state):
            self._facts.forget(name)
            self._hwmon.forget(name)
            self._entries.forget(name)
            self._held.forget(name)
        facts = self._facts.get(name, self._read_facts)
        if state_text is None and facts.model is None:
            # The directory vanished between listdir and the reads: the device is gone.
            self._facts.forget(name)
            return None
        pci = facts.pci
        speed_text = attr(f"{pci}/current_link_speed")
        width = parse_link_width(attr(f"{pci}/current_link_width"))
        speed = parse_link_speed(speed_text)
        lost = is_link_lost(speed_text, width)
        if not self._hwmon.known(name):
            # Its hwmon directory is looked for in a new listing of the controller's directory.
            self._entries.forget(name)
        entries, namespaces = self._entries.get(name, lambda _: self._list(name, base))
        hwmon = self._hwmon.get(name, lambda _: self._find_hwmon(name, base, entries, pci))
        if hwmon is None:
            temp, alarm = None, None
        else:
            temp = parse_millidegrees(attr(f"{hwmon.path}/temp1_input"))
            alarm = parse_alarm(attr(f"{hwmon.path}/temp1_alarm"))
        temp_max = None if hwmon is None else hwmon.temp_max_c
        md_arrays = self._held.arrays(name, namespaces)
        over = judge_over_max(temp, temp_max, alarm)
        temp_crit = None if hwmon is None else hwmon.temp_crit_c
        link_state, reason = judge_nvme_link(speed, None if lost else width, facts.max_link_speed_gts,
                                             facts.max_link_width, facts.port_max_link_speed_gts,
                                             facts.port_max_link_width, lost)
        return NvmeReading(
            name=text,
            model=facts.model,
            serial=facts.serial,
            firmware=facts.firmware,
            state=state,
            transport=facts.transport,
            address=facts.address,
            namespaces=namespaces,
            link_speed_gts=speed,
            link_width=None if lost else width,
            max_link_speed_gts=facts.max_link_speed_gts,
            max_link_width=facts.max_link_width,
            link_gen=pcie_gen(speed),
            max_link_gen=pcie_gen(facts.max_link_speed_gts),
            link_lost=lost,
            temp_c=temp,
            temp_max_c=temp_max,
            temp_crit_c=temp_crit,
            port_max_link_speed_gts=facts.port_max_link_speed_gts,
            port_max_link_width=facts.port_max_link_width,
            link_state=link_state,
            link_degraded_reason=reason,
            temp_alarm=alarm,
            temp_over_max=over,
            md_arrays=md_arrays,
            temp_warning_reason=temp_reason(temp, temp_max, temp_crit, md_arrays) if over else None,
        )

    def _list(self, name: str, base: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A controller directory's entries and the namespaces they name, sorted: matched once
        per listing (two patterns per entry of a directory of ~25), not on every read.

        A controller without namespaces is listed again soon, backing off (`DeviceFacts.recheck`):
        those the scan after a controller appears brings a moment later are seen the next read, and
        a controller that has none (a fresh drive, one whose namespaces were deleted) costs a
        listing now and then, not one every read.
        """
        entries = tuple(self.root.listdir(base))
        namespaces = tuple(sorted({ns for e in entries if (ns := namespace_of(e)) is not None}))
        if not namespaces:
            self._entries.recheck(name)
        return entries, namespaces

    def _find_hwmon(self, name: str, base: str, entries: Sequence[str], pci: str) -> HwmonFacts | None:
        """Controller ``name``'s hwmon directory with its warning and critical limits; ``None`` (and
        looked for again soon, see `DeviceFacts.recheck`) when it has none (yet).

        Current kernels register hwmon under the controller (``nvme0/hwmonN``); the first
        version (5.5) registered it under the PCI function (``<bdf>/hwmon/hwmonN``).
        """
        for hw in (*device_hwmon_dirs(self.root, base, entries), *device_hwmon_dirs(self.root, pci)):
            if self.root.read_attr(f"{hw}/name") not in (None, "nvme"):
                continue
            return HwmonFacts(path=hw, temp_max_c=parse_millidegrees(self.root.read_attr(f"{hw}/temp1_max")),
                              temp_crit_c=parse_millidegrees(self.root.read_attr(f"{hw}/temp1_crit")))
        self._hwmon.recheck(name)
        return None

    def _events(self, readings: list[NvmeReading]) -> list[EventDraft]:
        now = {r.name: r for r in readings}
        seen, self._seen = self._seen, now
        out: list[EventDraft] = []
        for r in readings:
            subject = f"nvme:{r.name}"
            label = f"{r.name} ({r.model})" if r.model else r.name
            before = None if seen is None else seen.get(r.name)
            link_before = self._link_read.get(r.name)
            read = r.link_lost or (r.link_speed_gts is not None and r.link_width is not None)
            if read:
                self._link_read[r.name] = r
            state_before = self._state_read.get(r.name)
            out.extend(temp_events(r, self._hot.get(r.name), subject, label))
            if r.temp_over_max is not None:
                self._hot[r.name] = r.temp_over_max
            if r.state is not None:
                self._state_read[r.name] = r.state
            if before is None:
                if seen is not None:
                    out.append(EventDraft("nvme_added", "info", subject, f"NVMe {label} appeared{_in_arrays(r)}",
                                          {"serial": r.serial, "model": r.model,
                                           "md_arrays": md_arrays_data(r.md_arrays)}))
                if r.link_lost:
                    out.append(_link_lost_event(r, subject, label))
                if r.link_state == "degraded":
                    out.append(_below_max_event(r, subject, label))
                continue
            if r.link_lost and not before.link_lost:
                out.append(_link_lost_event(r, subject, label))
            elif read and link_before is not None and not r.link_lost \
                    and (r.link_speed_gts, r.link_width) != (link_before.link_speed_gts, link_before.link_width):
                out.append(EventDraft(
                    "nvme_link_changed", "warning", subject,
                    f"NVMe {label} PCIe link {_link(link_before)} -> {_link(r)}{_in_arrays(r)}",
                    {"from_gts": link_before.link_speed_gts, "to_gts": r.link_speed_gts,
                     "from_width": link_before.link_width, "to_width": r.link_width,
                     "md_arrays": md_arrays_data(r.md_arrays)},
                ))
            if r.link_state == "degraded" and before.link_state != "degraded":
                out.append(_below_max_event(r, subject, label))
            elif r.link_state == "ok" and before.link_state == "degraded":
                out.append(EventDraft("nvme_link_recovered", "info", subject,
                                      f"NVMe {label} PCIe link back at {_link(r)}{_in_arrays(r)}", _link_data(r)))
            if r.state is not None and state_before is not None and r.state != state_before:
                sev = "info" if r.state == "live" else "warning"
                out.append(EventDraft("nvme_state_changed", sev, subject,
                                      f"NVMe {label} state {state_before} -> {r.state}{_in_arrays(r)}",
                                      {"from": state_before, "to": r.state, "md_arrays": md_arrays_data(r.md_arrays)}))
        for name, gone in (seen or {}).items():
            if name not in now:
                self._link_read.pop(name, None)
                self._state_read.pop(name, None)
                self._hot.pop(name, None)
                label = f"{name} ({gone.model})" if gone.model else name
                # The arrays it was in at its last reading: those that lost a member.
                out.append(EventDraft("nvme_removed", "warning", f"nvme:{name}",
                                      f"NVMe {label} disappeared{_in_arrays(gone)}",
                                      {"serial": gone.serial, "model": gone.model,
                                       "md_arrays": md_arrays_data(gone.md_arrays)}))
        return out


def _below_max_event(r: NvmeReading, subject: str, label: str) -> EventDraft:
    # A Gen4 drive trained at Gen3 halves a model load: a warning, like a GPU's PCIe link.
    return EventDraft("nvme_link_below_max", "warning", subject,
                      f"NVMe {label} PCIe link below its maximum{_in_arrays(r)}: {r.link_degraded_reason}",
                      _link_data(r))


def _link_lost_event(r: NvmeReading, subject: str, label: str) -> EventDraft:
    return EventDraft("nvme_link_lost", "critical", subject,
                      f"NVMe {label} PCIe link lost (reads Unknown){_in_arrays(r)}",
                      {"serial": r.serial, "md_arrays": md_arrays_data(r.md_arrays)})


def _link_data(r: NvmeReading) -> dict[str, str | int | float | bool | None]:
    """A link event's data: the link now and what its ends can do, and the md arrays the drive is in
    (`md_arrays_data`), which a slowed drive slows."""
    return {"serial": r.serial, "link_gts": r.link_speed_gts, "link_width": r.link_width,
            "max_link_gts": r.max_link_speed_gts, "max_link_width": r.max_link_width,
            "port_max_link_gts": r.port_max_link_speed_gts, "port_max_link_width": r.port_max_link_width,
            "md_arrays": md_arrays_data(r.md_arrays)}


def _in_arrays(r: NvmeReading) -> str:
    """`` in md127`` (``, md126`` for more) for a drive some md arrays hold, for its events' messages."""
    return f" in {', '.join(r.md_arrays)}" if r.md_arrays else ""


def _link(r: NvmeReading) -> str:
    speed = "?" if r.link_speed_gts is None else f"{r.link_speed_gts:g} GT/s"
    return f"{speed} x{r.link_width if r.link_width is not None else '?'}"


def make_nvme_collector(ctx: CollectorContext) -> NvmeCollector:
    """Registry factory."""
    events = open_udev_source(("nvme",)) if ctx.config.storage.udev and ctx.root.is_real_root else None
    return NvmeCollector(ctx.root, events)
