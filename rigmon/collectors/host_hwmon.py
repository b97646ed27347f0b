"""hwmon temperatures of the host collector: a chip's facts (its name, libsensors name, channels with
their labels and limits, a PMBus PSU's I2C client) and the reads a tick makes of them, each sensor named
the same every boot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.host_chip_names import input_names, registration_chip_name
from rigmon.collectors.hwmon_chips import HWMON, HwmonChip, list_chip
from rigmon.collectors.hwmon_power import PMBUS_DRIVERS, parse_i2c_client, psu_sensors
from rigmon.collectors.sysfs_values import parse_millidegrees
from rigmon.hw.root import HostRoot
from rigmon.schema import TemperatureReading

#: What a tick reads for one temperature: its input path, sensor name, label, and the high and
#: critical limits (°C) read with its chip's or zone's facts (``None``: it has none).
TempRead = tuple[str, str, str, float | None, float | None]


def parse_temp_limit(text: str | None) -> float | None:
    """A hwmon ``tempN_max``/``tempN_crit`` in °C; ``None`` when unreadable or not above 0 °C
    (drivers that were given no limit report 0, e.g. an unprogrammed Super I/O channel: no limit)."""
    limit_c = parse_millidegrees(text)
    return limit_c if limit_c is not None and limit_c > 0 else None


def temperature(sensor: str, label: str, temp_c: float, max_c: float | None,
                crit_c: float | None, input_path: str | None = None) -> TemperatureReading:
    """One sensor's reading with its limits, and whether it is at or over its critical limit
    (``None``: it has none), which alarm rules select (a rule compares a field with a value, not
    with another field), read from ``input_path`` this boot."""
    return TemperatureReading(sensor=sensor, label=label, temp_c=temp_c, max_c=max_c, crit_c=crit_c,
                              over_crit=None if crit_c is None else temp_c >= crit_c, input_path=input_path)


@dataclass(frozen=True, slots=True)
class HwmonTempFacts:
    """One hwmon chip's temperature channels (``temp1``...) with their labels, as shown."""

    chip: str
    channels: tuple[tuple[str, str], ...]
    #: Per channel: its ``_input`` path, its sensor name by the kernel's numbering (``hwmon3/temp1``),
    #: label (chip and label), and its ``_max`` and ``_crit`` limits (see `TempRead`).
    reads: tuple[TempRead, ...] = ()
    #: The chip's libsensors name (``k10temp-pci-00c3``, `read_chip_name`), ``None`` when its ``name``
    #: did not read.
    chip_name: str | None = None
    #: `reads` with the sensors named by `chip_name` and the input's label (``k10temp-pci-00c3/Tctl``).
    named_reads: tuple[TempRead, ...] = ()
    #: A PMBus PSU's I2C client (``7-0058``), ``None`` for any other chip or a PSU without one.
    i2c_client: str | None = None
    #: `reads` with the sensors named by `i2c_client` (``7-0058/temp1``), for a PSU that has one.
    client_reads: tuple[TempRead, ...] = ()
    #: `ChipListing.seen`: the reading and alarm files this registration has shown.
    seen: frozenset[str] = frozenset()


def hwmon_temp_reads(chip_ids: Sequence[HwmonChip], facts: Sequence[HwmonTempFacts]) -> tuple[TempRead, ...]:
    """Each temperature of the chips ``chip_ids`` (with their ``facts``) a tick reads, in order, each named
    the same every boot: the kernel numbers hwmon devices in probe order, so after a reboot ``hwmonN`` may
    be another chip, and the journal series, /metrics labels and alarm identities would follow it.

    A PMBus PSU's temperature is named by its I2C client (``7-0058/temp1``), as psu_hwmon names the PSU;
    any other chip's by its libsensors name and the input's label (``k10temp-pci-00c3/Tctl``). Two chips
    of one name (two hwmon devices of one I2C client, two virtual devices of one driver) are named by
    their ``hwmonN`` (``hwmon3/temp1``), so that no two sensors share a name.
    """
    chips = [hwmon for hwmon, _ in chip_ids]
    clients = [f.i2c_client for f in facts if f.i2c_client is not None]
    if len(set(clients)) != len(clients):
        psus = [(hwmon, f.i2c_client) for hwmon, f in zip(chips, facts, strict=True) if f.client_reads]
        shared = {hwmon for (hwmon, client), sensor in zip(psus, psu_sensors(psus), strict=True)
                  if sensor != client}
    else:
        shared = set()
    names = [f.chip_name for f in facts if f.chip_name is not None and not f.client_reads]
    return tuple(read for hwmon, f in zip(chips, facts, strict=True)
                 for read in (f.client_reads if f.client_reads and hwmon not in shared
                              else f.named_reads if not f.client_reads and f.chip_name is not None
                              and names.count(f.chip_name) == 1
                              else f.reads))


def read_hwmon_temp_facts(root: HostRoot, chips: DeviceFacts[HwmonChip, HwmonTempFacts],
                          chip_id: HwmonChip) -> HwmonTempFacts:
    """A chip's name, libsensors name, temperature channels with their labels and limits (``tempN_max``,
    ``tempN_crit``: read here, once per registration, not every tick), and I2C client (a PMBus PSU's).

    A chip lacking a file it should have (`ChipListing.incomplete`: an input its driver creates
    a moment after the chip appears, or hides for now) has its facts read again soon, backing
    off (`DeviceFacts.recheck`); an absent input is not read until it is listed. What an earlier
    read of the same registration found and this one does not (a ``name`` or ``device`` link
    that did not read) is kept.
    """
    hwmon = chip_id[0]
    base = f"{HWMON}/{hwmon}"
    before, listing = list_chip(root, chips, chip_id)
    present = listing.present
    channels = []
    labels: list[tuple[str, str | None]] = []
    limits: list[tuple[float | None, float | None]] = []
    for entry in listing.entries:
        if not (entry.startswith("temp") and entry.endswith("_input")):
            continue
        channel = entry[: -len("_input")]
        label = root.read_attr(f"{base}/{channel}_label") if f"{channel}_label" in present else None
        channels.append((channel, label or channel))
        labels.append((channel, label))
        limits.append((_temp_limit(root, f"{base}/{channel}_max", present),
                       _temp_limit(root, f"{base}/{channel}_crit", present)))
    name = root.read_attr(f"{base}/name")
    chip = name or (hwmon if before is None else before.chip)
    client = parse_i2c_client(root.readlink(f"{base}/device")) if chip in PMBUS_DRIVERS else None
    if client is None and before is not None and before.chip == chip:
        client = before.i2c_client
    # A PMBus PSU is named as psu_hwmon names it: by its I2C client, else its hwmonN.
    chip_name = None if chip in PMBUS_DRIVERS else registration_chip_name(root, base, name, before)

    def named(prefix: str, inputs: list[str]) -> tuple[TempRead, ...]:
        return tuple((f"{base}/{channel}_input", f"{prefix}/{input_name}", f"{chip} {label}", max_c, crit_c)
                     for (channel, label), input_name, (max_c, crit_c) in zip(channels, inputs, limits, strict=True))

    numbered = [channel for channel, _ in channels]
    return HwmonTempFacts(
        chip=chip, channels=tuple(channels), reads=named(hwmon, numbered), chip_name=chip_name,
        named_reads=() if chip_name is None else named(chip_name, input_names(labels)),
        i2c_client=client, client_reads=() if client is None else named(client, numbered), seen=listing.seen)


def _temp_limit(root: HostRoot, path: str, present: frozenset[str]) -> float | None:
    """The limit (°C) in ``path`` when its chip's listing ``present`` holds it (not opened when not)."""
    return parse_temp_limit(root.read_attr(path)) if path.rsplit("/", 1)[-1] in present else None
