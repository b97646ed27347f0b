"""AMD GPU collector: amdgpu sysfs (hwmon power, busy %, DPM clocks, temperature, VRAM, GTT), e.g. Strix Halo."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rigmon.collectors.base import CollectorContext, NoData, PolledCollector
from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.hwmon_chips import HwmonChip, chip_incomplete, device_hwmon_dirs, hwmon_registrations
from rigmon.collectors.sysfs_values import parse_int, parse_millidegrees
from rigmon.hw.root import HostRoot
from rigmon.lazy_re import lazy_compile
from rigmon.schema import AmdGpuReading

AMD_VENDOR = "0x1002"
MICRO = 1_000_000.0
MILLI = 1000.0

#: The files of a card's hwmon device a tick reads, the power ones in the order they count.
POWER_FILES = ("power1_average", "power1_input")
TEMP_FILE = "temp1_input"

_CARD = lazy_compile(r"^card\d+$")
_DPM_LINE = lazy_compile(r"^\s*\d+:\s*(\d{1,9})\s*[Mm][Hh]z\s*(\*)?\s*$")


def parse_dpm_current(text: str | None) -> int | None:
    """The current level (marked ``*``) of a ``pp_dpm_sclk``/``pp_dpm_mclk`` table, in MHz."""
    if text is None:
        return None
    for line in text.splitlines():
        # 1: 2900Mhz *
        m = _DPM_LINE.match(line)
        if m is not None and m.group(2):
            return int(m.group(1))
    return None




def parse_microwatts(text: str | None) -> float | None:
    """An hwmon power attribute (µW) in watts."""
    value = parse_int(text)
    return None if value is None else value / MICRO




@dataclass(frozen=True, slots=True)
class CardHwmon:
    """The files of a card's hwmon device a tick reads (paths below ``/sys/class/drm/<card>/device``)."""

    #: Its power files in the order they are read, the first readable one counting: newer kernels
    #: report an APU's power as ``power1_input``, a dGPU's as ``power1_average`` (some have both).
    power_paths: tuple[str, ...]
    temp_path: str | None
    #: The hwmon registration the files are of (``None``: the card has no hwmon device).
    chip: HwmonChip | None = None
    #: The reading files this registration has shown at any read of the card's facts: one missing
    #: now (its driver removed it) has the facts read again soon, backing off, until it is back.
    seen: frozenset[str] = frozenset()


class AmdGpuCollector(PolledCollector):
    """Every amdgpu card under /sys/class/drm, listed by PCI address (a card number may change at a reboot).

    Which of a card's hwmon files to read is worked out once per card (see `DeviceFacts`): again
    when the hwmon devices registered change (amdgpu reloaded registers the card's hwmon device
    again, maybe as another ``hwmonN``, see `hwmon_registrations`), every
    `device_facts.REFRESH_EVERY` reads, and soon, backing off, while the card has no hwmon device
    or it lacks its readings (its driver is still creating them, or removed one it showed). A
    reading file a tick finds gone (`HostRoot.read_present`) has them worked out again at the next
    tick (`DeviceFacts.reread`), as `hwmon_chips.read_chip_input` does for hwmon chips: it is
    opened once, not every tick until the refresh.

    Args:
        root: the machine's files.
    """

    name = "amd_gpu"

    def __init__(self, root: HostRoot) -> None:
        self.root = root
        self._hwmon: DeviceFacts[str, CardHwmon] = DeviceFacts()
        #: The hwmon devices registered at this read (`hwmon_registrations`).
        self._chips: list[HwmonChip] = []

    def collect(self) -> Sequence[object]:
        out: list[AmdGpuReading] = []
        cards = [card for card in self.root.listdir("/sys/class/drm") if _CARD.match(card)]
        # Connectors (card0-eDP-1) and render nodes are not cards.
        self._chips = hwmon_registrations(self.root)
        self._hwmon.begin((*cards, *self._chips))
        for card in cards:
            dev = f"/sys/class/drm/{card}/device"
            if self.root.read_attr(f"{dev}/vendor") != AMD_VENDOR:
                continue
            out.append(self._card(card, dev))
        if not out:
            raise NoData("no amdgpu device")
        # By PCI address, the GPU's of every boot: the card numbers follow the drivers' probe order and may
        # change at a reboot, and an alarm's subject, a GPU without an identity field, is its place in the list.
        out.sort(key=lambda r: (r.pci_bus_id is None, r.pci_bus_id or "", r.card))
        return out

    def _find_hwmon(self, card: str) -> CardHwmon:
        """The power and temperature files of ``card``'s hwmon device (none while it has none)."""
        for base in device_hwmon_dirs(self.root, f"/sys/class/drm/{card}/device"):
            entries = self.root.listdir(base)
            present = frozenset(entries)
            hwmon = base.rpartition("/")[2]
            chip = next((c for c in self._chips if c[0] == hwmon), None)
            before = self._hwmon.previous(card)
            seen = before.seen if before is not None and before.chip == chip else frozenset()
            if chip_incomplete(entries) or not seen <= present:
                self._hwmon.recheck(card)
            return CardHwmon(
                power_paths=tuple(f"{base}/{name}" for name in POWER_FILES if name in present),
                temp_path=f"{base}/{TEMP_FILE}" if TEMP_FILE in present else None,
                chip=chip,
                seen=seen | (present & {*POWER_FILES, TEMP_FILE}),
            )
        self._hwmon.recheck(card)
        return CardHwmon(power_paths=(), temp_path=None)

    def _read_input(self, card: str, path: str) -> str | None:
        """``card``'s hwmon reading file ``path``, read every tick; ``None`` when it does not read
        (read again at the next tick). A file gone (its driver removed it) has the card's hwmon
        files worked out again at the next tick (`DeviceFacts.reread`)."""
        try:
            return self.root.read_present(path)
        except FileNotFoundError:
            self._hwmon.reread(card)
            return None

    def _card(self, card: str, dev: str) -> AmdGpuReading:
        link = self.root.readlink(dev)
        bus_id = link.rstrip("/").rsplit("/", 1)[-1] if link else None
        hwmon = self._hwmon.get(card, self._find_hwmon)
        power_w = None
        for path in hwmon.power_paths:
            power_w = parse_microwatts(self._read_input(card, path))
            if power_w is not None:
                break
        temp_c = None if hwmon.temp_path is None else parse_millidegrees(self._read_input(card, hwmon.temp_path))
        busy = parse_int(self.root.read_attr(f"{dev}/gpu_busy_percent"))
        return AmdGpuReading(
            card=card,
            pci_bus_id=bus_id,
            power_w=power_w,
            busy_pct=None if busy is None else float(busy),
            clock_sclk_mhz=parse_dpm_current(self.root.read_text(f"{dev}/pp_dpm_sclk")),
            clock_mclk_mhz=parse_dpm_current(self.root.read_text(f"{dev}/pp_dpm_mclk")),
            temp_c=temp_c,
            vram_total_bytes=parse_int(self.root.read_attr(f"{dev}/mem_info_vram_total")),
            vram_used_bytes=parse_int(self.root.read_attr(f"{dev}/mem_info_vram_used")),
            gtt_total_bytes=parse_int(self.root.read_attr(f"{dev}/mem_info_gtt_total")),
            gtt_used_bytes=parse_int(self.root.read_attr(f"{dev}/mem_info_gtt_used")),
        )


def make_amd_gpu_collector(ctx: CollectorContext) -> AmdGpuCollector:
    """Registry factory."""
    return AmdGpuCollector(ctx.root)
