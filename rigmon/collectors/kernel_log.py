"""Kernel log collector: NVRM Xid lines, GPUs fallen off the bus and PCIe AER errors from the kernel log.

The log is /dev/kmsg on a node, or a text file in one of the formats of
`rigmon.collectors.kernel_log_formats` (a ``dmesg`` or ``journalctl -k`` capture); the
messages are recognised by `rigmon.collectors.kernel_messages`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence

from rigmon.clock import Clock
from rigmon.collectors.base import (
    CollectorContext,
    CollectorError,
    EventDraft,
    NoData,
    PushFn,
)
from rigmon.collectors.kernel_log_formats import (
    KmsgRecord,
    LogFormat,
    LogRecord,
    TextFormat,
    detect_log_format,
    is_journal_marker,
    parse_kmsg_record,
    parse_log_record,
    unescape_kmsg,
)
from rigmon.collectors.kernel_messages import (
    OFF_BUS_WINDOW,
    XID_INFO,
    AerLine,
    KernelLogMatcher,
    KernelMatch,
    PciBusIds,
    XidLine,
    aer_severity,
    parse_aer,
    parse_off_bus,
    parse_off_bus_header,
    parse_pci_bus_id,
    parse_xid,
)
from rigmon.hw.kmsg import KmsgReader, KmsgUnavailable
from rigmon.hw.root import HostRoot
from rigmon.schema import KernelLogLine, KernelLogReading

# The parsers and matchers lived in this module and stay importable from it.
__all__ = [
    "OFF_BUS_WINDOW",
    "XID_INFO",
    "AerLine",
    "KernelLogCollector",
    "KernelLogMatcher",
    "KernelMatch",
    "KmsgRecord",
    "LogRecord",
    "PciBusIds",
    "XidLine",
    "aer_severity",
    "make_kernel_log_collector",
    "nvidia_gpu_bus_ids",
    "parse_aer",
    "parse_kmsg_record",
    "parse_off_bus",
    "parse_off_bus_header",
    "parse_pci_bus_id",
    "parse_xid",
    "unescape_kmsg",
]

USEC = 1_000_000.0
#: PCI vendor id of NVIDIA in sysfs ``vendor`` files.
NVIDIA_VENDOR = "0x10de"
#: PCI base class of display controllers (VGA 0x0300xx, 3D controller 0x0302xx).
DISPLAY_CLASS_PREFIX = "0x03"
#: Matched lines carried in every frame (all kept ones are in `KernelLogCollector.recent_lines`).
RECENT_IN_FRAME = 16
#: Longest the thread blocks between looks at the log when nothing wakes it (a missed
#: notification costs at most this much delay; `close` wakes it at once).
IDLE_WAIT_S = 5.0
#: Shortest time between two looks at the log when the last one found nothing.
MIN_WAKE_S = 0.05
#: Time between two tries to read a log whose last read failed (EIO from a log file's disk).
READ_RETRY_S = 1.0
#: Formats a text log may be in, for error messages.
ACCEPTED_FORMATS = ("/dev/kmsg records", "dmesg [-T|--time-format iso] with timestamps",
                    "journalctl -k [-o short|short-precise|short-iso]",
                    "any dmesg capture with kernel_log.format = \"dmesg\"")


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
        fmt: the log's format; ``auto`` takes a character device as /dev/kmsg and
            recognises a text file by its first record (see `detect_log_format`).
    """

    name = "kernel_log"

    def __init__(self, root: HostRoot, clock: Clock, path: str = "/dev/kmsg", keep_lines: int = 200,
                 fmt: LogFormat = "auto") -> None:
        self.root = root
        self.clock = clock
        self.path = path
        self.fmt = fmt
        self._reader = KmsgReader(root, path)
        self._format: TextFormat | None = None
        self._format_error: str | None = None
        self._position = 0
        #: Records of a known format that did not parse (a stray line in a text log).
        self.unparsed_total = 0
        self._matcher = KernelLogMatcher()
        self._recent: deque[KernelLogLine] = deque(maxlen=keep_lines)
        self._lock = threading.Lock()
        self._records_total = 0
        self._matched_total = 0
        self._last_seq: int | None = None
        self._seq_lost = 0
        self._lost_seen = 0
        #: /dev/kmsg records rejected whole (a garbled header: no sequence number) since the last
        #: record read; the sequence gap they leave is theirs, not records overwritten.
        self._garbled_pending = 0
        #: Records of a sequence gap that were there but garbled (all of them; `_garbled_new`: not said yet).
        self.garbled_total = 0
        self._garbled_new = 0
        self._gpus: list[str] = []
        self._batch_records = 0
        self._last_xid79: str | None = None
        self._pending: list[EventDraft] = []
        self._open_error: KmsgUnavailable | None = None
        #: Why the last read of the open log failed; ``None`` once a read succeeds.
        self._read_error: str | None = None
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
        if self._reader.is_device:
            self._format = "kmsg"
        self._refresh_gpus()
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
            self._reader.wait(IDLE_WAIT_S)
            if self._stop.is_set():
                break
            with self._lock:
                events = self._drain_or_note(emit=True)
                idle = self._batch_records == 0
                failed = self._read_error is not None
            if events:
                push(events)
            if failed:
                self._stop.wait(READ_RETRY_S)
            elif idle:
                # Woken with nothing to read (a device that always polls readable, a file
                # written without a whole line): do not spin.
                self._stop.wait(MIN_WAKE_S)

    def collect(self) -> Sequence[object]:
        with self._lock:
            if not self._open():
                assert self._open_error is not None
                if self._open_error.missing:
                    raise NoData(str(self._open_error))
                raise CollectorError(str(self._open_error))
            events: list[object] = []
            if self._thread is None:
                events.extend(self._drain_or_note(emit=True))
            if self._format_error is not None:
                raise CollectorError(self._format_error)
            if self._read_error is not None:
                raise CollectorError(self._read_error)
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
        self._batch_records = len(raws)
        events = self._parse(raws, emit) if raws else []
        lost_total = self._lost_total()
        lost, self._lost_seen = lost_total - self._lost_seen, lost_total
        garbled, self._garbled_new = self._garbled_new, 0
        if emit and garbled > 0:
            events.insert(0, EventDraft(
                "kernel_log_garbled", "warning", "kernel_log",
                f"{garbled} kernel log record{'s' if garbled != 1 else ''} rigmon could not read (a garbled "
                f"header, not a kernel's record format): Xid, AER or bus errors among them are not shown",
                {"garbled": garbled, "garbled_total": self.garbled_total}))
        if emit and lost > 0:
            events.insert(0, EventDraft(
                "kernel_log_overrun", "warning", "kernel_log",
                f"{lost} kernel log record{'s' if lost != 1 else ''} overwritten before rigmon read "
                f"{'them' if lost != 1 else 'it'}: Xid, AER or bus errors among them are not shown",
                {"lost": lost, "lost_total": lost_total}))
        return events

    def _drain_or_note(self, emit: bool) -> list[EventDraft]:
        """`_drain`, with a failed read of the log noted in `_read_error` (shown by `collect`, cleared
        by the next read that succeeds) instead of raised: the thread that pushes the log's events
        must outlive a read error, or every Xid after it would go unseen while the collector said ok.
        A failed read consumes no record, so the next one takes up where it stopped."""
        try:
            events = self._drain(emit)
        except OSError as exc:
            self._batch_records = 0
            self._read_error = f"{self.path}: read failed: {exc}"
            return []
        self._read_error = None
        return events

    def _resolve_format(self, text: str) -> TextFormat | None:
        """The log's format, decided on its first record; sets `_format_error` when unknown."""
        if self._format is not None or self._format_error is not None:
            return self._format
        if not text.strip() or is_journal_marker(text):
            return None
        detected = detect_log_format(text)
        first = text.partition("\n")[0].strip()[:120]
        if self.fmt == "auto":
            if detected is None:
                self._format_error = (f"{self.path}: not a kernel log rigmon knows (first line {first!r}); "
                                      f"accepted: {'; '.join(ACCEPTED_FORMATS)}")
                return None
            self._format = detected
        elif self.fmt == "dmesg" or detected == self.fmt:
            # A dmesg capture without timestamps (dmesg -t) is plain text: taken as configured.
            self._format = self.fmt
        else:
            self._format_error = f"{self.path}: kernel_log.format is {self.fmt!r} but the first line is not: {first!r}"
        return self._format

    def _parse(self, raws: list[bytes], emit: bool) -> list[EventDraft]:
        # The boot time and the GPUs' bus ids are read when a batch holds a match, not for
        # every batch: most kernel log records are about other things. The GPU list is a
        # union, so a GPU seen once keeps its index after it falls off the bus; it is read
        # at open too (`_open`), while every GPU is still there.
        boot_at: float | None = None
        looked = False
        events: list[EventDraft] = []
        for raw in raws:
            text = raw.decode("utf-8", "replace")
            fmt = self._resolve_format(text)
            if fmt is None:
                continue
            self._position += 1
            record = parse_log_record(text, fmt, self._position)
            if record is None:
                # Other programs' lines of a journal are not kernel records; anything else
                # that does not parse in a known format is counted.
                if fmt != "journal" and text.strip():
                    self.unparsed_total += 1
                    if fmt == "kmsg":
                        self._garbled_pending += 1
                continue
            self._records_total += 1
            if fmt == "kmsg":
                self._count_gap(record.seq)
            match = self._matcher.feed(record)
            if match is None:
                continue
            self._matched_total += 1
            if not looked:
                looked = True
                boot_at = self._boot_at()
                self._refresh_gpus()
            at = _record_at(record, boot_at)
            self._recent.append(KernelLogLine(seq=record.seq, at=at, level=record.level, kind=match.kind,
                                              text=record.message))
            if emit:
                event = self._event(match, at)
                if event is not None:
                    events.append(event)
        return events

    def _count_gap(self, seq: int) -> None:
        """Count the records between the last one read and ``seq``: those rejected whole since
        (their sequence number was in the garbled header) were read, the rest overwritten."""
        gap = seq - self._last_seq - 1 if self._last_seq is not None else 0
        garbled = min(max(gap, 0), self._garbled_pending)
        self._garbled_pending = 0
        self.garbled_total += garbled
        self._garbled_new += garbled
        self._seq_lost += max(gap, 0) - garbled
        self._last_seq = seq

    def _refresh_gpus(self) -> None:
        self._gpus = sorted(set(self._gpus) | set(nvidia_gpu_bus_ids(self.root)))

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
            "source": self._format or "kmsg", "seq": match.record.seq, "gpu_index": index,
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
        aer = match.aer
        data.update(severity=aer.severity, error_type=aer.error_type, agent=aer.agent, requester_id=aer.requester_id)
        # Who reported it: the link role (Receiver/Transmitter...) and, in the old format,
        # the requester id of the reporting device.
        by = " ".join(p for p in (aer.agent, aer.requester_id) if p)
        return EventDraft("pcie_aer", aer_severity(aer.severity), subject,
                          f"PCIe {aer.severity} error on {who}: {aer.error_type}" + (f" ({by})" if by else ""),
                          data, at)

    def close(self) -> None:
        """Stop the thread and close the log."""
        self._stop.set()
        self._reader.interrupt()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self._reader.close()


def make_kernel_log_collector(ctx: CollectorContext) -> KernelLogCollector:
    """Registry factory."""
    gpu = ctx.config.gpu
    return KernelLogCollector(ctx.root, ctx.clock, path=gpu.kmsg_path, keep_lines=gpu.kernel_log_lines,
                              fmt=ctx.config.kernel_log.format)


def _record_at(record: LogRecord, boot_at: float | None) -> float | None:
    """Unix seconds of a record: its own zoned time, else boot time plus its time since boot.

    dmesg's ``[secs]`` are taken as this boot's, like /dev/kmsg's; a log with local times
    and no zone (``dmesg -T``, ``journalctl -k`` short) gives none.
    """
    if record.wall_at is not None:
        return round(record.wall_at, 6)
    if record.ts_us is None or boot_at is None:
        return None
    return round(boot_at + record.ts_us / USEC, 6)
