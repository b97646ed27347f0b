"""An AMD GPU's history in the journal follows its PCI address across a reboot that renumbers the DRM cards."""

from __future__ import annotations

from pathlib import Path

from msgspec.structs import replace

from rigmon.agent.journal import JournalReader, JournalStore
from rigmon.schema import AmdGpuReading, Frame
from tests.agent.journal_frames import T0, FakeClock, frame

BUS = "0000:c3:00.0"


def with_amd(f: Frame, card: str, power_w: float) -> Frame:
    gpu = AmdGpuReading(card=card, pci_bus_id=BUS, power_w=power_w, busy_pct=None, clock_sclk_mhz=None,
                        clock_mclk_mhz=None, temp_c=None, vram_total_bytes=None, vram_used_bytes=None)
    return replace(f, readings=replace(f.readings, amd_gpus=(gpu,)))


def test_an_amd_gpus_power_history_goes_on_when_a_reboot_renumbers_its_card(tmp_path: Path) -> None:
    # Two hours: card0 the first, card1 (simpledrm took card0 at the reboot) the second, one GPU.
    store = JournalStore(tmp_path, FakeClock())
    frames = [with_amd(frame(i + 1, T0 + i, 50.0), "card0" if i < 3600 else "card1", 100.0 + i % 7)
              for i in range(7200)]
    store.write(frames)
    store.downsample()
    store.close()
    with JournalReader(tmp_path) as reader:
        name = f"amd_gpus[{BUS}].power_w"
        for start, end, tier in ((T0 + 3500, T0 + 3700, "frames"), (T0, T0 + 7200, "60s")):
            history = reader.history("n1", start, end, 1.0)
            assert history.tier == tier
            assert not [n for n in history.series if "card" in n]
            series = history.series[name]
            assert series.at[0] <= start + 60 and series.at[-1] >= end - 61, (series.at[0], series.at[-1])
            assert max(series.max) == 106.0
