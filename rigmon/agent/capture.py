"""Raw captures of a node's sources for bug reports: /proc files and sysfs attributes through HostRoot.

What is captured is a list of files and of sysfs directories walked one or two levels deep
(attributes only, bounded in count and size), so a report shows exactly what the kernel
said. Collectors that keep text of their own (kernel log lines about GPUs, PCIe, md and
Thunderbolt) offer it through `CaptureSource`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from rigmon.hw.root import HostRoot

#: Single files read whole (bounded by `MAX_FILE_BYTES`).
CAPTURE_FILES = (
    "/proc/mdstat",
    "/proc/diskstats",
    "/proc/partitions",
    "/proc/net/dev",
    "/proc/loadavg",
    "/proc/meminfo",
    "/proc/uptime",
    "/proc/version",
    "/proc/cmdline",
    "/proc/sys/kernel/osrelease",
    "/proc/sys/kernel/random/boot_id",
    "/proc/driver/nvidia/version",
    "/sys/module/nvidia/version",
)

#: Directories whose entries' attributes are captured, and how deep below each entry.
CAPTURE_TREES: tuple[tuple[str, int], ...] = (
    ("/sys/class/net", 1),
    ("/sys/class/thermal", 1),
    ("/sys/class/hwmon", 1),
    ("/sys/class/nvme", 1),
    ("/sys/class/drm", 1),
    ("/sys/bus/thunderbolt/devices", 1),
    # RDMA devices: ports/<n>/{state,rate,...} and their counters/ and hw_counters/.
    ("/sys/class/infiniband", 4),
    ("/sys/block", 3),
)

#: PCIe attributes of every PCI function (link training and error counters).
PCI_ATTRS = (
    "vendor", "device", "class", "current_link_speed", "current_link_width", "max_link_speed",
    "max_link_width", "aer_dev_correctable", "aer_dev_fatal", "aer_dev_nonfatal", "power_state",
)

#: Attributes never read: binary blobs, write-only triggers, or reads with side effects.
SKIP_NAMES = frozenset({
    "config", "rom", "remove", "rescan", "reset", "new_id", "remove_id", "bind", "unbind", "uevent_seqnum",
    "nvm_authenticate", "boot", "key", "authorized", "power_resource", "descriptor", "eeprom", "nvmem",
})
#: Within /sys/block only these subtrees matter (md state, queue limits of the device).
BLOCK_SUBDIRS = frozenset({"md", "queue", "device"})

MAX_FILE_BYTES = 256 * 1024
MAX_ATTR_BYTES = 4096
MAX_FILES = 4000
MAX_TOTAL_BYTES = 8 * 1024 * 1024


@runtime_checkable
class CaptureSource(Protocol):
    """A collector that keeps raw text worth putting in a bug report (kernel log lines)."""

    def captures(self) -> Mapping[str, str]:
        """Raw text by name (``kernel-log.txt``); called from an executor thread."""
        ...


@dataclass
class Capture:
    """Files captured so far, and what could not be."""

    files: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    total_bytes: int = 0

    def add(self, path: str, text: str) -> bool:
        """Keep ``text`` under ``path``; False once the limits are reached."""
        if len(self.files) >= MAX_FILES or self.total_bytes + len(text) > MAX_TOTAL_BYTES:
            if not self.errors or not self.errors[-1].startswith("capture limit"):
                self.errors.append(f"capture limit reached ({MAX_FILES} files or {MAX_TOTAL_BYTES} bytes)")
            return False
        self.files[path] = text
        self.total_bytes += len(text)
        return True


def capture_node(root: HostRoot, sources: Mapping[str, object] | None = None) -> Capture:
    """Read the node's raw sources below ``root`` (and collectors' own captures).

    Args:
        root: the node's root.
        sources: collectors by name; those implementing `CaptureSource` add their text.
    """
    cap = Capture()
    for rel in CAPTURE_FILES:
        try:
            text = root.read_text(rel, MAX_FILE_BYTES)
        except OSError as exc:
            cap.errors.append(f"{rel}: {exc.strerror or exc}")
            continue
        if text is not None:
            cap.add(rel, text)
    for base, depth in CAPTURE_TREES:
        for entry in root.listdir(base):
            _walk(root, f"{base}/{entry}", depth, cap, top=base)
    for dev in root.listdir("/sys/bus/pci/devices"):
        for attr in PCI_ATTRS:
            rel = f"/sys/bus/pci/devices/{dev}/{attr}"
            text = _read_attr(root, rel, cap)
            if text is not None and not cap.add(rel, text):
                return cap
    for name, source in (sources or {}).items():
        if isinstance(source, CaptureSource):
            try:
                for key, text in source.captures().items():
                    cap.add(f"collector:{name}/{key}", text)
            except Exception as exc:  # noqa: BLE001 - one collector's failure must not lose the capture
                cap.errors.append(f"collector {name}: {type(exc).__name__}: {exc}")
    return cap


def _read_attr(root: HostRoot, rel: str, cap: Capture) -> str | None:
    try:
        return root.read_attr(rel, MAX_ATTR_BYTES)
    except OSError as exc:
        cap.errors.append(f"{rel}: {exc.strerror or exc}")
        return None


def _walk(root: HostRoot, rel: str, depth: int, cap: Capture, top: str) -> None:
    """Capture the attributes of one sysfs object, descending ``depth - 1`` more levels."""
    path = root.path(rel)
    # Entries of /sys/class and /sys/bus are symlinks to the device; follow the entry itself
    # but never a symlink inside it (sysfs links point back up and would loop).
    for name in root.listdir(rel):
        if name in SKIP_NAMES or name.startswith("."):
            continue
        child = f"{rel}/{name}"
        child_path = path / name
        if child_path.is_symlink():
            if name == "device":
                target = root.readlink(child)
                if target is not None:
                    cap.add(f"{child}.symlink", target)
            continue
        if child_path.is_dir():
            if depth > 1 and (top != "/sys/block" or name in BLOCK_SUBDIRS or name.startswith("dev-")
                              or rel.count("/") > 3):
                _walk(root, child, depth - 1, cap, top)
            continue
        text = _read_attr(root, child, cap)
        if text is not None and not cap.add(child, text):
            return
