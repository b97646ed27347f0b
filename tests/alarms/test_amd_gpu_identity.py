"""An AMD GPU's alarms name it by its PCI address: its DRM card number follows the drivers' probe
order, and its place in the list moves when a GPU before it is gone."""

from __future__ import annotations

import msgspec
import pytest

from rigmon.alarms.selector import parse_selector
from rigmon.schema import AmdGpuReading


@pytest.mark.parametrize("present", [("0000:03:00.0", "0000:c3:00.0"), ("0000:c3:00.0",)],
                         ids=["both", "first-gone"])
def test_an_amd_gpus_alarm_subject_is_its_pci_address(present: tuple[str, ...]) -> None:
    # By position (no identity field) the hot GPU was amd_gpus[#1], then amd_gpus[#0] when the GPU
    # before it in PCI order fell off or was taken out: its alarm became another's.
    temps = {"0000:03:00.0": 60.0, "0000:c3:00.0": 91.0}
    readings = [AmdGpuReading(card=f"card{i}", pci_bus_id=bus, power_w=None, busy_pct=None, clock_sclk_mhz=None,
                              clock_mclk_mhz=None, temp_c=temps[bus], vram_total_bytes=None, vram_used_bytes=None)
                for i, bus in enumerate(present)]
    hot = [m for m in parse_selector("amd_gpus[*].temp_c").select({"amd_gpus": msgspec.to_builtins(readings)})
           if m.value > 90]
    assert [(m.subject, m.labels["pci_bus_id"]) for m in hot] == [("amd_gpus[pci_bus_id=0000:c3:00.0]", "0000:c3:00.0")]
