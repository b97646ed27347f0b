"""Scenario `nvme-link-gen3`: a Gen4 NVMe trains at Gen3 and caps its RAID0 array's model load."""

from __future__ import annotations

from rigmon.sim.host import GIB, SimHost, SimInterface
from rigmon.sim.node import SimNode
from rigmon.sim.scenarios.model_load import find_storage
from rigmon.sim.nvme_drive import SimNvmeDrive
from rigmon.sim.storage import SimMdArray, SimMember, SimStorage

#: The drive that comes up at Gen3 x4 (8.0 GT/s) although drive and slot do Gen4 x4.
SLOW_DRIVE = "nvme1n1"
SLOW_LINK = "8.0 GT/s PCIe"
#: The array reads weights as fast as its two Gen4 drives allow (~6.5 GB/s each).
READ_BYTES_PER_S = 12.0e9


class NvmeLinkGen3:
    """md127 (/dev/md/weights), RAID0 of two on-board Gen4 NVMe; nvme1 trained at Gen3 x4.

    A striped array reads as fast as its slowest member times two: the Gen3 x4 link (about
    3.5 GB/s of payload) caps the model load at about 7.0 GB/s instead of 12 (incident 6).
    """

    name = "nvme-link-gen3"
    description = "a Gen4 NVMe trained at Gen3 x4: its RAID0 array loads weights at ~7 of 12 GB/s"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost(cpu_count=64, mem_total_bytes=256 * GIB,
                                    interfaces=[SimInterface("enp65s0f0", 100000)]))
        drives = [SimNvmeDrive(ctrl=i, serial=f"S6Z2NF0W{node.rng.randrange(10**6):06d}",
                               address=f"0000:{0x41 + i:02x}:00.0") for i in range(2)]
        drives[1].retrain(SLOW_LINK, 4)
        array = SimMdArray(number=127, md_name="weights", level="raid0",
                           members=[SimMember(drives[0], 0, 0), SimMember(drives[1], 1, 1)],
                           uuid=f"{node.rng.getrandbits(32):08x}-4d5e-6f70-8192-a3b4c5d6e7f8")
        node.devices.append(SimStorage(drives=drives, arrays=[array]))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        find_storage(node).array("md127").read_target_bytes_per_s = READ_BYTES_PER_S if t_s >= 1.0 else 0.0
        node.load = 0.2
