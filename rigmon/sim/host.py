"""Fake host hardware: /proc/stat, loadavg, meminfo, uptime, net/dev, net sysfs and thermal files."""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass, field

from rigmon.sim.counters import CarriedCounters
from rigmon.sim.hwmon import SimHwmon
from rigmon.sim.node import SimNode
from rigmon.sim.tree import Tree

USER_HZ = 100
GIB = 1024**3
#: The CPU's temperature device as the kernel registers it: coretemp's platform device, k10temp's PCI
#: function (the data fabric's misc function 3 of an AMD CPU: ``k10temp-pci-00c3`` to lm-sensors),
#: and the bus each is on.
CPU_SENSOR_DEVICES = {"coretemp": ("/sys/devices/platform/coretemp.0", "/sys/bus/platform"),
                      "k10temp": ("/sys/devices/pci0000:00/0000:00:18.3", "/sys/bus/pci")}


@dataclass
class SimInterface:
    """A network interface with a nominal speed; traffic follows the node's load."""

    name: str
    speed_mbps: int
    peak_fraction: float = 0.3
    up: bool = True
    rx_bytes: int = 0
    tx_bytes: int = 0
    rx_packets: int = 0
    tx_packets: int = 0
    carrier_changes: int = 1
    rx_errors: int = 0
    kind: str = "ethernet"
    """``ethernet`` gets a hardware ``device`` entry; ``thunderbolt-net`` is linked by the Thunderbolt bus."""
    stalled: bool = False
    """Up with carrier but moving no packets (a hung collective)."""
    rdma_device: str | None = None
    """The RDMA device whose port this interface is (RoCE: ``mlx5_0``): its PCI function, the interface's
    ``device``, lists it under ``infiniband/``, as on a real mlx5 card."""
    present: bool = True
    """The interface exists. A thunderbolt-net interface goes away with its XDomain when the cable is
    unplugged, and comes back as a new interface, its counters from zero."""


@dataclass
class SimHost:
    """CPU, memory, thermal zones and NICs of a simulated node.

    Args:
        cpu_count: logical CPUs.
        mem_total_bytes: installed memory.
        interfaces: NICs (``lo`` is always present).
    """

    cpu_count: int = 32
    mem_total_bytes: int = 256 * GIB
    interfaces: list[SimInterface] = field(default_factory=lambda: [SimInterface("eth0", 10000)])
    kernel: str = "6.8.0-49-generic"
    ticks_busy: float = 0.0
    ticks_idle: float = 0.0
    mem_used_bytes: float = 0.0
    uptime_s: float = 3600.0
    load_avg: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    cpu_temp_c: float = 40.0
    boot_id: str = ""
    cpu_vendor: str | None = None
    """``intel`` (thermal zone ``x86_pkg_temp``, hwmon ``coretemp``), ``amd`` (``acpitz``, ``k10temp``),
    or ``None`` for the generic mix of both that older scenarios use."""
    #: The CPU package's high and critical limits (°C), listed by its hwmon chip as ``temp1_max`` and
    #: ``temp1_crit`` (coretemp: 80 and TjMax, 100 °C); ``None``: the chip lists none (older scenarios).
    #: At its critical limit the CPU throttles itself (PROCHOT) and its sensors read no higher.
    cpu_max_c: float | None = None
    cpu_crit_c: float | None = None
    #: thermal_zone0's trip points as (``trip_point_K_type``, °C), in order: ``critical``, ``hot``,
    #: ``passive``, ``active`` (none: the zone lists none).
    zone_trips: tuple[tuple[str, float], ...] = ()
    #: How well the CPU cooler works (1: as built): the package's rise above the air under load grows as
    #: 1 / cooling (a cooler whose fan or pump stopped: a fraction of 1).
    cooling: float = 1.0
    #: Boot time (Unix seconds) written as ``btime``: the node's start time less its uptime then.
    boot_at: int = 1_700_000_000
    #: The ``hwmonN`` the CPU's temperature chip is registered as: the kernel numbers hwmon devices in
    #: probe order, which changes between boots (another boot of the same node: another number).
    cpu_hwmon: int = 0
    #: The CPU's temperature chip's registration (made at the first `write`).
    _cpu_chip: SimHwmon | None = field(default=None, repr=False)
    _rng: random.Random = field(default_factory=random.Random)
    _traffic: CarriedCounters = field(default_factory=CarriedCounters)
    """The NICs' byte and packet counters, carried on to the write time."""
    _node: SimNode | None = field(default=None, repr=False)

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        if not self.boot_id:
            self._rng = random.Random(node.rng.random())
            self.boot_id = str(uuid.UUID(int=self._rng.getrandbits(128)))
            self.boot_at = int(node.wall0_at - self.uptime_s)
        self._node = node
        for nic in self.interfaces:
            if not nic.present:
                nic.rx_bytes = nic.tx_bytes = nic.rx_packets = nic.tx_packets = nic.rx_errors = 0
                self._traffic.forget(nic.name)
        self._traffic.step(t_s, dt_s, {nic.name: _traffic(nic) for nic in self.interfaces if nic.present})
        busy_frac = min(1.0, max(0.0, 0.05 + 0.55 * node.load + self._rng.uniform(-0.03, 0.03)))
        ticks = dt_s * USER_HZ * self.cpu_count
        self.ticks_busy += ticks * busy_frac
        self.ticks_idle += ticks * (1.0 - busy_frac)
        self.uptime_s += dt_s
        node.bus["uptime_s"] = self.uptime_s
        running = busy_frac * self.cpu_count
        for i, horizon_s in enumerate((60.0, 300.0, 900.0)):
            keep = 0.0 if dt_s >= horizon_s else 1.0 - dt_s / horizon_s
            self.load_avg[i] = self.load_avg[i] * keep + running * (1.0 - keep)
        # An APU's GTT (its GPU's memory, `SimAmdGpu`) is system memory in use as well, and the job's tensors
        # are there rather than in host buffers beside it.
        gtt = node.bus.get("gpu_gtt_bytes", 0.0)
        host_share = 0.5 if not gtt else 0.1
        target_mem = min(self.mem_total_bytes * 0.97, self.mem_total_bytes * (0.08 + host_share * node.load) + gtt)
        self.mem_used_bytes += (target_mem - self.mem_used_bytes) * min(1.0, dt_s / 30.0)
        target_temp = 38.0 + 40.0 * busy_frac / self.cooling
        self.cpu_temp_c += (target_temp - self.cpu_temp_c) * min(1.0, dt_s / 20.0)
        if self.cpu_crit_c is not None:
            # PROCHOT: the CPU slows itself down to stay at its critical limit (TjMax).
            self.cpu_temp_c = min(self.cpu_temp_c, self.cpu_crit_c)
        for nic in self.interfaces:
            if not nic.present or not nic.up or nic.stalled:
                continue
            bytes_per_s = nic.speed_mbps * 1e6 / 8 * nic.peak_fraction * (0.02 + node.load)
            moved = int(bytes_per_s * dt_s * self._rng.uniform(0.9, 1.1))
            nic.rx_bytes += moved
            nic.tx_bytes += int(moved * 0.97)
            nic.rx_packets += moved // 8000
            nic.tx_packets += moved // 8100

    def write(self, tree: Tree) -> None:
        busy, idle = int(self.ticks_busy), int(self.ticks_idle)
        user, system = busy * 8 // 10, busy - busy * 8 // 10
        lines = [f"cpu  {user} 0 {system} {idle} 0 0 0 0 0 0"]
        per_cpu = [(user // self.cpu_count, system // self.cpu_count, idle // self.cpu_count)]
        lines += [f"cpu{i} {u} 0 {s} {d} 0 0 0 0 0 0" for i in range(self.cpu_count) for (u, s, d) in per_cpu]
        lines += ["intr 0", "ctxt 0", f"btime {self.boot_at}", "processes 1", "procs_running 1", "procs_blocked 0"]
        tree.write("/proc/stat", "\n".join(lines) + "\n")
        la = self.load_avg
        tree.write("/proc/loadavg", f"{la[0]:.2f} {la[1]:.2f} {la[2]:.2f} 2/900 12345\n")
        total_kb = self.mem_total_bytes // 1024
        avail_kb = int(self.mem_total_bytes - self.mem_used_bytes) // 1024
        tree.write(
            "/proc/meminfo",
            f"MemTotal:       {total_kb} kB\nMemFree:        {avail_kb // 2} kB\n"
            f"MemAvailable:   {avail_kb} kB\nSwapTotal:      8388604 kB\nSwapFree:       8388604 kB\n",
        )
        tree.write("/proc/uptime", f"{self.uptime_s:.2f} {self.uptime_s * 10:.2f}\n")
        tree.write("/proc/sys/kernel/random/boot_id", self.boot_id + "\n")
        tree.write("/proc/sys/kernel/osrelease", self.kernel + "\n")
        # A real host has one CPU vendor's sensors: Xeon servers coretemp, Ryzen/Strix Halo k10temp.
        zone, chip, label = {"intel": ("x86_pkg_temp", "coretemp", "Package id 0"),
                             "amd": ("acpitz", "k10temp", "Tctl")}.get(self.cpu_vendor or "",
                                                                      ("x86_pkg_temp", "k10temp", "Tctl"))
        tree.write("/sys/class/thermal/thermal_zone0/type", f"{zone}\n")
        tree.write("/sys/class/thermal/thermal_zone0/temp", f"{int(self.cpu_temp_c * 1000)}\n")
        for k, (trip_type, trip_c) in enumerate(self.zone_trips):
            tree.write(f"/sys/class/thermal/thermal_zone0/trip_point_{k}_type", f"{trip_type}\n")
            tree.write(f"/sys/class/thermal/thermal_zone0/trip_point_{k}_temp", f"{int(trip_c * 1000)}\n")
        self._write_cpu_chip(tree, chip, label)
        self._write_net(tree)

    def _write_cpu_chip(self, tree: Tree, chip: str, label: str) -> None:
        """The CPU's hwmon chip (``chip``, its input labelled ``label``), registered below its device."""
        device, bus = CPU_SENSOR_DEVICES[chip]
        if self._cpu_chip is None:
            self._cpu_chip = SimHwmon(parent=f"{device}/hwmon", number=self.cpu_hwmon)
            tree.symlink(f"{device}/subsystem", os.path.relpath(bus, device))
        fixed = {"name": f"{chip}\n", "temp1_label": f"{label}\n"}
        for limit, limit_c in (("max", self.cpu_max_c), ("crit", self.cpu_crit_c)):
            if limit_c is not None:
                fixed[f"temp1_{limit}"] = f"{int(limit_c * 1000)}\n"
        chip_c = self.cpu_temp_c + 2
        if self.cpu_crit_c is not None:
            chip_c = min(chip_c, self.cpu_crit_c)  # its sensor reads the distance to TjMax: none past it
        self._cpu_chip.write(tree, {"temp1_input": f"{int(chip_c * 1000)}\n"}, fixed=fixed)

    def _write_net(self, tree: Tree) -> None:
        head = (
            "Inter-|   Receive                                                |  Transmit\n"
            " face |bytes    packets errs drop fifo frame compressed multicast|"
            "bytes    packets errs drop fifo colls carrier compressed\n"
        )
        rows = ["    lo: 1000 10 0 0 0 0 0 0 1000 10 0 0 0 0 0 0"]
        write_t_s = self._node.write_t_s if self._node is not None else 0.0
        for nic in self.interfaces:
            if not nic.present:
                tree.remove(f"/sys/class/net/{nic.name}")
                continue
            rx_bytes, rx_packets, tx_bytes, tx_packets = self._traffic.at(nic.name, _traffic(nic), write_t_s)
            rows.append(
                f"{nic.name:>6}: {rx_bytes} {rx_packets} {nic.rx_errors} 0 0 0 0 0 "
                f"{tx_bytes} {tx_packets} 0 0 0 0 0 0"
            )
            base = f"/sys/class/net/{nic.name}"
            tree.write(f"{base}/operstate", "up\n" if nic.up else "down\n")
            tree.write(f"{base}/carrier", "1\n" if nic.up else "0\n")
            tree.write(f"{base}/speed", f"{nic.speed_mbps if nic.up else -1}\n")
            tree.write(f"{base}/mtu", "9000\n")
            tree.write(f"{base}/carrier_changes", f"{nic.carrier_changes}\n")
            tree.write(f"{base}/type", "1\n")
            if nic.kind == "ethernet" and not tree.path(f"{base}/device").exists():
                tree.write(f"{base}/device/uevent", "PCI_CLASS=20000\n")
            if nic.rdma_device is not None:
                tree.write(f"{base}/device/infiniband/{nic.rdma_device}/node_type", "1: CA\n")
        tree.write("/sys/class/net/lo/operstate", "unknown\n")
        tree.write("/proc/net/dev", head + "\n".join(rows) + "\n")

    def close(self) -> None:
        """Nothing to release."""


def _traffic(nic: SimInterface) -> list[float]:
    """A NIC's counters that move with its traffic, in `/proc/net/dev`'s order."""
    return [nic.rx_bytes, nic.rx_packets, nic.tx_bytes, nic.tx_packets]
