"""Pure recognisers of kernel messages about GPUs and the PCIe bus: NVRM Xid, fallen off the bus, AER.

They read one message's text, whatever log it came from (`rigmon.collectors.kernel_log_formats`
turns /dev/kmsg records, dmesg and journalctl lines into `LogRecord`). No I/O, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rigmon.collectors.kernel_log_formats import LogRecord
from rigmon.lazy_re import lazy_compile

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
    """A PCIe AER ``PCIe Bus Error`` line of the device that logged it.

    ``agent`` is who reported the error on the link (``Receiver ID``, ``Requester ID``,
    ``Completer ID``, ``Transmitter ID``); ``requester_id`` is the device the old format
    names with ``id=00e0`` (bus 0x00, device 0x1c, function 0), as a sysfs bus id.
    """

    pci_bus_id: str
    severity: str
    error_type: str
    agent: str | None
    requester_id: str | None = None


@dataclass(frozen=True, slots=True)
class KernelMatch:
    """A record a rule matched: ``xid``, ``gpu_off_bus`` or ``pcie_aer``."""

    kind: str
    pci_bus_id: str
    record: LogRecord
    xid: XidLine | None = None
    aer: AerLine | None = None


_BUS_NVML = lazy_compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?$")


def parse_pci_bus_id(text: str) -> PciBusIds | None:
    """Normalise any of the spellings of a PCI address.

    Accepts ``00000000:1A:00.0`` (NVML), ``0000:1a:00.0`` (sysfs), ``0000:1a:00`` (Xid lines,
    function 0 implied) and ``1a:00.0`` (old drivers, domain 0 implied); a ``PCI:`` prefix is
    allowed.
    """
    text = text.strip()
    if text.upper().startswith("PCI:"):
        text = text[4:]
    m = _BUS_NVML.match(text)
    # "1a:00" alone says neither domain nor function: not an address.
    if m is None or (m.group(1) is None and m.group(4) is None):
        return None
    domain, bus, dev = int(m.group(1) or "0", 16), int(m.group(2), 16), int(m.group(3), 16)
    func = int(m.group(4) or 0)
    if domain > 0xFFFF or dev > 0x1F:
        return None
    return PciBusIds(
        sysfs=f"{domain:04x}:{bus:02x}:{dev:02x}.{func}",
        nvml=f"{domain:08X}:{bus:02X}:{dev:02X}.{func}",
        xid=f"{domain:04x}:{bus:02x}:{dev:02x}",
    )


# The parenthesis: "PCI:0000:1a:00" (R4xx+), "0000:03:00" (R3xx and earlier), MIG " GPU-I:01 GPU-CI:00".
_XID = lazy_compile(
    r"NVRM: Xid \((?:PCI:)?(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?[^)]*\): "
    r"(\d{1,10}),\s*(.*)", re.DOTALL)
_XID_PID = lazy_compile(r"^pid=('?)([^,']*)\1,\s*(.*)$", re.DOTALL)
_XID_NAME = lazy_compile(r"^name=([^,]*),\s*(.*)$", re.DOTALL)


def parse_xid(message: str) -> XidLine | None:
    """Parse an NVRM Xid message in any form drivers have printed; ``None`` for other text."""
    # NVRM: Xid (PCI:0000:1d:00): 13, pid=9911, name=python, Graphics SM Warp Exception on ...
    # NVRM: Xid (PCI:0000:1b:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error ...
    # NVRM: Xid (0000:03:00): 13, 0003 00000000 00008297 00001098 00000000 00000044   (R2xx/R3xx)
    m = _XID.search(message)
    if m is None:
        return None
    ids = parse_pci_bus_id(f"{m.group(1) or '0000'}:{m.group(2)}:{m.group(3)}")
    if ids is None:
        return None
    text = m.group(5).strip()
    pid = process = None
    # The process context: "pid=N, name=X, ", either half alone, or "<unknown>" for both.
    if (pm := _XID_PID.match(text)) is not None:
        pid, text = pm.group(2), pm.group(3)
    if (nm := _XID_NAME.match(text)) is not None:
        process, text = nm.group(1), nm.group(2)
    if pid == "<unknown>":
        pid = None
    if process == "<unknown>":
        process = None
    return XidLine(pci_bus_id=ids.sysfs, xid=int(m.group(4)), pid=pid, process=process, text=text.strip())


_BDF = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
# NVRM: GPU 0000:1a:00.0: GPU has fallen off the bus.     (current drivers)
# NVRM: GPU 18:00.0: GPU has fallen off the bus.          (no PCI domain)
# NVRM: GPU at 0000:01:00.0 has fallen off the bus.       (R3xx)
_OFF_BUS_SHORT = lazy_compile(rf"NVRM: GPU (?:at )?(?:PCI:)?({_BDF}):? (?:GPU )?has fallen off the bus")
_GPU_HEADER = lazy_compile(rf"NVRM: The NVIDIA GPU ({_BDF})")
_OFF_BUS_TAIL = lazy_compile(r"fallen off the bus")


def _sysfs_id(text: str) -> str | None:
    ids = parse_pci_bus_id(text)
    return None if ids is None else ids.sysfs


def parse_off_bus(message: str) -> str | None:
    """The sysfs bus id of a complete "fallen off the bus" message without an Xid token.

    Matches ``NVRM: GPU 0000:1a:00.0: GPU has fallen off the bus.`` (also without the PCI
    domain), the older ``NVRM: GPU at 0000:01:00.0 has fallen off the bus.``, and the whole
    multi-line form when it arrives as one record (newlines escaped as ``\\x0a`` in kmsg, or
    dmesg's indented continuation lines).
    """
    m = _OFF_BUS_SHORT.search(message)
    if m is not None:
        return _sysfs_id(m.group(1))
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
    return None if m is None else _sysfs_id(m.group(1))


# nvidia 0000:1a:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
# pcieport 0000:00:1c.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, id=00e0(Transmitter ID)
#   (before 4.x: the reporting device's requester id, bus << 8 | devfn, ahead of the agent)
_AER_DETAIL = lazy_compile(
    r"^(?:\S+ )?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): PCIe Bus Error: "
    r"severity=([^,]+), type=([^,]+)(?:, (?:id=([0-9a-fA-F]{4}))?\(([^)]*)\))?"
)


def parse_aer(message: str) -> AerLine | None:
    """Parse the ``PCIe Bus Error`` line an AER error prints, old and new kernels alike."""
    m = _AER_DETAIL.match(message)
    if m is None:
        return None
    bus_id = m.group(1).lower()
    requester = None
    if m.group(4) is not None:
        rid = int(m.group(4), 16)
        domain = bus_id.split(":", 1)[0]
        requester = f"{domain}:{rid >> 8:02x}:{(rid >> 3) & 0x1F:02x}.{rid & 0x7}"
    return AerLine(pci_bus_id=bus_id, severity=m.group(2).strip(), error_type=m.group(3).strip(),
                   agent=m.group(5), requester_id=requester)


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

    def feed(self, record: LogRecord) -> KernelMatch | None:
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
