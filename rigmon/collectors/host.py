"""Host collector: CPU, load, memory, temperatures and network interfaces from /proc and /sys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rigmon.clock import Clock
from rigmon.collectors.base import CollectorContext, CollectorError, EventDraft, PolledCollector
from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.host_proc import (
    CpuTimes,
    parse_loadavg,
    parse_meminfo,
    parse_net_dev,
    parse_proc_stat,
    parse_uptime,
)
from rigmon.collectors.host_thermal import THERMAL, ZoneFacts, read_zone_facts
from rigmon.collectors.hwmon_chips import HWMON, HwmonChip, chip_of, hwmon_registrations, list_chip
from rigmon.collectors.hwmon_power import PMBUS_DRIVERS, parse_i2c_client, psu_sensors
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

#: What a tick reads for one temperature: its input path, sensor name, label, and the high and
#: critical limits (°C) read with its chip's facts (``None``: it has none).
TempRead = tuple[str, str, str, float | None, float | None]


def parse_temp_limit(text: str | None) -> float | None:
    """A hwmon ``tempN_max``/``tempN_crit`` in °C; ``None`` when unreadable or not above 0 °C
    (drivers that were given no limit report 0, e.g. an unprogrammed Super I/O channel: no limit)."""
    limit_c = parse_millidegrees(text)
    return limit_c if limit_c is not None and limit_c > 0 else None


def temperature(sensor: str, label: str, temp_c: float, max_c: float | None,
                crit_c: float | None) -> TemperatureReading:
    """One sensor's reading with its limits, and whether it is at or over its critical limit
    (``None``: it has none), which alarm rules select (a rule compares a field with a value, not
    with another field)."""
    return TemperatureReading(sensor=sensor, label=label, temp_c=temp_c, max_c=max_c, crit_c=crit_c,
                              over_crit=None if crit_c is None else temp_c >= crit_c)


# Interfaces that carry no rig traffic: loopback only. Virtual bridges stay visible
# because thunderbolt-net and bonding show up as virtual devices too.
_SKIPPED_INTERFACES = {"lo"}


@dataclass(frozen=True, slots=True)
class HwmonTempFacts:
    """One hwmon chip's temperature channels (``temp1``...) with their labels, as shown."""

    chip: str
    channels: tuple[tuple[str, str], ...]
    #: Per channel: its ``_input`` path, its sensor name (``hwmon3/temp1``), label (chip and
    #: label), and its ``_max`` and ``_crit`` limits (see `TempRead`).
    reads: tuple[TempRead, ...] = ()
    #: A PMBus PSU's I2C client (``7-0058``), ``None`` for any other chip or a PSU without one.
    i2c_client: str | None = None
    #: `reads` with the sensors named by `i2c_client` (``7-0058/temp1``), for a PSU that has one.
    client_reads: tuple[TempRead, ...] = ()
    #: `ChipListing.seen`: the reading and alarm files this registration has shown.
    seen: frozenset[str] = frozenset()


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
                out.append(temperature(sensor, label, temp_c, max_c, crit_c))
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
                out.append(temperature(sensor, label, temp_c, max_c, crit_c))
        return out

    def _thermal_reads(self, zones: list[str]) -> tuple[TempRead, ...]:
        """Each thermal zone's temperature a tick reads, in order: its ``temp`` path, sensor, label and
        the limits of its ``hot`` and ``critical`` trip points (read with its facts, see `read_zone_facts`)."""
        reads: list[TempRead] = []
        for zone in zones:
            facts = self._zones.get(zone, self._zone_facts)
            reads.append((facts.temp_path, zone, facts.label, facts.max_c, facts.crit_c))
        return tuple(reads)

    def _hwmon_reads(self, chip_ids: list[HwmonChip]) -> tuple[TempRead, ...]:
        """Each hwmon temperature a tick reads, in order: its ``_input`` path, sensor, label and limits."""
        facts = [self._chips.get(chip, self._hwmon_facts) for chip in chip_ids]
        chips = [hwmon for hwmon, _ in chip_ids]
        # A PMBus PSU's temperature is named by its I2C client, as psu_hwmon names the PSU: the
        # kernel numbers hwmon devices in probe order, so after a reboot hwmonN may be another
        # PSU, and the journal series, /metrics labels and alarm identities would follow it.
        clients = [f.i2c_client for f in facts if f.i2c_client is not None]
        if len(set(clients)) != len(clients):
            psus = [(hwmon, f.i2c_client) for hwmon, f in zip(chips, facts, strict=True) if f.client_reads]
            shared = {hwmon for (hwmon, client), sensor in zip(psus, psu_sensors(psus), strict=True)
                      if sensor != client}
        else:
            shared = set()
        return tuple(read for hwmon, chip_facts in zip(chips, facts, strict=True)
                     for read in (chip_facts.client_reads if chip_facts.client_reads and hwmon not in shared
                                  else chip_facts.reads))

    def _zone_facts(self, zone: str) -> ZoneFacts:
        return read_zone_facts(self.root, zone)

    def _hwmon_facts(self, chip_id: HwmonChip) -> HwmonTempFacts:
        """A chip's name, temperature channels with their labels and limits (``tempN_max``,
        ``tempN_crit``: read here, once per registration, not every tick), and I2C client (a PMBus PSU's).

        A chip lacking a file it should have (`ChipListing.incomplete`: an input its driver creates
        a moment after the chip appears, or hides for now) has its facts read again soon, backing
        off (`DeviceFacts.recheck`); an absent input is not read until it is listed. What an earlier
        read of the same registration found and this one does not (a ``name`` or ``device`` link
        that did not read) is kept.
        """
        hwmon = chip_id[0]
        base = f"{HWMON}/{hwmon}"
        before, listing = list_chip(self.root, self._chips, chip_id)
        present = listing.present
        channels = []
        limits: list[tuple[float | None, float | None]] = []
        for entry in listing.entries:
            if not (entry.startswith("temp") and entry.endswith("_input")):
                continue
            channel = entry[: -len("_input")]
            label = self.root.read_attr(f"{base}/{channel}_label") if f"{channel}_label" in present else None
            channels.append((channel, label or channel))
            limits.append((self._temp_limit(f"{base}/{channel}_max", present),
                           self._temp_limit(f"{base}/{channel}_crit", present)))
        chip = self.root.read_attr(f"{base}/name") or (hwmon if before is None else before.chip)
        client = parse_i2c_client(self.root.readlink(f"{base}/device")) if chip in PMBUS_DRIVERS else None
        if client is None and before is not None and before.chip == chip:
            client = before.i2c_client
        return HwmonTempFacts(chip=chip, channels=tuple(channels), reads=tuple(
            (f"{base}/{channel}_input", f"{hwmon}/{channel}", f"{chip} {label}", max_c, crit_c)
            for (channel, label), (max_c, crit_c) in zip(channels, limits, strict=True)),
            i2c_client=client, client_reads=() if client is None else tuple(
            (f"{base}/{channel}_input", f"{client}/{channel}", f"{chip} {label}", max_c, crit_c)
            for (channel, label), (max_c, crit_c) in zip(channels, limits, strict=True)),
            seen=listing.seen)

    def _temp_limit(self, path: str, present: frozenset[str]) -> float | None:
        """The limit (°C) in ``path`` when its chip's listing ``present`` holds it (not opened when not)."""
        return parse_temp_limit(self.root.read_attr(path)) if path.rsplit("/", 1)[-1] in present else None

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
            out.append(
                NetInterfaceReading(
                    name=facts.name,
                    operstate=operstate,
                    carrier=None if carrier is None else carrier == 1,
                    # The kernel reports -1 (or EINVAL) when the speed is unknown.
                    speed_mbps=speed if speed is not None and speed > 0 else None,
                    mtu=parse_int(read(facts.mtu_path)),
                    rx_bytes_total=c.rx_bytes,
                    tx_bytes_total=c.tx_bytes,
                    rx_packets_total=c.rx_packets,
                    tx_packets_total=c.tx_packets,
                    rx_errors_total=c.rx_errors,
                    tx_errors_total=c.tx_errors,
                    rx_dropped_total=c.rx_dropped,
                    tx_dropped_total=c.tx_dropped,
                    carrier_changes_total=parse_int(read(facts.carrier_changes_path)),
                    rx_bytes_per_s=rate(rxb, c.rx_bytes, now_s),
                    tx_bytes_per_s=rate(txb, c.tx_bytes, now_s),
                    rx_packets_per_s=rx_pps,
                    tx_packets_per_s=tx_pps,
                    kind=facts.kind,
                    stalled=facts.kind in STALL_KINDS
                    and self._stalled(name, operstate == "up" or carrier == 1, rx_pps, tx_pps, now_s),
                )
            )
        # What is kept about interfaces that went away goes with them.
        if counters.keys() != self._net_names:
            self._net_names = frozenset(counters)
            self._rates.forget_missing({(n, k) for n in counters for k in ("rxb", "txb", "rxp", "txp")})
            for gone in set(self._last_active_s) - self._net_names:
                del self._last_active_s[gone]
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


def make_host_collector(ctx: CollectorContext) -> HostCollector:
    """Registry factory."""
    return HostCollector(ctx.root, ctx.clock, ctx.config.storage.net_stall_after_s)
