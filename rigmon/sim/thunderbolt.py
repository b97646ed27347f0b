"""Fake Thunderbolt/USB4 bus: domains, host routers, enclosures, XDomain hosts and retimers in sysfs."""

from __future__ import annotations

from dataclasses import dataclass, field

from rigmon.sim.node import SimNode
from rigmon.sim.tree import Tree

DEVICES = "/sys/bus/thunderbolt/devices"
#: Share of a USB4 link's bandwidth a PCIe tunnel delivers to the drives behind it.
TUNNEL_EFFICIENCY = 0.8


@dataclass
class SimTbRouter:
    """A connected router (enclosure) or, with ``xdomain``, another host on the cable.

    ``speed_gbps`` and ``lanes`` are what the link trained at; ``rx_speed_gbps`` differs
    from it only when a scenario wants an asymmetric fault.
    """

    name: str
    unique_id: str
    vendor_id: int = 0x1D6C
    device_id: int = 0x8
    vendor_name: str = "OWC"
    device_name: str = "Express 1M2"
    generation: int = 4
    speed_gbps: int = 20
    lanes: int = 2
    rx_speed_gbps: int | None = None
    authorized: int = 1
    xdomain: bool = False
    present: bool = True
    nvm_version: str | None = "36.0"
    net_interface: str | None = None
    """For an XDomain host: the thunderbolt-net interface bound to its network service."""

    @property
    def link_gbps(self) -> float:
        """Bandwidth per direction while present (speed x lanes)."""
        return float(min(self.speed_gbps, self.rx_speed_gbps or self.speed_gbps) * self.lanes) if self.present else 0.0


@dataclass
class SimThunderbolt:
    """The USB4 host interfaces of a node and what hangs off them.

    Args:
        domains: number of USB4 domains (one host router ``N-0`` each).
        routers: connected routers and XDomain hosts.
        retimers: on-board retimer names (``0-0:1.1``).
        host_unique_ids: seed text for the host routers' UUIDs.
    """

    domains: int = 2
    routers: list[SimTbRouter] = field(default_factory=list)
    retimers: list[str] = field(default_factory=list)
    host_unique_ids: str = "d1030000-0080-7708-2330-a1c81e0a19"
    _written: set[str] = field(default_factory=set)

    def router(self, name: str) -> SimTbRouter:
        """The router called ``name``."""
        return next(r for r in self.routers if r.name == name)

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        """Links hold whatever the scenario set."""

    def write(self, tree: Tree) -> None:
        for d in range(self.domains):
            self._static(tree, f"{DEVICES}/domain{d}", {
                "security": "user\n", "iommu_dma_protection": "1\n", "deauthorization": "1\n",
                "uevent": "DEVTYPE=thunderbolt_domain\n",
            })
            self._static(tree, f"{DEVICES}/{d}-0", {
                "generation": "4\n", "unique_id": f"{self.host_unique_ids}{d:02x}\n",
                "vendor": "0x1022\n", "device": "0x1668\n", "authorized": "1\n",
                "uevent": "DEVTYPE=thunderbolt_device\nUSB4_VERSION=1.0\nUSB4_TYPE=host\n",
                "usb4_port1/link": "usb4\n" if any(r.name == f"{d}-1" and r.present for r in self.routers) else "none\n",
            }, always=True)
        for name in self.retimers:
            self._static(tree, f"{DEVICES}/{name}", {"vendor": "0x8087\n", "device": "0x15ee\n",
                                                       "nvm_version": "21.0\n"})
        for r in self.routers:
            base = f"{DEVICES}/{r.name}"
            if not r.present:
                if base in self._written:
                    tree.remove(base)
                    tree.remove(f"{base}.0")
                    self._written.discard(base)
                continue
            self._written.add(base)
            files = {
                "authorized": f"{r.authorized}\n",
                "unique_id": f"{r.unique_id}\n",
                "vendor": f"{r.vendor_id:#x}\n",
                "device": f"{r.device_id:#x}\n",
                "vendor_name": f"{r.vendor_name}\n",
                "device_name": f"{r.device_name}\n",
                "generation": f"{r.generation}\n",
                "tx_speed": f"{r.speed_gbps}.0 Gb/s\n",
                "rx_speed": f"{r.rx_speed_gbps or r.speed_gbps}.0 Gb/s\n",
                "tx_lanes": f"{r.lanes}\n",
                "rx_lanes": f"{r.lanes}\n",
            }
            if r.xdomain:
                del files["authorized"], files["generation"]
                files["maxhopid"] = "15\n"
                files["uevent"] = "DEVTYPE=thunderbolt_xdomain\n"
            else:
                files["boot"] = "0\n"
                files["uevent"] = "DEVTYPE=thunderbolt_device\nUSB4_VERSION=1.0\nUSB4_TYPE=device\n"
                if r.nvm_version:
                    files["nvm_version"] = f"{r.nvm_version}\n"
            for rel, content in files.items():
                tree.write(f"{base}/{rel}", content)
            if r.xdomain:
                # The network service thunderbolt-net binds to (thunderbolt0's device).
                tree.write(f"{base}.0/key", "networking\n")
                tree.write(f"{base}.0/uevent", "DEVTYPE=thunderbolt_service\nDRIVER=thunderbolt-net\n")
                tree.symlink(f"{base}.0/driver", "../../drivers/thunderbolt-net")
                tree.write("/sys/bus/thunderbolt/drivers/thunderbolt-net/uevent", "")
                if r.net_interface:
                    tree.symlink(f"/sys/class/net/{r.net_interface}/device", f"../../../bus/thunderbolt/devices/{r.name}.0")

    def _static(self, tree: Tree, base: str, files: dict[str, str], always: bool = False) -> None:
        if base in self._written and not always:
            return
        self._written.add(base)
        for rel, content in files.items():
            tree.write(f"{base}/{rel}", content)

    def close(self) -> None:
        """Nothing to release."""

    def link_cap_bytes_per_s(self, router: str | None) -> float | None:
        """Bytes per second a PCIe tunnel through ``router`` can carry, ``None`` without a router."""
        if router is None:
            return None
        try:
            r = self.router(router)
        except StopIteration:
            return 0.0
        return r.link_gbps * 1e9 / 8 * TUNNEL_EFFICIENCY
