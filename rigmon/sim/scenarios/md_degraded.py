"""Scenario `md-degraded`: a RAID1 member fails, a new member is added and the array recovers."""

from __future__ import annotations

from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.node import SimNode
from rigmon.sim.scenarios.model_load import find_storage
from rigmon.sim.nvme_drive import SimNvmeDrive
from rigmon.sim.storage import SimMdArray, SimMember, SimStorage

#: Timeline (simulated seconds): member fails, faulty member removed and a new one added.
FAIL_AT_S = 15.0
REPLACE_AT_S = 30.0
#: Small drives, so the recovery finishes within a couple of simulated minutes.
DRIVE_KIB = 32 * 1024 * 1024
RECOVERY_BYTES_PER_S = 0.8e9


class MdDegraded:
    """md127 (/dev/md/mirror), RAID1 of nvme0n1 and nvme1n1; nvme1n1 fails, nvme2n1 replaces it."""

    name = "md-degraded"
    description = "RAID1 member fails (degraded), replacement added, recovery runs to clean"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost(interfaces=[SimInterface("eth0", 10000)]))
        drives = [SimNvmeDrive(ctrl=i, serial=f"S6Z2NF0W{node.rng.randrange(10**6):06d}",
                               address=f"0000:{0x41 + i:02x}:00.0", size_kib=DRIVE_KIB) for i in range(3)]
        array = SimMdArray(number=127, md_name="mirror", level="raid1",
                           members=[SimMember(drives[0], 0, 0), SimMember(drives[1], 1, 1)],
                           uuid=f"{node.rng.getrandbits(32):08x}-1c2d-3e4f-5a6b-7c8d9e0f1a2b",
                           recovery_bytes_per_s=RECOVERY_BYTES_PER_S)
        node.devices.append(SimStorage(drives=drives, arrays=[array]))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        storage = find_storage(node)
        array = storage.array("md127")
        stage = node.bus.get("md_degraded_stage", 0.0)
        if stage == 0.0 and t_s >= FAIL_AT_S:
            array.members[1].state = "faulty"
            node.bus["md_degraded_stage"] = stage = 1.0
        if stage == 1.0 and t_s >= REPLACE_AT_S:
            # mdadm --remove the faulty member, then --add the new drive: recovery starts.
            array.members[1] = SimMember(storage.drive("nvme2n1"), slot=1, desc_nr=2, state="rebuilding")
            array.sync_action = "recover"
            array.sync_done_sectors = 0
            node.bus["md_degraded_stage"] = 2.0
        array.read_target_bytes_per_s = 1.2e9 if t_s >= 1.0 else 0.0
        array.write_target_bytes_per_s = 0.2e9 if t_s >= 1.0 else 0.0
        node.load = 0.3
