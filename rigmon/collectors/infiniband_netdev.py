"""The network interface an RDMA port carries (RoCE) or is reached through (IPoIB), from sysfs.

Two places name it (Documentation/ABI/stable/sysfs-class-infiniband):

- ``ports/<n>/gid_attrs/ndevs/<i>``: the netdev of GID index ``i``. On a RoCE port index 0 is the
  port's default GID, which the kernel adds for the port's own netdev (a bond's, under RoCE LAG)
  when the netdev registers and keeps while it has no carrier. An InfiniBand port's GIDs have
  no netdev: the read fails (EINVAL).
- ``<dev>/device/net/<ifname>``: the netdevs of the port's PCI function. IPoIB puts ``ib0`` there
  (its parent is the HCA's PCI device) with ``dev_port`` = port - 1, as mlx4 does for the two
  Ethernet ports of one function; a pkey child (``ib0.8001``) has its parent's ``dev_port``.

Absent or unreadable is ``None``, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping

from rigmon.collectors.sysfs_values import parse_int
from rigmon.hw.names import text_name
from rigmon.hw.root import HostRoot

CLASS = "/sys/class/infiniband"
#: A port's ``state`` id while it passes traffic (``4: ACTIVE``).
PORT_ACTIVE = 4


def pick_netdev(port: int, dev_ports: Mapping[str, int | None]) -> str | None:
    """The interface of port ``port`` among a PCI function's netdevs (name -> its ``dev_port``, ``None``
    when unread): those whose ``dev_port`` is ``port - 1``, or the only one when none says; of several
    the shortest name (``ib0`` before its pkey child ``ib0.8001``), then the first by name."""
    matching = [name for name, dev_port in dev_ports.items() if dev_port == port - 1]
    if not matching and len(dev_ports) == 1 and next(iter(dev_ports.values())) is None:
        matching = list(dev_ports)
    return min(matching, key=lambda name: (len(name), name), default=None)


def _attr(root: HostRoot, rel: str) -> str | None:
    try:
        return root.read_attr(rel) or None
    except OSError:
        return None


def read_port_netdev(root: HostRoot, device: str, port: int) -> str | None:
    """The network interface of RDMA port ``device``/``port`` (module docstring); ``None`` when none is found."""
    gid_netdev = _attr(root, f"{CLASS}/{device}/ports/{port}/gid_attrs/ndevs/0")
    if gid_netdev is not None:
        return text_name(gid_netdev)
    net = f"{CLASS}/{device}/device/net"
    dev_ports = {name: parse_int(_attr(root, f"{net}/{name}/dev_port")) for name in root.listdir(net)}
    picked = pick_netdev(port, dev_ports)
    return None if picked is None else text_name(picked)


def rdma_interfaces(root: HostRoot) -> dict[str, bool]:
    """Every network interface an RDMA port carries (`read_port_netdev`), and whether that port is ACTIVE now
    (an unreadable state is not ACTIVE). Empty without RDMA devices."""
    out: dict[str, bool] = {}
    for device in root.listdir(CLASS):
        for port in root.listdir(f"{CLASS}/{device}/ports"):
            if not port.isdigit():
                continue
            netdev = read_port_netdev(root, device, int(port))
            if netdev is None:
                continue
            state = _attr(root, f"{CLASS}/{device}/ports/{port}/state") or ""
            # "4: ACTIVE": drivers/infiniband/core/sysfs.c state_show.
            active = state.partition(":")[0].strip() == str(PORT_ACTIVE)
            out[netdev] = out.get(netdev, False) or active
    return out
