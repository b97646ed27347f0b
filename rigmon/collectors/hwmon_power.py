"""hwmon power collector: Super I/O / BMC voltage inputs and PMBus PSUs, without a serial ADC."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from rigmon.collectors.base import CollectorContext, EventDraft, NoData, PolledCollector
from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.host_chip_names import registration_chip_name
from rigmon.collectors.hwmon_chips import (
    HWMON,
    HwmonChip,
    chip_of,
    hwmon_registrations,
    list_chip,
    read_chip_input,
)
from rigmon.collectors.sysfs_values import parse_int
from rigmon.config import PsuHwmonSection
from rigmon.hw.root import HostRoot
from rigmon.lazy_re import lazy_compile
from rigmon.schema import HwmonVoltageReading, PmbusPsuReading

#: hwmon units: in* millivolts, curr* milliamperes, power* microwatts, temp* millidegrees.
MILLI = 1000.0
MICRO = 1_000_000.0
#: Drivers that expose a PMBus power supply (the generic one and PSU-specific ones).
PMBUS_DRIVERS = frozenset({"pmbus", "ibm-cffps", "inspur-ipsps1", "dps920ab", "fsp-3y", "bel-pfe",
                           "delta-ahe50dc-fan", "q54sj108a2", "pim4328", "lm25066", "mp2975"})
#: Below this total output current the share between PSUs is noise.
MIN_SHARE_AMPS = 5.0
#: Consecutive readings that must agree before a supply's imbalance (or its end) is reported: each
#: supply's telemetry is sampled at its own moment, so one reading across a load step (GPUs ramping
#: together) can show a share no connection causes.
IMBALANCE_READS = 3
#: PMBus drivers label their inputs: vin, vout1, iin, iout1, pin, pout1. Each figure of a PSU is
#: the first readable channel whose label starts with its prefix, in its unit's scale.
PMBUS_FIGURES = (("vin", MILLI), ("vout", MILLI), ("iin", MILLI), ("iout", MILLI), ("pin", MICRO), ("pout", MICRO))
#: An I2C client's device name, ``<bus>-<address, 4 hex digits>`` (``7-0058``): stable across
#: reboots, where the ``hwmonN`` the kernel numbers in probe order is not.
I2C_CLIENT = lazy_compile(r"\d+-[0-9a-f]{4}")

@dataclass(frozen=True, slots=True)
class ChannelFacts:
    """What does not change about one channel: its label and programmed limits (raw units)."""

    name: str
    label: str | None
    min_value: int | None
    max_value: int | None
    #: Whether the chip has an ``<name>_alarm`` file for it.
    has_alarm: bool


@dataclass(frozen=True, slots=True)
class ChipFacts:
    """What does not change about one hwmon chip while it is registered (read once, see `DeviceFacts`)."""

    chip: str
    channels: tuple[ChannelFacts, ...]
    #: Every ``*_alarm`` file of the chip.
    alarm_files: tuple[str, ...]
    has_temp1: bool
    has_fan1: bool
    #: The I2C client behind the chip (``7-0058``, from its ``device`` link), ``None`` when not on I2C.
    i2c_client: str | None = None
    #: The chip's libsensors name (``nct6798-isa-0290``, `read_chip_name`) that names its voltage inputs;
    #: ``None`` for a PMBus supply (named by its I2C client) or a chip whose ``name`` did not read.
    chip_name: str | None = None
    #: For each of `PMBUS_FIGURES`, the indexes in ``channels`` of the channels labelled for it.
    pmbus_figures: tuple[tuple[int, ...], ...] = ()
    #: How a tick reads the chip (paths and what is fixed about its readings), see `ChipPlan`.
    plan: ChipPlan | None = None
    #: `ChipListing.seen`: the reading and alarm files this registration has shown.
    seen: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class VoltageInput:
    """One voltage input of a non-PMBus chip as a tick reads it: its paths and fixed figures."""

    input_path: str
    #: ``<name>_alarm``'s path, ``None`` when the chip has none for this input.
    alarm_path: str | None
    #: ``<chip name>/inM`` or ``hwmonN/inM`` (see `voltage_reads`).
    sensor: str
    #: The chip's ``name`` (``nct6798``).
    chip: str
    label: str
    scale: float
    min_volts: float | None
    max_volts: float | None


@dataclass(frozen=True, slots=True)
class ChipPlan:
    """The reads of one chip a tick: a PMBus supply's figures, alarms, temperature and fan, or
    another chip's voltage inputs (nothing else of such a chip is reported)."""

    pmbus: bool
    #: PMBus: for each of `PMBUS_FIGURES`, the input paths of its labelled channels, in order,
    #: and the figure's unit scale (`MILLI`, `MICRO`).
    figure_reads: tuple[tuple[tuple[str, ...], float], ...] = ()
    #: PMBus: (channel, path) of every ``*_alarm`` file, sorted by channel.
    alarm_paths: tuple[tuple[str, str], ...] = ()
    temp1_path: str | None = None
    fan1_path: str | None = None
    #: Other chips: the ``in*`` channels, named by the kernel's numbering (``hwmon3/in4``).
    voltages: tuple[VoltageInput, ...] = ()
    #: `voltages` named by the chip's libsensors name (``nct6798-isa-0290/in4``), when it has one.
    named_voltages: tuple[VoltageInput, ...] = ()


#: One PMBus supply's tick: hwmon device, I2C client, chip, figures (in `PMBUS_FIGURES` order, in
#: volts, amperes and watts), alarms set, temperature (°C) and fan (RPM).
PsuFigures = tuple[str, str | None, str, list[float | None], tuple[str, ...], float | None, float | None]


def parse_hwmon_int(text: str | None) -> int | None:
    """An hwmon attribute as an integer; ``None`` when absent or not a number."""
    # 12096
    return parse_int(text)


def parse_channel_names(entries: Sequence[str], kind: str) -> list[str]:
    """Channel names (``in0``, ``curr2``) of one kind from a chip directory listing, in order."""
    # in4_input -> in4
    names = []
    for entry in entries:
        if entry.startswith(kind) and entry.endswith("_input"):
            channel = entry[: -len("_input")]
            if channel[len(kind):].isdigit():
                names.append(channel)
    return sorted(names, key=lambda c: int(c[len(kind):]))


def parse_i2c_client(link: str | None) -> str | None:
    """The I2C client name of an hwmon chip's ``device`` link target, ``None`` when it is not one."""
    # ../../../7-0058  (the pmbus driver's hwmonN/device -> the PSU's I2C client)
    if not link:
        return None
    name = link.rstrip("/").rsplit("/", 1)[-1]
    return name if I2C_CLIENT.fullmatch(name) else None


def psu_sensors(chips: Sequence[tuple[str, str | None]]) -> list[str]:
    """The sensor name of each PMBus PSU given as (``hwmonN``, I2C client or ``None``): the I2C
    client, stable across reboots; ``hwmonN`` for a PSU without one or whose client another
    chip shares (two hwmon devices of one client), so that names stay unique."""
    clients = [client for _, client in chips if client is not None]
    return [client if client is not None and clients.count(client) == 1 else hwmon for hwmon, client in chips]


def voltage_reads(facts: Sequence[ChipFacts]) -> tuple[VoltageInput, ...]:
    """Each voltage input of the chips with ``facts`` (in the listing's order) a tick reads, in order, each
    named the same every boot: the kernel numbers hwmon devices in probe order, so after a reboot ``hwmonN``
    may be another chip, and the journal series, /metrics labels and alarm subjects would follow it.

    An input is named by its chip's libsensors name and its channel (``nct6798-isa-0290/in4``), as
    ``sensors nct6798-isa-0290`` and sensors.conf (``label in4 "+12V"``, ``compute in4 ...``) name it; not by
    its ``inM_label``, which most Super I/O drivers do not give (nct6775) or give a few inputs of only,
    generic (it87's ``3VSB``, ``Vbat``), and which a kernel that adds one would rename. Two chips of one
    libsensors name (two virtual devices of one driver, a tree copied without its links) are named by their
    ``hwmonN`` (``hwmon3/in4``), so that no two inputs share a name, as the host collector names their
    temperatures (`hwmon_temp_reads`). PMBus supplies have no voltage inputs here (their figures are theirs).
    """
    names = [f.chip_name for f in facts if f.chip_name is not None]
    return tuple(vin for f in facts if f.plan is not None and not f.plan.pmbus
                 for vin in (f.plan.named_voltages if f.chip_name is not None and names.count(f.chip_name) == 1
                             else f.plan.voltages))


def current_shares(iout_amps: Sequence[float | None], imbalance_pct: float) -> list[tuple[float | None, float | None, bool]]:
    """Each PSU's share of the summed output current, its deviation from an equal share, and
    whether that deviation exceeds ``imbalance_pct`` percentage points.

    PSUs without a reading, and all of them when the total is below MIN_SHARE_AMPS, get
    ``(None, None, False)``.
    """
    known = [a for a in iout_amps if a is not None]
    total = sum(known)
    if len(known) < 2 or total < MIN_SHARE_AMPS:
        return [(None, None, False)] * len(iout_amps)
    equal = 100.0 / len(known)
    out: list[tuple[float | None, float | None, bool]] = []
    for amps in iout_amps:
        if amps is None:
            out.append((None, None, False))
            continue
        share = 100.0 * amps / total
        deviation = share - equal
        out.append((round(share, 2), round(deviation, 2), abs(deviation) > imbalance_pct))
    return out


class HwmonPowerCollector(PolledCollector):
    """Voltage inputs of every hwmon chip, and per-PSU readings of PMBus supplies.

    Chip names, channel labels and programmed limits, and which files a chip has, are read
    once per chip (see `DeviceFacts`): again when the set of chips changes (a chip registered
    again under the same ``hwmonN`` is a change, see `HwmonChip`), every
    `device_facts.REFRESH_EVERY` reads, and soon, backing off, while a chip lacks an input it
    should have (see `_chip_facts`).

    Args:
        root: the machine's files.
        config: ``[psu.hwmon]``: per-input scale factors, imbalance threshold.
    """

    name = "psu_hwmon"

    def __init__(self, root: HostRoot, config: PsuHwmonSection) -> None:
        self.root = root
        self.config = config
        #: Supplies reported imbalanced, and how many readings in a row said otherwise (`IMBALANCE_READS`).
        self._imbalanced: set[str] = set()
        self._disagreeing: dict[str, int] = {}
        self._facts: DeviceFacts[HwmonChip, ChipFacts] = DeviceFacts()
        #: The PMBus supplies' sensor names (see `psu_sensors`) while the chips' facts are kept.
        self._sensors: list[str] | None = None
        #: The voltage inputs a tick reads (see `voltage_reads`) while the chips' facts are kept.
        self._voltages: tuple[VoltageInput, ...] | None = None

    def _chip_facts(self, chip: HwmonChip) -> ChipFacts:
        """Chip name and libsensors name, channels with labels and limits, and which optional files exist.

        A chip lacking a file it should have (`ChipListing.incomplete`: an input its driver creates
        a moment after the chip appears, or hides for now) has its facts read again soon, backing
        off (`DeviceFacts.recheck`); its absent files are not read until they are listed. What an
        earlier read of the same registration found and this one does not (a ``name`` or
        ``device`` link that did not read) is kept.
        """
        hwmon = chip[0]
        base = f"{HWMON}/{hwmon}"
        attr = self.root.read_attr
        before, listing = list_chip(self.root, self._facts, chip)
        entries, present = listing.entries, listing.present
        channels = self._channels(base, entries, present)
        name = attr(f"{base}/name")
        driver = name or (hwmon if before is None else before.chip)
        facts = ChipFacts(
            chip=driver,
            channels=channels,
            alarm_files=tuple(e for e in entries if e.endswith("_alarm")),
            has_temp1="temp1_input" in present,
            has_fan1="fan1_input" in present,
            i2c_client=parse_i2c_client(self.root.readlink(f"{base}/device"))
            or (None if before is None else before.i2c_client),
            # A PMBus supply is named by its I2C client (`psu_sensors`).
            chip_name=None if driver in PMBUS_DRIVERS else registration_chip_name(self.root, base, name, before),
            pmbus_figures=tuple(tuple(i for i, cf in enumerate(channels) if (cf.label or "").startswith(prefix))
                                for prefix, _ in PMBUS_FIGURES),
            seen=listing.seen,
        )
        return dataclasses.replace(facts, plan=self._plan(hwmon, facts))

    def _channels(self, base: str, entries: list[str], present: frozenset[str]) -> tuple[ChannelFacts, ...]:
        """The ``in``, ``curr`` and ``power`` channels of the chip at ``base`` (listed as ``entries``), in order."""
        attr = self.root.read_attr
        channels = []
        for kind in ("in", "curr", "power"):
            for name in parse_channel_names(entries, kind):
                channels.append(ChannelFacts(
                    name=name,
                    label=(attr(f"{base}/{name}_label") if f"{name}_label" in present else None) or None,
                    min_value=parse_hwmon_int(attr(f"{base}/{name}_min")) if f"{name}_min" in present else None,
                    max_value=parse_hwmon_int(attr(f"{base}/{name}_max")) if f"{name}_max" in present else None,
                    has_alarm=f"{name}_alarm" in present,
                ))
        return tuple(channels)

    def _plan(self, hwmon: str, facts: ChipFacts) -> ChipPlan:
        """The paths a tick reads for ``facts``, and the figures of its readings that do not change."""
        base = f"{HWMON}/{hwmon}"
        if facts.chip in PMBUS_DRIVERS:
            return ChipPlan(
                pmbus=True,
                figure_reads=tuple((tuple(f"{base}/{facts.channels[i].name}_input" for i in indexes), unit)
                                   for indexes, (_, unit) in zip(facts.pmbus_figures, PMBUS_FIGURES, strict=True)),
                alarm_paths=tuple(sorted((e[: -len("_alarm")], f"{base}/{e}") for e in facts.alarm_files)),
                temp1_path=f"{base}/temp1_input" if facts.has_temp1 else None,
                fan1_path=f"{base}/fan1_input" if facts.has_fan1 else None,
            )
        voltages = []
        for cf in facts.channels:
            if not cf.name.startswith("in"):
                continue
            scale = self.config.scale.get(f"{facts.chip}/{cf.name}", 1.0)
            voltages.append(VoltageInput(
                input_path=f"{base}/{cf.name}_input",
                alarm_path=f"{base}/{cf.name}_alarm" if cf.has_alarm else None,
                sensor=f"{hwmon}/{cf.name}", chip=facts.chip, label=cf.label or cf.name, scale=scale,
                min_volts=None if cf.min_value is None else round(cf.min_value / MILLI * scale, 4),
                max_volts=None if cf.max_value is None else round(cf.max_value / MILLI * scale, 4),
            ))
        chip_name = facts.chip_name
        return ChipPlan(pmbus=False, voltages=tuple(voltages), named_voltages=() if chip_name is None else tuple(
            dataclasses.replace(vin, sensor=f"{chip_name}/{vin.sensor.partition('/')[2]}") for vin in voltages))

    def collect(self) -> Sequence[object]:
        if not self.config.enabled:
            raise NoData("[psu.hwmon] disabled")
        volts: list[HwmonVoltageReading] = []
        psus: list[PsuFigures] = []
        chips = hwmon_registrations(self.root)
        if not self._facts.begin(chips):
            self._sensors = self._voltages = None
        read, read_input = self.root.read_attr, self.root.read_present
        facts_of, read_facts = self._facts.get, self._chip_facts
        voltages = self._voltages
        if voltages is None:
            # The names follow from every chip's facts (two chips of one name): worked out again when
            # those are read again.
            voltages = self._voltages = voltage_reads([facts_of(chip_id, read_facts) for chip_id in chips])
        for vin in voltages:
            try:
                value = parse_int(read_input(vin.input_path))
            except FileNotFoundError:
                # Gone since the facts were read: read again at the next tick (`read_chip_input`).
                if (chip_id := chip_of(chips, vin.input_path)) is not None:
                    self._facts.reread(chip_id)
                continue
            if value is None:
                continue
            alarm = None if vin.alarm_path is None else parse_int(read(vin.alarm_path))
            volts.append(HwmonVoltageReading(
                sensor=vin.sensor, chip=vin.chip, label=vin.label,
                volts=round(value / MILLI * vin.scale, 4), min_volts=vin.min_volts, max_volts=vin.max_volts,
                alarm=None if alarm is None else alarm != 0, scale=vin.scale,
            ))
        for chip_id in chips:
            facts = facts_of(chip_id, read_facts)
            plan = facts.plan
            assert plan is not None  # set by _chip_facts
            if plan.pmbus:
                psus.append(self._psu_figures(chip_id, facts, plan))
        if not volts and not psus:
            raise NoData("no hwmon voltage inputs or PMBus supplies")
        records: list[object] = [*volts, *self._psus(psus)]
        return records

    def _psu_figures(self, chip: HwmonChip, facts: ChipFacts, plan: ChipPlan) -> PsuFigures:
        """One PMBus supply's readings this tick (see `PsuFigures`); an input gone since its facts
        were read has them read again at the next tick (`read_chip_input`)."""
        read = self.root.read_attr
        alarms: tuple[str, ...] = ()
        for name, path in plan.alarm_paths:
            if parse_int(read(path)):
                alarms += (name,)  # rare: no list built per tick for the alarms that are not set
        figures: list[float | None] = []
        for paths, unit in plan.figure_reads:
            # The first readable of the channels labelled for this figure.
            for path in paths:
                value = parse_int(read_chip_input(self.root, self._facts, chip, path))
                if value is not None:
                    # Each figure is given to 4 decimals. Millivolts and milliamperes in volts and
                    # amperes have 3: ``value / MILLI`` is the double nearest a multiple of 0.001,
                    # which rounds to itself, so round() (it formats the number in decimal and
                    # parses it back, the costliest step here) is only for the microwatts.
                    figures.append(value / unit if unit == MILLI else round(value / unit, 4))
                    break
            else:
                figures.append(None)
        temp = None if plan.temp1_path is None else parse_int(read_chip_input(self.root, self._facts, chip,
                                                                             plan.temp1_path))
        fan = None if plan.fan1_path is None else parse_int(read_chip_input(self.root, self._facts, chip,
                                                                            plan.fan1_path))
        return (chip[0], facts.i2c_client, facts.chip, figures, alarms,
                None if temp is None else temp / MILLI, None if fan is None else float(fan))

    def _psus(self, psus: list[PsuFigures]) -> list[object]:
        shares = current_shares([psu[3][3] for psu in psus], self.config.share_imbalance_pct)
        # Series in the journal, alarm and event subjects and /metrics labels are keyed by
        # the sensor, so it must name the same PSU after a reboot renumbers the hwmon devices.
        # The names follow from the chips' facts (and the listing's order, sorted): worked out
        # again when those are read again.
        sensors = self._sensors
        if sensors is None or len(sensors) != len(psus):
            sensors = self._sensors = psu_sensors([(psu[0], psu[1]) for psu in psus])
        out: list[object] = []
        for sensor, (_, _, chip, figures, alarms, temp_c, fan_rpm), (share, deviation, imbalanced) in zip(
            sensors, psus, shares, strict=True
        ):
            vin, vout, iin, iout, pin, pout = figures
            out.append(PmbusPsuReading(
                sensor=sensor, chip=chip,
                vin_volts=vin, vout_volts=vout, iin_amps=iin, iout_amps=iout, pin_w=pin, pout_w=pout,
                temp_c=temp_c, fan_rpm=fan_rpm, alarms=alarms,
                share_pct=share, share_deviation_pct=deviation, imbalanced=imbalanced,
            ))
            event = self._judge(sensor, share, deviation, imbalanced)
            if event is not None:
                out.append(event)
        return out

    def _judge(self, sensor: str, share: float | None, deviation: float | None, imbalanced: bool) -> EventDraft | None:
        """The event when ``sensor``'s imbalance starts or ends, `IMBALANCE_READS` readings in a row
        saying so; none while the share is not known (the supplies nearly idle: it says nothing)."""
        if share is None:
            return None
        if imbalanced == (sensor in self._imbalanced):
            self._disagreeing.pop(sensor, None)
            return None
        runs = self._disagreeing[sensor] = self._disagreeing.get(sensor, 0) + 1
        if runs < IMBALANCE_READS:
            return None
        del self._disagreeing[sensor]
        if imbalanced:
            self._imbalanced.add(sensor)
            return EventDraft(
                kind="psu_current_imbalance", severity="warning", subject=f"psu:{sensor}",
                message=f"PSU {sensor} carries {share}% of the current ({deviation:+} points from an equal "
                        "share): check its connections",
                data={"share_pct": share, "deviation_pct": deviation},
            )
        self._imbalanced.discard(sensor)
        return EventDraft(kind="psu_current_balanced", severity="info", subject=f"psu:{sensor}",
                          message=f"PSU {sensor} shares the current evenly again")


def make_hwmon_power_collector(ctx: CollectorContext) -> HwmonPowerCollector:
    """Registry factory."""
    return HwmonPowerCollector(ctx.root, ctx.config.psu.hwmon)
