"""Fake RDMA ports in /sys/class/infiniband: state, rate and counters that move with traffic."""

from __future__ import annotations

from dataclasses import dataclass, field

from rigmon.sim.counters import CarriedCounters
from rigmon.sim.host import SimInterface
from rigmon.sim.node import SimNode
from rigmon.sim.tree import Tree

CLASS = "/sys/class/infiniband"
#: Share of the port's rate a tensor-parallel job's traffic uses at full load.
TRAFFIC_SHARE = 0.35
#: Mean payload bytes per packet (RoCE MTU 4096).
PACKET_BYTES = 4096
#: Speed names the kernel prints after the rate, by per-lane Gb/s.
_SPEED_NAMES = {2.5: "SDR", 5.0: "DDR", 10.0: "QDR", 14.0: "FDR", 25.0: "EDR", 50.0: "HDR", 100.0: "NDR"}
#: Counters that move with traffic (or, for symbol errors, steadily with time on a marginal link),
#: carried on between physics steps; ``link_downed`` and ``link_error_recovery`` count events.
FLOWING = ("port_rcv_data", "port_xmit_data", "port_rcv_packets", "port_xmit_packets", "port_xmit_wait",
           "np_cnp_sent", "symbol_error")


@dataclass
class SimRdmaPort:
    """One port: ``active`` and ``rate_gbps`` are set by the scenario; counters follow traffic.

    ``error_rate_per_s`` adds symbol errors while the port is active (a marginal cable).
    ``netdev`` is a RoCE port's Ethernet interface: on mlx5 the port and its netdev are one
    link, so the netdev loses its carrier while the port is down and reports the port's rate.
    The tree names it as the kernel does: the port's default GID's netdev (``gid_attrs/ndevs/0``,
    RoCE only) and an entry of the PCI function's ``device/net/`` with ``dev_port`` = port - 1
    (how an InfiniBand port's IPoIB ``ib0`` is found).
    """

    device: str
    port: int = 1
    link_layer: str = "Ethernet"
    rate_gbps: float = 100.0
    active: bool = True
    error_rate_per_s: float = 0.0
    hw_counters: bool = True
    netdev: SimInterface | None = None
    counters: dict[str, float] = field(default_factory=dict)

    def down_phys_state(self) -> str:
        """``phys_state`` while the port is down: a RoCE port reads Disabled whenever its netdev has
        no carrier (mlx5_query_port_roce), an InfiniBand port with nothing at the other end Polling."""
        return "3: Disabled" if self.link_layer == "Ethernet" else "2: Polling"

    def rate_text(self) -> str:
        lanes = 4 if self.rate_gbps >= 40 else 1
        return f"{self.rate_gbps:g} Gb/sec ({lanes}X {_SPEED_NAMES.get(self.rate_gbps / lanes, 'EDR')})"


@dataclass
class SimRdma:
    """The RDMA devices of a node (one ConnectX-style device per port).

    Traffic per port follows ``node.load``; each node's traffic differs a little (``rng``).
    A port that goes inactive counts one ``link_downed`` and stops moving data.
    """

    ports: list[SimRdmaPort] = field(default_factory=list)
    hca_type: str = "MT4119"
    fw_ver: str = "16.35.2000"
    _was_active: dict[str, bool] = field(default_factory=dict)
    _flowing: CarriedCounters = field(default_factory=CarriedCounters)
    _node: SimNode | None = field(default=None, repr=False)

    def port(self, device: str) -> SimRdmaPort:
        """The port of ``device``."""
        return next(p for p in self.ports if p.device == device)

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        self._node = node
        self._flowing.step(t_s, dt_s, {f"{p.device}/{p.port}": [p.counters.get(n, 0.0) for n in FLOWING]
                                       for p in self.ports})
        for p in self.ports:
            c = p.counters
            key = f"{p.device}/{p.port}"
            was = self._was_active.get(key, p.active)
            if was and not p.active:
                c["link_downed"] = c.get("link_downed", 0.0) + 1
            if not was and p.active:
                c["link_error_recovery"] = c.get("link_error_recovery", 0.0) + 1
            self._was_active[key] = p.active
            if p.netdev is not None:
                p.netdev.rdma_device = p.device
                if p.netdev.up != p.active:
                    p.netdev.carrier_changes += 1
                p.netdev.up = p.active
                p.netdev.speed_mbps = round(p.rate_gbps * 1000)
            if not p.active or dt_s <= 0:
                continue
            jitter = 0.9 + 0.2 * node.rng.random()
            bytes_per_s = p.rate_gbps * 1e9 / 8 * TRAFFIC_SHARE * node.load * jitter
            moved = bytes_per_s * dt_s
            for direction in ("rcv", "xmit"):
                c[f"port_{direction}_data"] = c.get(f"port_{direction}_data", 0.0) + moved / 4
                c[f"port_{direction}_packets"] = c.get(f"port_{direction}_packets", 0.0) + moved / PACKET_BYTES
            c["port_xmit_wait"] = c.get("port_xmit_wait", 0.0) + moved / 1e6
            c["np_cnp_sent"] = c.get("np_cnp_sent", 0.0) + moved / 5e8
            c["symbol_error"] = c.get("symbol_error", 0.0) + p.error_rate_per_s * dt_s

    def write(self, tree: Tree) -> None:
        for p in self.ports:
            dev = f"{CLASS}/{p.device}"
            base = f"{dev}/ports/{p.port}"
            tree.write(f"{dev}/hca_type", f"{self.hca_type}\n")
            tree.write(f"{dev}/fw_ver", f"{self.fw_ver}\n")
            tree.write(f"{dev}/board_id", "MT_0000000008\n")
            tree.write(f"{base}/link_layer", f"{p.link_layer}\n")
            tree.write(f"{base}/state", "4: ACTIVE\n" if p.active else "1: DOWN\n")
            tree.write(f"{base}/phys_state", "5: LinkUp\n" if p.active else f"{p.down_phys_state()}\n")
            tree.write(f"{base}/rate", f"{p.rate_text()}\n")
            if p.netdev is not None:
                if p.link_layer == "Ethernet":
                    tree.write(f"{base}/gid_attrs/ndevs/0", f"{p.netdev.name}\n")
                tree.write(f"{dev}/device/net/{p.netdev.name}/dev_port", f"{p.port - 1}\n")
            c = dict(p.counters)
            write_t_s = self._node.write_t_s if self._node is not None else 0.0
            flowing = self._flowing.at(f"{p.device}/{p.port}", [c.get(n, 0.0) for n in FLOWING], write_t_s)
            c.update(zip(FLOWING, map(float, flowing)))
            for name in ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
                         "port_xmit_discards", "port_xmit_wait", "port_rcv_data", "port_xmit_data",
                         "port_rcv_packets", "port_xmit_packets"):
                tree.write(f"{base}/counters/{name}", f"{int(c.get(name, 0.0))}\n")
            if p.hw_counters:
                tree.write(f"{base}/hw_counters/np_cnp_sent", f"{int(c.get('np_cnp_sent', 0.0))}\n")
                tree.write(f"{base}/hw_counters/out_of_sequence", "0\n")
                tree.write(f"{base}/hw_counters/lifespan", "10\n")

    def close(self) -> None:
        """Nothing to release."""
