"""Scenario `strix-usb4`: two Strix Halo nodes joined by a USB4 cable (thunderbolt-net), each with a RAID0 enclosure."""

from __future__ import annotations

from rigmon.sim.gpu import SimAmdGpu
from rigmon.sim.host import GIB, SimHost, SimInterface
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.scenarios.model_load import find_storage
from rigmon.sim.storage import strix_enclosure_rig
from rigmon.sim.thunderbolt import SimTbRouter, SimThunderbolt

#: Timeline, repeating every period (simulated seconds): the node-to-node cable retrains
#: at 10 Gb/s a lane, is re-plugged (a short flap: the XDomain and its thunderbolt0 go away and come
#: back, the interface's counters from zero, as thunderbolt-net registers a new one), and later the collective hangs
#: (thunderbolt0 up, no packets) for 30 s: long enough that an agent on an accelerated clock samples it
#: stalled (it reads stalled after [storage] net_stall_after_s without a packet) on a loaded machine.
PERIOD_S = 150.0
RETRAIN = (40.0, 70.0)
UNPLUGGED = (90.0, 92.0)
STALLED = (105.0, 135.0)
#: thunderbolt-net over a 2 x 20 Gb/s USB4 link reports this speed (Mb/s).
TBNET_MBPS = 40000


def _within(phase: float, window: tuple[float, float]) -> bool:
    return window[0] <= phase < window[1]


class StrixUsb4:
    """Node pairs on a USB4 host-to-host link (XDomain 0-1, thunderbolt0), enclosure on domain 1."""

    name = "strix-usb4"
    description = "Strix Halo nodes on a USB4 thunderbolt-net link: retrain, flap and a stalled collective"
    default_nodes = 2

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost(cpu_count=32, mem_total_bytes=128 * GIB, cpu_vendor="amd", interfaces=[
            SimInterface("enp191s0", 10000, peak_fraction=0.02),
            SimInterface("thunderbolt0", TBNET_MBPS, peak_fraction=0.25, kind="thunderbolt-net"),
        ]))
        storage, tb = strix_enclosure_rig(node, enclosures=1, first_domain=1)
        peer = index + 1 if index % 2 == 0 else index - 1
        tb.routers.insert(0, SimTbRouter(
            name="0-1", unique_id=f"5a1e0000-0000-0000-0000-{peer:012x}", vendor_id=0x1022, device_id=0x1668,
            vendor_name="AMD", device_name=f"node{peer + 1:02d}", xdomain=True, net_interface="thunderbolt0",
        ))
        node.devices.extend([tb, storage])
        # Last: it draws its random seed after the others, which keep theirs.
        node.devices.append(SimAmdGpu())  # the Strix Halo's Radeon 8060S iGPU

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        phase = t_s % PERIOD_S
        tb = next(d for d in node.devices if isinstance(d, SimThunderbolt))
        host = next(d for d in node.devices if isinstance(d, SimHost))
        link = tb.router("0-1")
        nic = next(n for n in host.interfaces if n.name == "thunderbolt0")
        link.speed_gbps = 10 if _within(phase, RETRAIN) else 20
        plugged = not _within(phase, UNPLUGGED)
        if plugged and not nic.present:
            nic.carrier_changes = 1  # a new interface: thunderbolt-net registers it again with the XDomain
        link.present = nic.present = nic.up = plugged
        nic.speed_mbps = link.speed_gbps * link.lanes * 1000
        nic.stalled = _within(phase, STALLED)
        node.load = training_load(t_s + 0.1 * index, start_s=2.0)
        for array in find_storage(node).arrays:
            array.read_target_bytes_per_s = 1.0e9 if t_s < 20.0 else 0.05e9
