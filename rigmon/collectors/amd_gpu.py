"""AMD GPU collector: amdgpu sysfs (hwmon power, busy %, DPM clocks, temperature, VRAM), e.g. Strix Halo."""

from __future__ import annotations

from collections.abc import Sequence

from rigmon.collectors.base import CollectorContext, NoData, PolledCollector
from rigmon.collectors.sysfs_values import parse_int, parse_millidegrees
from rigmon.hw.root import HostRoot
from rigmon.lazy_re import lazy_compile
from rigmon.schema import AmdGpuReading

AMD_VENDOR = "0x1002"
MICRO = 1_000_000.0
MILLI = 1000.0

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




class AmdGpuCollector(PolledCollector):
    """Every amdgpu card under /sys/class/drm.

    Args:
        root: the machine's files.
    """

    name = "amd_gpu"

    def __init__(self, root: HostRoot) -> None:
        self.root = root

    def collect(self) -> Sequence[object]:
        out: list[object] = []
        for card in self.root.listdir("/sys/class/drm"):
            if not _CARD.match(card):
                continue  # connectors (card0-eDP-1) and render nodes
            dev = f"/sys/class/drm/{card}/device"
            if self.root.read_attr(f"{dev}/vendor") != AMD_VENDOR:
                continue
            out.append(self._card(card, dev))
        if not out:
            raise NoData("no amdgpu device")
        return out

    def _card(self, card: str, dev: str) -> AmdGpuReading:
        link = self.root.readlink(dev)
        bus_id = link.rstrip("/").rsplit("/", 1)[-1] if link else None
        power_w = temp_c = None
        for hwmon in self.root.listdir(f"{dev}/hwmon"):
            base = f"{dev}/hwmon/{hwmon}"
            # Newer kernels report APU power as power1_input, dGPUs as power1_average.
            power_w = parse_microwatts(self.root.read_attr(f"{base}/power1_average"))
            if power_w is None:
                power_w = parse_microwatts(self.root.read_attr(f"{base}/power1_input"))
            temp_c = parse_millidegrees(self.root.read_attr(f"{base}/temp1_input"))
            break
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
        )


def make_amd_gpu_collector(ctx: CollectorContext) -> AmdGpuCollector:
    """Registry factory."""
    return AmdGpuCollector(ctx.root)
