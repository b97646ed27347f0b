"""The default rule host_temp_critical: a host temperature (hwmon sensor or thermal zone) at or over its
critical limit raises a critical alarm naming the sensor and its figures; a sensor at its high limit only,
and an NVMe at its warning temperature (which nvme_temp_over_warning reports), raise no second alarm."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rules import default_rules
from rigmon.schema import Alarm
from tests.alarms.helpers import T0, FakeClock, Step, default, run, sim_frames


def fired(scenario: str, steps: int, workdir: Path) -> list[Alarm]:
    """Every alarm the default rules fire on a simulated node over ``steps`` seconds."""
    clock = FakeClock(T0)
    engine = AlarmEngine(default_rules(), "n1", clock)
    return [tr.alarm for frame in sim_frames(scenario, 1, workdir, clock, steps, 1.0)
            for tr in engine.evaluate(frame) if tr.change == "firing"]


def test_a_cpu_package_at_tjmax_raises_one_critical_alarm_with_its_figures(tmp_path: Path) -> None:
    # The cooler stops at 20 s; the package reaches TjMax (coretemp's temp1_crit) and throttles there.
    alarms = fired("cpu-cooler-failed", 60, tmp_path)
    # Named as lm-sensors names the chip (coretemp's platform device coretemp.0) and its input's label,
    # the same every boot; the file it is read from this boot is the record's input_path, not in the message.
    assert [(a.rule, a.severity, a.subject) for a in alarms] == [
        ("host_temp_critical", "critical", "temp:coretemp-isa-0000/Package id 0")]
    assert alarms[0].message == (
        "coretemp Package id 0 at 100 °C, at or over its critical limit 100 °C: "
        "the hardware throttles hard or "
        "shuts the node down here; check its cooler (fan, pump, heatsink seating), the airflow through the case "
        "and the room's temperature")
    # x86_pkg_temp passed its passive trip (90 °C): a cooling policy, not a limit, so no alarm of its own.


def test_an_nvme_at_its_warning_temperature_raises_one_alarm_not_two(tmp_path: Path) -> None:
    # Its hwmon chip is among the host temperatures too ("nvme Composite", max_c WCTEMP, crit_c CCTEMP).
    alarms = fired("nvme-thermal-throttle", 120, tmp_path)
    per_drive = Counter(a.subject for a in alarms if a.rule != "md_array_lagging")
    assert per_drive == {"nvme:nvme0": 1, "nvme:nvme1": 1}
    assert {a.rule for a in alarms} == {"nvme_temp_over_warning", "md_array_lagging"}


def _temp(sensor: str, label: str, temp_c: float, max_c: float | None, crit_c: float | None,
          input_path: str) -> dict[str, Any]:
    return {"sensor": sensor, "label": label, "temp_c": temp_c, "max_c": max_c, "crit_c": crit_c,
            "over_crit": None if crit_c is None else temp_c >= crit_c, "input_path": input_path}


def test_held_five_seconds_and_only_at_the_critical_limit() -> None:
    def frame(zone_c: float) -> dict[str, Any]:
        return {"temperatures": [
            _temp("acpitz", "acpitz", zone_c, 100.0, 105.0, "/sys/class/thermal/thermal_zone1/temp"),
            _temp("coretemp-isa-0000/Package id 0", "coretemp Package id 0", 85.0, 80.0, 100.0,  # over max only
                  "/sys/class/hwmon/hwmon1/temp1_input"),
            _temp("nct6779-isa-0290/SYSTIN", "nct6779 SYSTIN", 120.0, None, None,  # no limit: nothing said
                  "/sys/class/hwmon/hwmon2/temp1_input"),
        ]}
    rule = default("host_temp_critical")
    _, seen = run(rule, [Step(0, frame(104.0)), Step(1, frame(106.0)), Step(5, frame(106.0)),
                         Step(6, frame(105.0)), Step(7, frame(90.0))])
    assert seen == [(1, "pending", "temp:acpitz"), (6, "firing", "temp:acpitz")]


def test_the_message_names_a_zone_and_its_critical_trip() -> None:
    clock = FakeClock(T0)
    engine = AlarmEngine(default("host_temp_critical"), "n1", clock)
    data = {"temperatures": [_temp("x86_pkg_temp", "x86_pkg_temp", 101.0, None, 100.0,
                                   "/sys/class/thermal/thermal_zone0/temp")]}
    messages = [tr.alarm.message for t in (0, 5) for tr in engine.evaluate_data(data, [], T0 + t)
                if tr.change == "firing"]
    assert [m.split(":")[0] for m in messages] == [
        "x86_pkg_temp at 101 °C, at or over its critical limit 100 °C"]
