"""hwmon power collector: Super I/O / BMC voltage inputs and PMBus PSUs, without a serial ADC."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rigmon.collectors.base import CollectorContext, EventDraft, NoData, PolledCollector
from rigmon.config import PsuHwmonSection
from rigmon.hw.root import HostRoot
from rigmon.schema import HwmonVoltageReading, PmbusPsuReading

HWMON = "/sys/class/hwmon"
#: hwmon units: in* millivolts, curr* milliamperes, power* microwatts, temp* millidegrees.
MILLI = 1000.0
MICRO = 1_000_000.0
#: Drivers that expose a PMBus power supply (the generic one and PSU-specific ones).
PMBUS_DRIVERS = frozenset({"pmbus", "ibm-cffps", "inspur-ipsps1", "dps920ab", "fsp-3y", "bel-pfe",
                           "delta-ahe50dc-fan", "q54sj108a2", "pim4328", "lm25066", "mp2975"})
#: Below this total output current the share between PSUs is noise.
MIN_SHARE_AMPS = 5.0


@dataclass(frozen=True, slots=True)
class HwmonChannel:
    """One ``<kind><n>_input`` of an hwmon chip with its label and limits (raw units)."""

    name: str
    label: str | None
    value: int
    min_value: int | None
    max_value: int | None
    alarm: bool | None


def parse_hwmon_int(text: str | None) -> int | None:
    """An hwmon attribute as an integer; ``None`` when absent or not a number."""
    # 12096
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


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

    Args:
        root: the machine's files.
        config: ``[psu.hwmon]``: per-input scale factors, imbalance threshold.
    """

    name = "psu_hwmon"

    def __init__(self, root: HostRoot, config: PsuHwmonSection) -> None:
        self.root = root
        self.config = config
        self._imbalanced: set[str] = set()

    def _channel(self, base: str, name: str) -> HwmonChannel | None:
        value = parse_hwmon_int(self.root.read_attr(f"{base}/{name}_input"))
        if value is None:
            return None
        alarm = parse_hwmon_int(self.root.read_attr(f"{base}/{name}_alarm"))
        return HwmonChannel(
            name=name,
            label=self.root.read_attr(f"{base}/{name}_label") or None,
            value=value,
            min_value=parse_hwmon_int(self.root.read_attr(f"{base}/{name}_min")),
            max_value=parse_hwmon_int(self.root.read_attr(f"{base}/{name}_max")),
            alarm=None if alarm is None else alarm != 0,
        )

    def collect(self) -> Sequence[object]:
        if not self.config.enabled:
            raise NoData("[psu.hwmon] disabled")
        volts: list[HwmonVoltageReading] = []
        psus: list[tuple[str, str, dict[str, HwmonChannel], list[str], float | None, float | None]] = []
        for hwmon in self.root.listdir(HWMON):
            base = f"{HWMON}/{hwmon}"
            chip = self.root.read_attr(f"{base}/name") or hwmon
            entries = self.root.listdir(base)
            channels = {
                name: ch
                for kind in ("in", "curr", "power")
                for name in parse_channel_names(entries, kind)
                if (ch := self._channel(base, name)) is not None
            }
            if chip in PMBUS_DRIVERS:
                alarms = sorted(
                    e[: -len("_alarm")] for e in entries
                    if e.endswith("_alarm") and parse_hwmon_int(self.root.read_attr(f"{base}/{e}"))
                )
                temp = parse_hwmon_int(self.root.read_attr(f"{base}/temp1_input"))
                fan = parse_hwmon_int(self.root.read_attr(f"{base}/fan1_input"))
                psus.append((hwmon, chip, channels, alarms,
                             None if temp is None else temp / MILLI, None if fan is None else float(fan)))
                continue
            for ch in channels.values():
                if not ch.name.startswith("in"):
                    continue
                scale = self.config.scale.get(f"{chip}/{ch.name}", 1.0)
                volts.append(HwmonVoltageReading(
                    sensor=f"{hwmon}/{ch.name}", chip=chip, label=ch.label or ch.name,
                    volts=round(ch.value / MILLI * scale, 4),
                    min_volts=None if ch.min_value is None else round(ch.min_value / MILLI * scale, 4),
                    max_volts=None if ch.max_value is None else round(ch.max_value / MILLI * scale, 4),
                    alarm=ch.alarm, scale=scale,
                ))
        if not volts and not psus:
            raise NoData("no hwmon voltage inputs or PMBus supplies")
        records: list[object] = [*volts, *self._psus(psus)]
        return records

    def _psus(
        self, psus: list[tuple[str, str, dict[str, HwmonChannel], list[str], float | None, float | None]]
    ) -> list[object]:
        def by_label(channels: dict[str, HwmonChannel], prefix: str, unit: float) -> float | None:
            # PMBus drivers label their inputs: vin, vout1, iin, iout1, pin, pout1.
            for ch in channels.values():
                if (ch.label or "").startswith(prefix):
                    return round(ch.value / unit, 4)
            return None

        iouts = [by_label(channels, "iout", MILLI) for _, _, channels, _, _, _ in psus]
        shares = current_shares(iouts, self.config.share_imbalance_pct)
        out: list[object] = []
        for (hwmon, chip, channels, alarms, temp_c, fan_rpm), iout, (share, deviation, imbalanced) in zip(
            psus, iouts, shares
        ):
            out.append(PmbusPsuReading(
                sensor=hwmon, chip=chip,
                vin_volts=by_label(channels, "vin", MILLI), vout_volts=by_label(channels, "vout", MILLI),
                iin_amps=by_label(channels, "iin", MILLI), iout_amps=iout,
                pin_w=by_label(channels, "pin", MICRO), pout_w=by_label(channels, "pout", MICRO),
                temp_c=temp_c, fan_rpm=fan_rpm, alarms=tuple(alarms),
                share_pct=share, share_deviation_pct=deviation, imbalanced=imbalanced,
            ))
            if imbalanced and hwmon not in self._imbalanced:
                self._imbalanced.add(hwmon)
                out.append(EventDraft(
                    kind="psu_current_imbalance", severity="warning", subject=f"psu:{hwmon}",
                    message=f"PSU {hwmon} carries {share}% of the current ({deviation:+} points from an equal "
                            "share): check its connections",
                    data={"share_pct": share, "deviation_pct": deviation},
                ))
            elif not imbalanced and hwmon in self._imbalanced:
                self._imbalanced.discard(hwmon)
                out.append(EventDraft(kind="psu_current_balanced", severity="info", subject=f"psu:{hwmon}",
                                      message=f"PSU {hwmon} shares the current evenly again"))
        return out


def make_hwmon_power_collector(ctx: CollectorContext) -> HwmonPowerCollector:
    """Registry factory."""
    return HwmonPowerCollector(ctx.root, ctx.config.psu.hwmon)
