"""nvme and amd_gpu on simulated devices whose hwmon device is registered again (an NVMe controller
reset, amdgpu reloaded), under the same or another hwmonN, its old hwmonN maybe given to another device."""

from __future__ import annotations

import random
from pathlib import Path

from rigmon.collectors.amd_gpu import AmdGpuCollector
from rigmon.collectors.device_facts import REFRESH_EVERY
from rigmon.collectors.nvme import NvmeCollector
from rigmon.hw.root import read_scope
from rigmon.schema import AmdGpuReading, NvmeReading
from rigmon.sim.gpu import SimAmdGpu
from rigmon.sim.node import SimNode
from rigmon.sim.nvme_drive import NVME_HWMON_FILES, SimNvmeDrive
from rigmon.sim.storage import SimStorage
from rigmon.sim.tree import Tree
from tests.collectors.root_helpers import ReadLog


class Node:
    """A simulated node with two NVMe drives (hwmon2 and hwmon3) and an amdgpu iGPU (hwmon1),
    read by the real nvme and amd_gpu collectors a tick at a time, in one read scope as the agent does."""

    def __init__(self, tmp_path: Path) -> None:
        self.drives = [SimNvmeDrive(ctrl=0, temp_c=40.0), SimNvmeDrive(ctrl=1, address="0000:65:00.0", temp_c=50.0)]
        self.gpu = SimAmdGpu()
        self.tree = Tree(tmp_path)
        self.sim = SimNode(name="n", tree=self.tree, rng=random.Random(1),
                           devices=[SimStorage(drives=self.drives), self.gpu])
        self.root = ReadLog(tmp_path)
        self.nvme = NvmeCollector(self.root)
        self.amd = AmdGpuCollector(self.root)
        self.t_s = 0.0

    def tick(self) -> tuple[dict[str, NvmeReading], AmdGpuReading]:
        """The drives' readings by name and the GPU's after one simulated second."""
        self.t_s += 1.0
        self.sim.step(self.t_s)
        self.root.read.clear()
        self.root.listed.clear()
        with read_scope():
            drives = {r.name: r for r in self.nvme.collect() if isinstance(r, NvmeReading)}
            (gpu,) = self.amd.collect()
        assert isinstance(gpu, AmdGpuReading)
        return drives, gpu


def test_an_nvme_hwmon_registered_again_as_another_hwmon_is_read_there_at_the_next_tick(tmp_path: Path) -> None:
    node = Node(tmp_path)
    drives, _ = node.tick()
    assert (drives["nvme0"].temp_c, drives["nvme0"].temp_crit_c) == (39.85, 84.85)
    # nvme0 is reset between two ticks: its hwmon device goes and comes back as hwmon9, and the
    # kernel gives hwmon2 to the next device registered: a board sensor with a temperature of its own.
    node.drives[0].hwmon.reregister(9)
    node.drives[0].temp_c = 44.0
    drives, _ = node.tick()
    assert (drives["nvme0"].temp_c, drives["nvme0"].temp_crit_c) == (43.85, 84.85)
    assert "/sys/class/nvme/nvme0/hwmon9/temp1_input" in node.root.read
    node.tree.write("/sys/class/hwmon/hwmon2/name", "nct6779\n")
    node.tree.write("/sys/class/hwmon/hwmon2/temp1_input", "25000\n")
    drives, _ = node.tick()
    assert drives["nvme0"].temp_c == 43.85
    assert drives["nvme1"].temp_c == 49.85


def test_an_nvme_hwmon_registered_again_under_the_same_hwmon_is_read_anew(tmp_path: Path) -> None:
    node = Node(tmp_path)
    drives, _ = node.tick()
    assert drives["nvme1"].temp_max_c == 81.85
    # A controller reset while the host lowered the drive's warning threshold: the new registration
    # shows it, under the same hwmon3.
    node.drives[1].hwmon.reregister()
    node.drives[1].hwmon.write(node.tree, {"temp1_max": "70850\n"}, fixed=NVME_HWMON_FILES)
    drives, _ = node.tick()
    assert drives["nvme1"].temp_max_c == 70.85
    assert drives["nvme0"].temp_max_c == 81.85


def test_an_nvme_without_an_hwmon_is_looked_at_again_backing_off_not_every_tick(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.drives[0].hwmon.present = False  # a kernel whose nvme driver registers no hwmon device
    listings = 0
    for _ in range(2 * REFRESH_EVERY):
        drives, _ = node.tick()
        assert drives["nvme0"].temp_c is None
        listings += node.root.listed.count("/sys/class/nvme/nvme0")
    # After 1, 2, 4, 8, 16 and 32 ticks, then at each refresh of the facts.
    assert listings <= 8
    # Registered at last (a driver loaded late): found within the backing off.
    node.drives[0].hwmon.present = True
    for _ in range(REFRESH_EVERY):
        drives, _ = node.tick()
        if drives["nvme0"].temp_c is not None:
            break
    assert drives["nvme0"].temp_c == 39.85


def test_an_amdgpu_hwmon_registered_again_is_read_at_the_next_tick(tmp_path: Path) -> None:
    node = Node(tmp_path)
    _, gpu = node.tick()
    assert gpu.temp_c == 40.0 and gpu.power_w is not None
    # amdgpu reloaded: the card's hwmon device comes back as hwmon6, its hwmon1 given to another device.
    node.gpu.hwmon.reregister(6)
    dev = f"/sys/class/drm/{node.gpu.card}/device"
    _, gpu = node.tick()
    assert gpu.temp_c is not None and gpu.power_w is not None
    assert f"{dev}/hwmon/hwmon6/temp1_input" in node.root.read
    node.tree.write("/sys/class/hwmon/hwmon1/name", "k10temp\n")
    node.tree.write("/sys/class/hwmon/hwmon1/temp1_input", "61000\n")
    _, gpu = node.tick()
    assert gpu.temp_c is not None and gpu.temp_c < 61.0 and gpu.power_w is not None
    # Not every tick: the card's hwmon directory is not listed while its registration stays.
    node.tick()
    assert not [d for d in node.root.listed if d.startswith(dev)]


def test_an_amdgpu_input_removed_between_two_reads_of_the_facts_is_not_opened_every_tick_until_a_refresh(
        tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick()
    node.tick()
    # The driver removes the card's power and temperature inputs (a sensor it no longer shows)
    # between two reads of the card's facts: the next tick finds them gone.
    gone = {"power1_average", "temp1_input"}
    for name in gone:
        node.gpu.hwmon.hide(name)
    paths = {f"/sys/class/drm/{node.gpu.card}/device/hwmon/hwmon1/{name}" for name in gone}
    read_at, listings = [], 0
    for tick in range(REFRESH_EVERY - 5):
        _, gpu = node.tick()
        assert (gpu.power_w, gpu.temp_c) == (None, None)
        if paths & set(node.root.read):
            read_at.append(tick)
        listings += sum(d.endswith("/hwmon/hwmon1") for d in node.root.listed)
    # Opened (and found gone) once; then the card's hwmon directory is listed now and then, backing
    # off (1, 2, 4... ticks), not the inputs opened every tick until the facts' refresh.
    assert read_at == [0]
    assert 0 < listings <= 7
    for name in gone:
        node.gpu.hwmon.show(name)
    for _ in range(REFRESH_EVERY):
        _, gpu = node.tick()
        if gpu.power_w is not None:
            break
    assert gpu.power_w and gpu.temp_c is not None
    # Found again: its facts are kept, the directory listed no more.
    node.tick()
    _, gpu = node.tick()
    assert not [d for d in node.root.listed if d.endswith("/hwmon/hwmon1")]


def test_an_amdgpu_power_file_removed_falls_back_to_the_other_at_the_next_tick(tmp_path: Path) -> None:
    node = Node(tmp_path)
    # A card whose hwmon device has both power files: the average counts while it reads.
    node.gpu.power_files = ("power1_average", "power1_input")
    hwmon = f"/sys/class/drm/{node.gpu.card}/device/hwmon/hwmon1"
    _, gpu = node.tick()
    assert gpu.power_w is not None and f"{hwmon}/power1_average" in node.root.read
    assert f"{hwmon}/power1_input" not in node.root.read
    node.gpu.hwmon.hide("power1_average")
    _, gpu = node.tick()
    assert gpu.power_w is not None and f"{hwmon}/power1_input" in node.root.read
    for _ in range(5):
        _, gpu = node.tick()
        assert gpu.power_w is not None and f"{hwmon}/power1_average" not in node.root.read
