"""AMD GPU collector: DPM table parsing and amdgpu sysfs reading."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from rigmon.alarms.selector import parse_selector
from rigmon.collectors.amd_gpu import AmdGpuCollector, parse_dpm_current
from rigmon.collectors.base import NoData
from rigmon.hw.root import HostRoot
from rigmon.schema import AmdGpuReading
from rigmon.sim.tree import Tree, write_tree


@pytest.mark.parametrize(
    ("text", "mhz"),
    [
        ("0: 600Mhz\n1: 1500Mhz *\n2: 2900Mhz\n", 1500),
        ("0: 96Mhz *\n1: 1000Mhz\n", 96),
        ("0: 600Mhz\n1: 2900Mhz\n", None),  # no current level (GPU in a deep idle state)
        ("", None),
        (None, None),
    ],
)
def test_parse_dpm_current(text: str | None, mhz: int | None) -> None:
    assert parse_dpm_current(text) == mhz


def test_reads_an_amdgpu_card(tmp_path: Path) -> None:
    dev = "/sys/bus/pci/devices/0000:c3:00.0"
    write_tree(tmp_path, {
        f"{dev}/vendor": "0x1002\n",
        f"{dev}/gpu_busy_percent": "87\n",
        f"{dev}/pp_dpm_sclk": "0: 600Mhz\n1: 2900Mhz *\n",
        f"{dev}/pp_dpm_mclk": "0: 1000Mhz\n1: 4000Mhz *\n",
        f"{dev}/mem_info_vram_total": "103079215104\n",
        f"{dev}/mem_info_vram_used": "51539607552\n",
        f"{dev}/hwmon/hwmon5/power1_input": "98500000\n",
        f"{dev}/hwmon/hwmon5/temp1_input": "71000\n",
        "/sys/class/drm/card1-eDP-1/status": "connected\n",
    })
    Tree(tmp_path).symlink("/sys/class/drm/card1/device", "../../../bus/pci/devices/0000:c3:00.0")
    (reading,) = AmdGpuCollector(HostRoot(tmp_path)).collect()
    assert reading == AmdGpuReading(card="card1", pci_bus_id="0000:c3:00.0", power_w=98.5, busy_pct=87.0,
                                    clock_sclk_mhz=2900, clock_mclk_mhz=4000, temp_c=71.0,
                                    vram_total_bytes=103079215104, vram_used_bytes=51539607552)


def test_an_apus_gtt_is_read_beside_its_vram_carve_out(tmp_path: Path) -> None:
    # A Strix Halo box: the BIOS's 512 MiB carve-out nearly full, the job's 60 GiB in GTT, which the
    # reading left out: the GPU looked idle at 0.4 of 0.5 GiB.
    dev = "/sys/bus/pci/devices/0000:c3:00.0"
    write_tree(tmp_path, {
        f"{dev}/vendor": "0x1002\n",
        f"{dev}/mem_info_vram_total": f"{512 * 1024**2}\n",
        f"{dev}/mem_info_vram_used": f"{400 * 1024**2}\n",
        f"{dev}/mem_info_gtt_total": f"{110 * 1024**3}\n",
        f"{dev}/mem_info_gtt_used": f"{60 * 1024**3}\n",
    })
    Tree(tmp_path).symlink("/sys/class/drm/card0/device", "../../../bus/pci/devices/0000:c3:00.0")
    (reading,) = AmdGpuCollector(HostRoot(tmp_path)).collect()
    assert isinstance(reading, AmdGpuReading)
    assert (reading.vram_used_bytes, reading.gtt_total_bytes, reading.gtt_used_bytes) == \
        (400 * 1024**2, 110 * 1024**3, 60 * 1024**3)


def test_no_amd_gpu_is_absent(tmp_path: Path) -> None:
    with pytest.raises(NoData):
        AmdGpuCollector(HostRoot(tmp_path)).collect()


def test_average_power_before_instantaneous_and_a_missing_busy_percent_is_null(tmp_path: Path) -> None:
    """A dGPU on a newer kernel gives power1_average and power1_input (the average is read); an APU
    kernel without gpu_busy_percent leaves busy ``None``, not 0."""
    dev = "/sys/bus/pci/devices/0000:03:00.0"
    write_tree(tmp_path, {
        f"{dev}/vendor": "0x1002\n",
        f"{dev}/hwmon/hwmon2/power1_average": "251000000\n",
        f"{dev}/hwmon/hwmon2/power1_input": "263000000\n",
    })
    Tree(tmp_path).symlink("/sys/class/drm/card0/device", "../../../bus/pci/devices/0000:03:00.0")
    (reading,) = AmdGpuCollector(HostRoot(tmp_path)).collect()
    assert isinstance(reading, AmdGpuReading)
    assert (reading.power_w, reading.busy_pct, reading.temp_c, reading.vram_total_bytes) == (251.0, None, None, None)


def test_a_hwmon_device_registered_after_the_card_is_read_from_the_next_read(tmp_path: Path) -> None:
    """amdgpu registers the card's hwmon device a moment after the card (a module load): not read
    then; looked for again at the next read, not at the next refresh of what is known of the card."""
    dev = "/sys/bus/pci/devices/0000:c3:00.0"
    tree = write_tree(tmp_path, {f"{dev}/vendor": "0x1002\n"})
    tree.symlink("/sys/class/drm/card0/device", "../../../bus/pci/devices/0000:c3:00.0")
    collector = AmdGpuCollector(HostRoot(tmp_path))
    (reading,) = collector.collect()
    assert isinstance(reading, AmdGpuReading) and (reading.power_w, reading.temp_c) == (None, None)
    tree.write(f"{dev}/hwmon/hwmon1/name", "amdgpu\n")
    tree.write(f"{dev}/hwmon/hwmon1/power1_input", "9500000\n")
    tree.write(f"{dev}/hwmon/hwmon1/temp1_input", "41000\n")
    (reading,) = collector.collect()
    assert isinstance(reading, AmdGpuReading) and (reading.power_w, reading.temp_c) == (9.5, 41.0)


def _two_cards_boot(root: Path, cards: dict[str, str], temps: dict[str, int]) -> None:
    """Two amdgpu cards, DRM card name -> PCI address as this boot's probe order numbered them."""
    for bus_id, temp in temps.items():
        dev = f"/sys/bus/pci/devices/{bus_id}"
        write_tree(root, {f"{dev}/vendor": "0x1002\n", f"{dev}/hwmon/hwmon{temp}/temp1_input": f"{temp}000\n"})
    tree = Tree(root)
    for card, bus_id in cards.items():
        tree.remove(f"/sys/class/drm/{card}")
        tree.symlink(f"/sys/class/drm/{card}/device", f"../../../bus/pci/devices/{bus_id}")


def test_amd_gpus_are_listed_by_pci_address_so_an_alarms_subject_stays_its_gpus_across_a_reboot(tmp_path: Path) -> None:
    # The DRM card numbers follow the drivers' probe order: after a reboot card0 may be the other GPU. The
    # list followed the card numbers, and a rule's subject (amd_gpus[#0]: no identity field) went with them.
    hot, cool = "0000:03:00.0", "0000:c3:00.0"
    temps = {hot: 91, cool: 60}
    selector = parse_selector("amd_gpus[*].temp_c")
    subjects = []
    for cards in ({"card0": cool, "card1": hot}, {"card0": hot, "card1": cool}):
        _two_cards_boot(tmp_path, cards, temps)
        readings = AmdGpuCollector(HostRoot(tmp_path)).collect()
        assert [r.pci_bus_id for r in readings if isinstance(r, AmdGpuReading)] == [hot, cool]
        [subject] = [m.subject for m in selector.select({"amd_gpus": msgspec.to_builtins(readings)}) if m.value > 90]
        subjects.append(subject)
    assert subjects[0] == subjects[1]
