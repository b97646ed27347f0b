"""Scenario `net-link-flap`: two nodes on a 10 GbE data network; node01's port loses its carrier."""

from __future__ import annotations

from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode

#: Timeline of node01's data port, repeating every period (simulated seconds): the switch resets the port
#: (no carrier for 15 s), and later the link drops and comes back within one step (faster than a read).
PERIOD_S = 60.0
DOWN = (20.0, 35.0)
FLAP_AT_S = 50.0
#: The data network's interface and speed (Mb/s).
DATA_NIC = "enp2s0"
DATA_MBPS = 10000


class NetLinkFlap:
    """Incident 7 on plain Ethernet (no RDMA, no thunderbolt-net): the link between the nodes drops."""

    name = "net-link-flap"
    description = "two nodes on 10 GbE: node01's port loses its carrier for 15 s, later flaps faster than a read"
    default_nodes = 2

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost(interfaces=[SimInterface("eno1", 1000, peak_fraction=0.01),
                                                SimInterface(DATA_NIC, DATA_MBPS, peak_fraction=0.4)]))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index, start_s=2.0)
        if index != 0:
            return
        host = next(d for d in node.devices if isinstance(d, SimHost))
        nic = next(n for n in host.interfaces if n.name == DATA_NIC)
        phase = t_s % PERIOD_S
        up = not DOWN[0] <= phase < DOWN[1]
        if up != nic.up:
            nic.carrier_changes += 1
            nic.up = up
        # One physics step (0.1 s) in which the carrier went and came back: two changes, the state as before.
        flap_step = FLAP_AT_S <= phase < FLAP_AT_S + 0.1
        if flap_step and node.bus.get("net_link_flap_at") != t_s // PERIOD_S:
            node.bus["net_link_flap_at"] = t_s // PERIOD_S
            nic.carrier_changes += 2
