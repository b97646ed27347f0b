"""Host collector: CPU, load, memory, temperatures and network interfaces from /proc and /sys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rigmon.clock import Clock
from rigmon.collectors.base import (
    CollectorContext,
    CollectorError,
    EventDraft,
    PolledCollector,
)
from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.host_chip_names import zone_sensors
from rigmon.collectors.host_hwmon import (
    HwmonTempFacts,
    TempRead,
    hwmon_temp_reads,
    read_hwmon_temp_facts,
    temperature,
)
from rigmon.collectors.host_proc import (
    CpuTimes,
    parse_loadavg,
    parse_meminfo,
    parse_net_dev,
    parse_proc_stat,
    parse_uptime,
)
from rigmon.collectors.host_thermal import THERMAL, ZoneFacts, read_zone_facts
from rigmon.collectors.hwmon_chips import HwmonChip, chip_of, hwmon_registrations
from rigmon.collectors.net_links import NetLinkWatch
from rigmon.collectors.sysfs_values import parse_int, parse_millidegrees
from rigmon.hw.names import text_name
from rigmon.hw.root import HostRoot
from rigmon.rates import CounterRates, counter_delta
from rigmon.schema import HostReading, NetInterfaceReading, TemperatureReading

#: The one "device" whose fact is the boot id.
_BOOT = ("boot",)

#: ARPHRD_* link types of /sys/class/net/<if>/type.
ARPHRD_ETHER = 1
ARPHRD_INFINIBAND = 32
#: Driver of Thunderbolt/USB4 host-to-host networking interfaces (thunderbolt0).
THUNDERBOLT_NET_DRIVERS = frozenset({"thunderbolt-net", "thunderbolt_net"})


def parse_net_kind(name: str, link_type: int | None, driver: str | None, has_device: bool,
                   is_wireless: bool, is_bridge: bool, is_bond: bool) -> str | None:
    """What kind of link an interface is, from its sysfs traits.

    Args:
        name: interface name.
        link_type: ``type`` (ARPHRD_*).
        driver: name of the driver bound to its ``device`` (``thunderbolt-net``, ``mlx5_core``).
        has_device: whether it has a ``device`` link (hardware, or a Thunderbolt service).
        is_wireless: a ``wireless`` or ``phy80211`` entry exists.
        is_bridge: a ``bridge`` directory exists.
        is_bond: a ``bonding`` directory exists.

    Returns:
        ``thunderbolt-net``, ``bridge``, ``bond``, ``infiniband``, ``wifi``, ``ethernet``,
        ``virtual``, or ``None`` when nothing says.
    """
    if driver in THUNDERBOLT_NET_DRIVERS or (driver is None and name.startswith("thunderbolt")):
        return "thunderbolt-net"
    if is_bridge:
        return "bridge"
    if is_bond:
        return "bond"
    if link_type == ARPHRD_INFINIBAND:
        return "infiniband"
    if is_wireless:
        return "wifi"
    if link_type == ARPHRD_ETHER:
        return "ethernet" if has_device else "virtual"
    return None


#: Kinds of link whose silence after traffic means it stopped passing traffic: a thunderbolt-net
#: link can collapse under bidirectional load without an error. An idle Ethernet, Wi-Fi, bridge or
#: virtual interface is normal (a management NIC is silent between ssh sessions, RoCE traffic
#: bypasses the netdev counters), so those are never called stalled.
STALL_KINDS = frozenset({"thunderbolt-net"})

# Interfaces that carry no rig traffic: loopback only. Virtual bridges stay visible
# because thunderbolt-net and bonding show up as virtual devices too.
_SKIPPED_INTERFACES = {"lo"}


@dataclass(frozen=True, slots=True)
class NetFacts:
    """What a tick needs about one interface besides its counters: its name as text, kind, paths
    and rate keys."""

    #: The name as records carry it (`rigmon.hw.names.text_name`); the paths use the raw name.
    name: str
    kind: str | None
    carrier_path: str
    speed_path: str
    operstate_path: str
    mtu_path: str
    carrier_changes_path: str
    #: Keys of its rates: received and sent bytes, received and sent packets.
    rate_keys: tuple[tuple[str, str], tuple[str, str], tuple[str, str], tuple[str, str]]
    #: An RDMA device backs it (RoCE, IPoIB): its device has an ``infiniband`` directory.
    rdma: bool = False


class HostCollector(PolledCollector):
    """CPU, load, memory, temperatures and network links of the node.

    Thermal zone types and trip points, hwmon chip names, labels and limits, and each interface's kind are read
    once per device (see `DeviceFacts`): again when the set of zones, chips or interfaces
    changes (a chip registered again under the same ``hwmonN`` is a change, see `HwmonChip`)
    and every `device_facts.REFRESH_EVERY` reads; a chip lacking an input it should have, soon,
    backing off (see `_hwmon_facts`).

    Args:
        root: the machine's files.
        clock: monotonic time for rates.
    """

    name = "host"
    #: The /proc/meminfo keys reported.
    MEMINFO_KEYS = ("MemTotal", "MemAvailable", "SwapTotal", "SwapFree")

    def __init__(self, root: HostRoot, clock: Clock, net_stall_after_s: float = 5.0) -> None:
        self.root = root
        self.clock = clock
        self.net_stall_after_s = net_stall_after_s
        self._cpu_last: CpuTimes | None = None
        #: Why the last /proc/stat gave no CPU figures (``None``: it parsed), and whether the one before did not.
        self._stat_error: str | None = None
        self._stat_was_bad = False
        self._rates = CounterRates()
        # Monotonic time each interface last moved a packet (only interfaces that ever did).
        self._last_active_s: dict[str, float] = {}
        #: Each Ethernet, thunderbolt-net and bond link's carrier from read to read.
        self._links = NetLinkWatch()
        #: Per thermal zone: its label, its ``temp`` path and the limits of its trip points.
        self._zones: DeviceFacts[str, ZoneFacts] = DeviceFacts()
        # The boot id changes only with a reboot, which no agent outlives: read like a fact.
        self._boot_id: DeviceFacts[str, str | None] = DeviceFacts()
        self._chips: DeviceFacts[HwmonChip, HwmonTempFacts] = DeviceFacts()
        #: What `_temperatures` reads from the zones and the chips while their facts are kept:
        #: (path, sensor, label) of each temperature, in order.
        self._zone_reads: tuple[TempRead, ...] | None = None
        self._chip_reads: tuple[TempRead, ...] | None = None
        self._kinds: DeviceFacts[str, NetFacts] = DeviceFacts()
        #: The interfaces of the last /proc/net/dev, whose rates and activity are kept.
        self._net_names: frozenset[str] = frozenset()
        #: /proc/net/dev lines skipped at the last read, and how many were skipped since the start.
        self._net_skipped_before: tuple[str, ...] = ()
        self.net_skipped_lines_total = 0

    def collect(self) -> Sequence[object]:
        stat_text = self.root.read_text("/proc/stat")
        if stat_text is None:
            raise CollectorError("/proc/stat is not readable")
        records: list[object] = [self._host(stat_text)]
        records.extend(self._stat_event())
        records.extend(self._temperatures())
        records.extend(self._net())
        return records

    def status_note(self) -> str | None:
        """What the collector's status says while its other readings are fine (see
        `base.status_note`): /proc/stat read empty or garbled, so the CPU figures are null."""
        if self._stat_error is None:
            return None
        return f"no CPU figures: {self._stat_error}"

    def _cpu(self, stat_text: str) -> tuple[float | None, int | None]:
        """CPU busy percent since the last good read and the CPUs online; both ``None`` when
        /proc/stat is empty or garbled (said in `status_note` and once in `_stat_event`)."""
        try:
            cpu = parse_proc_stat(stat_text)
        except ValueError as exc:
            # A garbled /proc/stat costs the CPU figures only, not memory, load and the links.
            # The last good times stay: the next good read gives the busy share over both ticks.
            self._stat_error = str(exc)
            return None, None
        self._stat_error = None
        cpu_pct = None
        if self._cpu_last is not None:
            d_total = counter_delta(self._cpu_last.total, cpu.total, None)
            d_busy = counter_delta(self._cpu_last.busy, cpu.busy, None)
            if d_total and d_busy is not None:
                cpu_pct = round(min(100.0, 100.0 * d_busy / d_total), 2)
        self._cpu_last = cpu
        return cpu_pct, cpu.cpu_count or None

    def _stat_event(self) -> tuple[EventDraft, ...]:
        """One warning when /proc/stat goes bad (not again while it stays bad, whatever it holds)."""
        was_bad, self._stat_was_bad = self._stat_was_bad, self._stat_error is not None
        if self._stat_error is None or was_bad:
            return ()
        return (EventDraft(
            "proc_stat_garbled", "warning", "host",
            f"no CPU figures until /proc/stat parses again: {self._stat_error}",
            {"error": self._stat_error},
        ),)

    def _host(self, stat_text: str) -> HostReading:
        cpu_pct, cpu_count = self._cpu(stat_text)
        # loadavg and uptime are one short line each, whole in the first read (as an attribute):
        # read_text would read once more for the end of the file (a system call per file and tick).
        load_text = self.root.read_attr("/proc/loadavg")
        load: tuple[float | None, float | None, float | None] = (None, None, None)
        try:
            if load_text:
                load = parse_loadavg(load_text)
        except ValueError:
            # A garbled loadavg costs the load figures only, not CPU and memory.
            pass
        mem = parse_meminfo(self.root.read_text("/proc/meminfo") or "", self.MEMINFO_KEYS)
        uptime_text = self.root.read_attr("/proc/uptime")
        return HostReading(
            cpu_pct=cpu_pct,
            cpu_count=cpu_count,
            load_1=load[0],
            load_5=load[1],
            load_15=load[2],
            mem_total_bytes=mem.get("MemTotal"),
            mem_available_bytes=mem.get("MemAvailable"),
            swap_total_bytes=mem.get("SwapTotal"),
            swap_free_bytes=mem.get("SwapFree"),
            uptime_s=parse_uptime(uptime_text or ""),
            boot_id=self._read_boot_id(),
        )

    def _read_boot_id(self) -> str | None:
        self._boot_id.begin(_BOOT)
        boot_id = self._boot_id.get(_BOOT[0], lambda _: self.root.read_attr("/proc/sys/kernel/random/boot_id"))
        if boot_id is None:
            self._boot_id.forget(_BOOT[0])
        return boot_id

    def _temperatures(self) -> list[TemperatureReading]:
        out: list[TemperatureReading] = []
        read = self.root.read_attr
        # Listed every tick; which files to read and how to name them is worked out again only
        # when the facts were not kept (see `DeviceFacts.begin`). Dropped first: a fact read that
        # raises leaves none, not the last one of devices whose facts were dropped.
        zones = [z for z in self.root.listdir(THERMAL) if z.startswith("thermal_zone")]
        if not self._zones.begin(zones) or self._zone_reads is None:
            self._zone_reads = None
            self._zone_reads = self._thermal_reads(zones)
        for temp_path, sensor, label, max_c, crit_c in self._zone_reads:
            temp_c = parse_millidegrees(read(temp_path))
            if temp_c is not None:
                out.append(temperature(sensor, label, temp_c, max_c, crit_c, temp_path))
        chips = hwmon_registrations(self.root)
        if not self._chips.begin(chips) or self._chip_reads is None:
            self._chip_reads = None
            self._chip_reads = self._hwmon_reads(chips)
        read_input = self.root.read_present
        for input_path, sensor, label, max_c, crit_c in self._chip_reads:
            try:
                temp_c = parse_millidegrees(read_input(input_path))
            except FileNotFoundError:
                # Gone since its chip's facts were read: they are read again at the next tick
                # (`hwmon_chips.read_chip_input`), not opened and failed every tick until a refresh.
                if (gone := chip_of(chips, input_path)) is not None:
                    self._chips.reread(gone)
                continue
            if temp_c is not None:
                out.append(temperature(sensor, label, temp_c, max_c, crit_c, input_path))
        return out

    def _thermal_reads(self, zones: list[str]) -> tuple[TempRead, ...]:
        """Each thermal zone's temperature a tick reads, in order: its ``temp`` path, sensor (named by its
        type, `zone_sensors`: ``thermal_zoneN`` is numbered in probe order), label and the limits of its
        ``hot`` and ``critical`` trip points (read with its facts, see `read_zone_facts`)."""
        facts = [self._zones.get(zone, self._zone_facts) for zone in sorted(zones, key=_zone_number)]
        return tuple((f.temp_path, sensor, f.label, f.max_c, f.crit_c)
                     for f, sensor in zip(facts, zone_sensors([f.label for f in facts]), strict=True))

    def _hwmon_reads(self, chip_ids: list[HwmonChip]) -> tuple[TempRead, ...]:
        """Each hwmon temperature a tick reads, in order: its ``_input`` path, sensor, label and limits
        (`hwmon_temp_reads`)."""
        return hwmon_temp_reads(chip_ids, [self._chips.get(chip, self._hwmon_facts) for chip in chip_ids])

    def _zone_facts(self, zone: str) -> ZoneFacts:
        return read_zone_facts(self.root, zone)

    def _hwmon_facts(self, chip_id: HwmonChip) -> HwmonTempFacts:
        return read_hwmon_temp_facts(self.root, self._chips, chip_id)

    def _net(self) -> list[NetInterfaceReading | EventDraft]:
        # An interface may be named in any bytes but "/", ":" and white space: read as its sysfs
        # directory is named, or its state, carrier, speed and MTU would be read from no file.
        # Its records carry the name as text that keeps two such names apart (`text_name`).
        text = self.root.read_text("/proc/net/dev", errors="surrogateescape")
        if text is None:
            return []
        now_s = self.clock.monotonic()
        parsed = parse_net_dev(text)
        counters = parsed.interfaces
        out: list[NetInterfaceReading | EventDraft] = self._net_skipped(parsed.skipped)
        self._kinds.begin(counters)
        read = self.root.read_attr
        rate = self._rates.rate
        facts_of, read_facts = self._kinds.get, self._net_facts
        judge = self._links.judge
        for name, c in sorted(counters.items()):
            if name in _SKIPPED_INTERFACES:
                continue
            facts = facts_of(name, read_facts)
            carrier = parse_int(read(facts.carrier_path))
            speed = parse_int(read(facts.speed_path))
            operstate = read(facts.operstate_path) or None  # empty: said nothing (never the state "")
            rxb, txb, rxp, txp = facts.rate_keys
            rx_pps = rate(rxp, c.rx_packets, now_s)
            tx_pps = rate(txp, c.tx_packets, now_s)
            speed_mbps = speed if speed is not None and speed > 0 else None
            carrier_changes = parse_int(read(facts.carrier_changes_path))
            has_carrier = None if carrier is None else carrier == 1
            lost, link_events = judge(facts.name, facts.kind, facts.rdma, has_carrier, operstate, carrier_changes,
                                      speed_mbps, c.rx_bytes)
            out.extend(link_events)
            out.append(
                NetInterfaceReading(
                    name=facts.name,
                    operstate=operstate,
                    carrier=has_carrier,
                    # The kernel reports -1 (or EINVAL) when the speed is unknown.
                    speed_mbps=speed_mbps,
                    mtu=parse_int(read(facts.mtu_path)),
                    rx_bytes_total=c.rx_bytes,
                    tx_bytes_total=c.tx_bytes,
                    rx_packets_total=c.rx_packets,
                    tx_packets_total=c.tx_packets,
                    rx_errors_total=c.rx_errors,
                    tx_errors_total=c.tx_errors,
                    rx_dropped_total=c.rx_dropped,
                    tx_dropped_total=c.tx_dropped,
                    carrier_changes_total=carrier_changes,
                    rx_bytes_per_s=rate(rxb, c.rx_bytes, now_s),
                    tx_bytes_per_s=rate(txb, c.tx_bytes, now_s),
                    rx_packets_per_s=rx_pps,
                    tx_packets_per_s=tx_pps,
                    kind=facts.kind,
                    stalled=facts.kind in STALL_KINDS
                    and self._stalled(name, operstate == "up" or carrier == 1, rx_pps, tx_pps, now_s),
                    link_lost=lost,
                )
            )
        # What is kept about interfaces that went away goes with them.
        if counters.keys() != self._net_names:
            self._net_names = frozenset(counters)
            self._rates.forget_missing({(n, k) for n in counters for k in ("rxb", "txb", "rxp", "txp")})
            for gone in set(self._last_active_s) - self._net_names:
                del self._last_active_s[gone]
            out.extend(self._links.forget_missing({text_name(n) for n in counters}))
        return out

    def _net_skipped(self, skipped: tuple[str, ...]) -> list[NetInterfaceReading | EventDraft]:
        """One warning when /proc/net/dev holds a line that was not skipped at the last read."""
        self.net_skipped_lines_total += len(skipped)
        new = [line for line in skipped if line not in self._net_skipped_before]
        self._net_skipped_before = skipped
        if not new:
            return []
        count = len(skipped)
        return [EventDraft(
            "net_dev_line_skipped", "warning", "host",
            f"/proc/net/dev: skipped {count} line{'s' if count != 1 else ''} that {'are' if count != 1 else 'is'} "
            f"not /proc/net/dev ({self.net_skipped_lines_total} so far): {new[0][:120]!r}",
            {"skipped": count, "skipped_total": self.net_skipped_lines_total, "line": new[0][:200]},
        )]

    def _net_facts(self, name: str) -> NetFacts:
        base = f"/sys/class/net/{name}"
        return NetFacts(
            name=text_name(name), kind=self._kind(name), carrier_path=f"{base}/carrier", speed_path=f"{base}/speed",
            operstate_path=f"{base}/operstate", mtu_path=f"{base}/mtu", carrier_changes_path=f"{base}/carrier_changes",
            rate_keys=((name, "rxb"), (name, "txb"), (name, "rxp"), (name, "txp")),
            rdma=self.root.exists(f"{base}/device/infiniband"),
        )

    def _kind(self, name: str) -> str | None:
        base = f"/sys/class/net/{name}"
        driver_link = self.root.readlink(f"{base}/device/driver")
        return parse_net_kind(
            name=name,
            link_type=parse_int(self.root.read_attr(f"{base}/type")),
            driver=driver_link.rstrip("/").rsplit("/", 1)[-1] if driver_link else None,
            has_device=self.root.readlink(f"{base}/device") is not None or self.root.exists(f"{base}/device"),
            is_wireless=self.root.exists(f"{base}/wireless") or self.root.exists(f"{base}/phy80211"),
            is_bridge=self.root.exists(f"{base}/bridge"),
            is_bond=self.root.exists(f"{base}/bonding"),
        )

    def _stalled(self, name: str, up: bool, rx_pps: float | None, tx_pps: float | None, now_s: float) -> bool:
        """Up, used to carry traffic, and no packet either way for ``net_stall_after_s``."""
        if rx_pps is None or tx_pps is None:
            return False
        if rx_pps > 0 or tx_pps > 0:
            self._last_active_s[name] = now_s
            return False
        last = self._last_active_s.get(name)
        return up and last is not None and now_s - last >= self.net_stall_after_s


def _zone_number(zone: str) -> int:
    """``thermal_zone12`` -> 12: zones in the order the kernel registered them (``thermal_zone10``
    after ``thermal_zone9``, where a listing sorts it after ``thermal_zone1``)."""
    digits = zone.removeprefix("thermal_zone")
    return int(digits) if digits.isdigit() else -1


def make_host_collector(ctx: CollectorContext) -> HostCollector:
    """Registry factory."""
    return HostCollector(ctx.root, ctx.clock, ctx.config.storage.net_stall_after_s)
