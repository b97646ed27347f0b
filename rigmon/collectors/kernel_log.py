"""Kernel log collector: NVRM Xid lines, GPUs fallen off the bus and PCIe AER errors from /dev/kmsg."""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from rigmon.clock import Clock
from rigmon.collectors.base import (
    CollectorContext,
    CollectorError,
    EventDraft,
    NoData,
    PushFn,
)
from rigmon.hw.kmsg import KmsgReader, KmsgUnavailable
from rigmon.hw.root import HostRoot
from rigmon.schema import KernelLogLine, KernelLogReading

USEC = 1_000_000.0
#: PCI vendor id of NVIDIA in sysfs ``vendor`` files.
NVIDIA_VENDOR = "0x10de"
#: PCI base class of display controllers (VGA 0x0300xx, 3D controller 0x0302xx).
DISPLAY_CLASS_PREFIX = "0x03"
#: Matched lines carried in every frame (all kept ones are in `KernelLogCollector.recent_lines`).
RECENT_IN_FRAME = 16
#: Records after "The NVIDIA GPU <bdf>" within which "fallen off the bus" completes the message.
OFF_BUS_WINDOW = 4

#: Xid number -> (short name, severity) for hardware triage (reference/kernel-log.md section 3).
XID_INFO: dict[int, tuple[str, str]] = {
    13: ("Graphics Engine Exception", "info"),
    31: ("GPU memory page fault", "warning"),
    32: ("Invalid or corrupted push buffer stream", "warning"),
    43: ("GPU stopped processing", "info"),
    45: ("Preemptive cleanup, due to previous errors", "info"),
    48: ("Double Bit ECC Error", "critical"),
    61: ("Internal micro-controller breakpoint/warning", "warning"),
    62: ("Internal micro-controller halt", "critical"),
    63: ("ECC page retirement or row remapping recording event", "warning"),
    64: ("ECC page retirement or row remapper recording failure", "critical"),
    74: ("NVLink Error", "critical"),
    79: ("GPU has fallen off the bus", "critical"),
    92: ("High single-bit ECC error rate", "critical"),
    94: ("Contained ECC error", "warning"),
    95: ("Uncontained ECC error", "critical"),
    119: ("GSP RPC Timeout", "critical"),
    120: ("GSP Error", "critical"),
}


@dataclass(frozen=True, slots=True)
class KmsgRecord:
    """One /dev/kmsg record: level, sequence number, µs since boot, unescaped text, dictionary."""

    level: int
    facility: int
    seq: int
    ts_us: int
    message: str
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PciBusIds:
    """One PCI function in the three spellings that must be joined."""

    sysfs: str
    """``0000:1a:00.0``: sysfs directory names, AER lines, ``NVRM: GPU 0000:1a:00.0:``."""
    nvml: str
    """``00000000:1A:00.0``: NVML ``busId``."""
    xid: str
    """``0000:1a:00``: the ``NVRM: Xid (PCI:0000:1a:00)`` parenthesis (no function)."""


@dataclass(frozen=True, slots=True)
class XidLine:
    """An NVRM Xid message: the GPU's bus id (function 0), the Xid number and its text."""

    pci_bus_id: str
    xid: int
    pid: str | None
    process: str | None
    text: str


@dataclass(frozen=True, slots=True)
class AerLine:
    """A PCIe AER ``PCIe Bus Error`` line of the device that logged it."""

    pci_bus_id: str
    severity: str
    error_type: str
    agent: str | None


@dataclass(frozen=True, slots=True)
class KernelMatch:
    """A record a rule matched: ``xid``, ``gpu_off_bus`` or ``pcie_aer``."""

    kind: str
    pci_bus_id: str
    record: KmsgRecord
    xid: XidLine | None = None
    aer: AerLine | None = None


_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")


def unescape_kmsg(text: str) -> str:
    """Undo /dev/kmsg's ``\\xNN`` escaping of non-printable bytes and backslashes."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def parse_kmsg_record(raw: str) -> KmsgRecord | None:
    """Parse one /dev/kmsg record (header, message, ``KEY=value`` continuation lines).

    Returns:
        The record, or ``None`` when the text is not a kmsg record.
    """
    first, _, rest = raw.partition("\n")
    # 4,51235,1843221988,-;NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.
    # 6,2081,5144212,-,caller=T412;text   (extra header fields are ignored)
    header, sep, message = first.partition(";")
    parts = header.split(",")
    # isascii(): str.isdigit() admits characters int() refuses ("²").
    if not sep or len(parts) < 4 or not all(p.isascii() and p.isdigit() for p in parts[:3]):
        return None
    prefix = int(parts[0])
    fields: dict[str, str] = {}
    for line in rest.splitlines():
        #  DEVICE=+pci:0000:1a:00.0
        key, eq, value = line.strip().partition("=")
        if eq and line.startswith(" "):
            fields[key] = unescape_kmsg(value)
    return KmsgRecord(
        level=prefix & 7,
        facility=prefix >> 3,
        seq=int(parts[1]),
        ts_us=int(parts[2]),
        message=unescape_kmsg(message.rstrip("\n")),
        fields=fields,
    )


_BUS_NVML = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?$")


def parse_pci_bus_id(text: str) -> PciBusIds | None:
    """Normalise any of the three spellings of a PCI address.

    Accepts ``00000000:1A:00.0`` (NVML), ``0000:1a:00.0`` (sysfs) and ``0000:1a:00``
    (Xid lines, function 0 implied); a ``PCI:`` prefix is allowed.
    """
    text = text.strip()
    if text.upper().startswith("PCI:"):
        text = text[4:]
    m = _BUS_NVML.match(text)
    if m is None:
        return None
    domain, bus, dev = int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)
    func = int(m.group(4) or 0)
    if domain > 0xFFFF:
        return None
    return PciBusIds(
        sysfs=f"{domain:04x}:{bus:02x}:{dev:02x}.{func}",
        nvml=f"{domain:08X}:{bus:02X}:{dev:02X}.{func}",
        xid=f"{domain:04x}:{bus:02x}:{dev:02x}",
    )


_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})[^)]*\): (\d+),\s*(.*)", re.DOTALL)
_XID_PROCESS = re.compile(r"^pid=('?)([^,']*)\1, name=([^,]*), (.*)$", re.DOTALL)


def parse_xid(message: str) -> XidLine | None:
    """Parse an NVRM Xid message; ``None`` for any other text."""
    # NVRM: Xid (PCI:0000:1d:00): 13, pid=9911, name=python, Graphics SM Warp Exception on ...
    # NVRM: Xid (PCI:0000:1b:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error ...
    m = _XID.search(message)
    if m is None:
        return None
    bus_id = f"{m.group(1).lower()}:{m.group(2).lower()}:{m.group(3).lower()}.0"
    text = m.group(5).strip()
    pid = process = None
    pm = _XID_PROCESS.match(text)
    if pm is not None:
        pid, process, text = pm.group(2), pm.group(3), pm.group(4).strip()
        if pid == "<unknown>":
            pid = None
        if process == "<unknown>":
            process = None
    return XidLine(pci_bus_id=bus_id, xid=int(m.group(4)), pid=pid, process=process, text=text)


_OFF_BUS_SHORT = re.compile(r"NVRM: GPU ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): GPU has fallen off the bus")
_GPU_HEADER = re.compile(r"NVRM: The NVIDIA GPU ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_OFF_BUS_TAIL = re.compile(r"fallen off the bus")


def parse_off_bus(message: str) -> str | None:
    """The sysfs bus id of a complete "fallen off the bus" message without an Xid token.

    Matches ``NVRM: GPU 0000:1a:00.0: GPU has fallen off the bus.`` and the whole
    multi-line form when it arrives as one record (newlines were escaped as ``\\x0a``).
    """
    # NVRM: GPU 0000:1a:00.0: GPU has fallen off the bus.
    m = _OFF_BUS_SHORT.search(message)
    if m is not None:
        return m.group(1).lower()
    header = parse_off_bus_header(message)
    if header is not None and _OFF_BUS_TAIL.search(message):
        return header
    return None


def parse_off_bus_header(message: str) -> str | None:
    """The bus id from the first line of the multi-line form, else ``None``."""
    # NVRM: The NVIDIA GPU 0000:1a:00.0
    # NVRM: (PCI ID: 10de:1db1) installed in this system has
    # NVRM: fallen off the bus and is not responding to commands.
    m = _GPU_HEADER.search(message)
    return None if m is None else m.group(1).lower()


_AER_DETAIL = re.compile(
    r"^\S+ ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): PCIe Bus Error: "
    r"severity=([^,]+), type=([^,]+)(?:, \(([^)]*)\))?"
)


def parse_aer(message: str) -> AerLine | None:
    """Parse the ``PCIe Bus Error`` line an AER error prints for the device that logged it."""
    # nvidia 0000:1a:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
    m = _AER_DETAIL.match(message)
    if m is None:
        return None
    return AerLine(pci_bus_id=m.group(1).lower(), severity=m.group(2).strip(), error_type=m.group(3).strip(),
                   agent=m.group(4))


def aer_severity(severity: str) -> str:
    """Event severity for an AER severity string (old ``Corrected``, new ``Correctable``...)."""
    return "critical" if "Fatal" in severity and "Non-Fatal" not in severity else "warning"


class KernelLogMatcher:
    """Recognises Xid, fallen-off-the-bus and AER records in order (pure, no I/O).

    Keeps the little state the multi-line "fallen off the bus" form needs: its first
    record names the GPU, a later one says what happened.
    """

    def __init__(self) -> None:
        self._header: tuple[str, int] | None = None
        self._count = 0

    def feed(self, record: KmsgRecord) -> KernelMatch | None:
        """The match for ``record``, if any rule recognises it."""
        self._count += 1
        msg = record.message
        xid = parse_xid(msg)
        if xid is not None:
            return KernelMatch("xid", xid.pci_bus_id, record, xid=xid)
        bus = parse_off_bus(msg)
        if bus is not None:
            self._header = None
            return KernelMatch("gpu_off_bus", bus, record)
        header = parse_off_bus_header(msg)
        if header is not None:
            self._header = (header, self._count)
            return None
        if self._header is not None and _OFF_BUS_TAIL.search(msg):
            bus, at = self._header
            self._header = None
            if self._count - at <= OFF_BUS_WINDOW:
                return KernelMatch("gpu_off_bus", bus, record)
        aer = parse_aer(msg)
        if aer is not None:
            return KernelMatch("pcie_aer", aer.pci_bus_id, record, aer=aer)
        return None


def nvidia_gpu_bus_ids(root: HostRoot) -> list[str]:
    """Sysfs bus ids of NVIDIA display controllers, sorted (NVML's default index order)."""
    out = []
    for bdf in root.listdir("/sys/bus/pci/devices"):
        base = f"/sys/bus/pci/devices/{bdf}"
        vendor = root.read_attr(f"{base}/vendor")
        cls = root.read_attr(f"{base}/class")
        if vendor == NVIDIA_VENDOR and cls is not None and cls.startswith(DISPLAY_CLASS_PREFIX):
            out.append(bdf.lower())
    return out


class KernelLogCollector:
    """Tails the kernel log; pushes events for Xid, fallen-off-the-bus and AER records.

    Records already in the log at start fill the recent-lines buffer without events;
    later ones become events at once (pushed by a thread after `start`).

    Args:
        root: the machine's files (the log is ``root/<path>``).
        clock: wall time to date records.
        path: kernel log below the root.
        keep_lines: matched lines kept for snapshots.
    """

    name = "kernel_log"

    def __init__(self, root: HostRoot, clock: Clock, path: str = "/dev/kmsg", keep_lines: int = 200) -> None:
        self.root = root
        self.clock = clock
        self._reader = KmsgReader(root, path)
        self._matcher = KernelLogMatcher()
        self._recent: deque[KernelLogLine] = deque(maxlen=keep_lines)
        self._lock = threading.Lock()
        self._records_total = 0
        self._matched_total = 0
        self._last_seq: int | None = None
        self._seq_lost = 0
        self._lost_seen = 0
        self._gpus: list[str] = []
        self._last_xid79: str | None = None
        self._pending: list[EventDraft] = []
        self._open_error: KmsgUnavailable | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def _open(self) -> bool:
        if self._reader.is_open:
            return True
        try:
            self._reader.open(from_end=False)
        except KmsgUnavailable as exc:
            self._open_error = exc
            return False
        self._open_error = None
        # What is already there is history: kept for snapshots, no events.
        self._drain(emit=False)
        return True

    def start(self, push: PushFn) -> None:
        """Open the log and start the thread that pushes events as records arrive."""
        with self._lock:
            if not self._open():
                return
        self._thread = threading.Thread(target=self._run, args=(push,), name="rigmon-kmsg", daemon=True)
        self._thread.start()

    def _run(self, push: PushFn) -> None:
        while not self._stop.is_set():
            self._reader.wait(0.2)
            if self._stop.is_set():
                break
            with self._lock:
                events = self._drain(emit=True)
            if events:
                push(events)

    def collect(self) -> Sequence[object]:
        with self._lock:
            if not self._open():
                assert self._open_error is not None
                if self._open_error.missing:
                    raise NoData(str(self._open_error))
                raise CollectorError(str(self._open_error))
            events: list[object] = []
            if self._thread is None:
                events.extend(self._drain(emit=True))
            recent = tuple(self._recent)[-RECENT_IN_FRAME:]
            reading = KernelLogReading(
                records_total=self._records_total,
                matched_total=self._matched_total,
                lost_total=self._lost_total(),
                recent=recent,
            )
        return [reading, *events]

    def recent_lines(self) -> list[KernelLogLine]:
        """Every kept matched line, oldest first (for snapshots)."""
        with self._lock:
            return list(self._recent)

    def captures(self) -> dict[str, str]:
        """Kernel log lines about GPUs, PCIe and the bus, as text for a bug report."""
        lines = [f"{line.at if line.at is not None else '-'} <{line.level}> [{line.kind}] seq={line.seq} {line.text}"
                 for line in self.recent_lines()]
        return {"kernel-log.txt": "\n".join(lines) + ("\n" if lines else "")}

    def _boot_at(self) -> float | None:
        text = self.root.read_attr("/proc/uptime")
        try:
            return None if text is None else self.clock.time() - float(text.split()[0])
        except (ValueError, IndexError):
            return None

    def _lost_total(self) -> int:
        # Sequence gaps count the records exactly; an overrun (EPIPE) with no visible gap (the
        # first record read after it) still lost at least one.
        return max(self._seq_lost, self._reader.overruns)

    def _drain(self, emit: bool) -> list[EventDraft]:
        raws = self._reader.read_records()
        events = self._parse(raws, emit) if raws else []
        lost_total = self._lost_total()
        lost, self._lost_seen = lost_total - self._lost_seen, lost_total
        if emit and lost > 0:
            events.insert(0, EventDraft(
                "kernel_log_overrun", "warning", "kernel_log",
                f"{lost} kernel log record{'s' if lost != 1 else ''} overwritten before rigmon read "
                f"{'them' if lost != 1 else 'it'}: Xid, AER or bus errors among them are not shown",
                {"lost": lost, "lost_total": lost_total}))
        return events

    def _parse(self, raws: list[bytes], emit: bool) -> list[EventDraft]:
        boot_at = self._boot_at()
        self._gpus = sorted(set(self._gpus) | set(nvidia_gpu_bus_ids(self.root)))
        events: list[EventDraft] = []
        for raw in raws:
            record = parse_kmsg_record(raw.decode("utf-8", "replace"))
            if record is None:
                continue
            self._records_total += 1
            if self._last_seq is not None and record.seq > self._last_seq + 1:
                self._seq_lost += record.seq - self._last_seq - 1
            self._last_seq = record.seq
            match = self._matcher.feed(record)
            if match is None:
                continue
            self._matched_total += 1
            at = None if boot_at is None else round(boot_at + record.ts_us / USEC, 6)
            self._recent.append(KernelLogLine(seq=record.seq, at=at, level=record.level, kind=match.kind,
                                              text=record.message))
            if emit:
                event = self._event(match, at)
                if event is not None:
                    events.append(event)
        return events

    def _subject(self, ids: PciBusIds) -> tuple[str, int | None]:
        if ids.sysfs in self._gpus:
            index = self._gpus.index(ids.sysfs)
            return f"gpu:{index}", index
        return f"pci:{ids.sysfs}", None

    def _event(self, match: KernelMatch, at: float | None) -> EventDraft | None:
        ids = parse_pci_bus_id(match.pci_bus_id)
        if ids is None:
            return None
        subject, index = self._subject(ids)
        data: dict[str, str | int | float | bool | None] = {
            "source": "kmsg", "seq": match.record.seq, "gpu_index": index,
            "pci_bus_id": ids.sysfs, "pci_bus_id_nvml": ids.nvml, "pci_bus_id_xid": ids.xid,
        }
        who = subject.replace("gpu:", "GPU ") + f" ({ids.sysfs})" if index is not None else ids.sysfs
        if match.xid is not None:
            xid = match.xid
            name, severity = XID_INFO.get(xid.xid, ("Xid", "warning"))
            data.update(xid=xid.xid, pid=xid.pid, process=xid.process, text=xid.text)
            if xid.xid == 79:
                self._last_xid79 = ids.sysfs
            return EventDraft("xid", severity, subject, f"Xid {xid.xid} on {who}: {xid.text or name}", data, at)
        if match.kind == "gpu_off_bus":
            if self._last_xid79 == ids.sysfs:
                # The driver prints this right after its Xid 79; one event says it.
                return None
            return EventDraft("gpu_off_bus", "critical", subject, f"{who} has fallen off the bus", data, at)
        assert match.aer is not None
        data.update(severity=match.aer.severity, error_type=match.aer.error_type, agent=match.aer.agent)
        return EventDraft("pcie_aer", aer_severity(match.aer.severity), subject,
                          f"PCIe {match.aer.severity} error on {who}: {match.aer.error_type}", data, at)

    def close(self) -> None:
        """Stop the thread and close the log."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self._reader.close()


def make_kernel_log_collector(ctx: CollectorContext) -> KernelLogCollector:
    """Registry factory."""
    gpu = ctx.config.gpu
    return KernelLogCollector(ctx.root, ctx.clock, path=gpu.kmsg_path, keep_lines=gpu.kernel_log_lines)
