"""/metrics: each host temperature's limits are series beside it, with HELP saying what they are, and
whether it is at or over its critical limit (what the shipped alert RigmonHostTempCritical watches)."""

from __future__ import annotations

import msgspec
from prometheus_client import generate_latest

from rigmon.agent.metrics import FrameCollector, make_registry
from rigmon.schema import TemperatureReading
from tests.agent.test_metrics_names import help_of
from tests.test_schema import sample_frame


def exposition(*temps: TemperatureReading) -> str:
    frame = sample_frame()
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, temperatures=temps))
    collector = FrameCollector(lambda: frame)
    collector.observe(frame)
    return generate_latest(make_registry(collector)).decode()


def series(text: str, name: str) -> dict[str, float]:
    """The samples of ``name`` by their ``sensor`` label."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('sensor="', 1)[1].split('"', 1)[0]] = float(value)
    return out


def test_limits_and_over_crit_are_series_of_each_sensor_that_has_them() -> None:
    text = exposition(
        TemperatureReading(sensor="hwmon0/temp1", label="coretemp Package id 0", temp_c=100.0, max_c=80.0,
                           crit_c=100.0, over_crit=True),
        TemperatureReading(sensor="thermal_zone1", label="acpitz", temp_c=45.0, max_c=None, crit_c=105.0,
                           over_crit=False),
        TemperatureReading(sensor="thermal_zone0", label="x86_pkg_temp", temp_c=52.0),
    )
    assert series(text, "rigmon_temperature_temp_celsius") == {"hwmon0/temp1": 100.0, "thermal_zone1": 45.0,
                                                               "thermal_zone0": 52.0}
    assert series(text, "rigmon_temperature_max_celsius") == {"hwmon0/temp1": 80.0}
    assert series(text, "rigmon_temperature_crit_celsius") == {"hwmon0/temp1": 100.0, "thermal_zone1": 105.0}
    assert series(text, "rigmon_temperature_over_crit") == {"hwmon0/temp1": 1.0, "thermal_zone1": 0.0}
    assert 'label="coretemp Package id 0"' in text
    assert "critical trip point" in help_of(text, "rigmon_temperature_crit_celsius")
    assert "tempN_max" in help_of(text, "rigmon_temperature_max_celsius")
    assert "at or over its critical limit" in help_of(text, "rigmon_temperature_over_crit")
