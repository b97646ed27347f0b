"""REPORT.md charts temperatures: a thermal incident (a hot NVMe enclosure, a CPU at TjMax) shows its curve and limits."""

from __future__ import annotations

from rigmon.schema import History, HistorySeries
from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.report import render_report

AT = tuple(1000.0 + i for i in range(60))


def flat(v: float) -> HistorySeries:
    return HistorySeries(at=AT, min=(v,) * 60, mean=(v,) * 60, max=(v,) * 60)


def rising(start: float, top: float) -> HistorySeries:
    # Each 1 s point's maximum is a little above its mean: the chart must draw the maximum.
    mean = tuple(min(start + i, top) for i in range(60))
    return HistorySeries(at=AT, min=tuple(v - 1 for v in mean), mean=mean, max=tuple(v + 0.5 for v in mean))


def test_report_charts_a_hot_nvme_with_its_warning_and_critical_limits() -> None:
    # nvme-thermal-throttle: the report listed the alarm's events but no temperature at all (its
    # charts were rail, power and throughput), so the bug report had no curve of the drive heating up.
    history = History(schema=1, node="node01", from_at=1000.0, to_at=1059.0, tier="frames", step_s=1.0, series={
        "nvme[nvme0].temp_c": rising(40.0, 81.86),
        "nvme[nvme0].temp_max_c": flat(81.85),
        "nvme[nvme0].temp_crit_c": flat(84.85),
        "nvme[nvme2].temp_c": flat(39.6),
        "nvme[nvme2].temp_max_c": flat(81.85),
        "temperatures[hwmon0/temp1].temp_c": rising(60.0, 100.0),
        "temperatures[hwmon0/temp1].max_c": flat(80.0),
        "temperatures[hwmon0/temp1].crit_c": flat(100.0),
        "temperatures[thermal_zone0].temp_c": flat(45.0),
        "raid[md127].read_bytes_per_s": flat(7.8e8),
    })
    report = render_report([NodePart(node="node01", source="x", history=history)], 60.0, 1060.0)
    assert "### Temperature (maximum per point)" in report
    chart = report.split("### Temperature (maximum per point)")[1].split("```")[1]
    assert "°C" in chart and "\x1b[" not in chart
    assert ("- nvme[nvme0].temp_c: highest 82.36 °C at 1970-01-01 00:17:22 UTC "
            "(its limits: high 81.85 °C, critical 84.85 °C)") in report
    assert ("- temperatures[hwmon0/temp1].temp_c: highest 100.5 °C at 1970-01-01 00:17:20 UTC "
            "(its limits: high 80 °C, critical 100 °C)") in report
    assert "- nvme[nvme2].temp_c: highest 39.6 °C at 1970-01-01 00:16:40 UTC (its limits: high 81.85 °C)" in report
    assert "- temperatures[thermal_zone0].temp_c: highest 45 °C at 1970-01-01 00:16:40 UTC" in report
    # The limits are in the legend, not lines of their own among the readings.
    assert "temp_max_c:" not in report and "crit_c:" not in report


def test_report_charts_no_temperature_when_the_node_has_none() -> None:
    history = History(schema=1, node="node01", from_at=1000.0, to_at=1059.0, tier="frames", step_s=1.0, series={
        "raid[md127].read_bytes_per_s": flat(7.8e8)})
    report = render_report([NodePart(node="node01", source="x", history=history)], 60.0, 1060.0)
    assert "Temperature" not in report and "### Throughput (mean per point)" in report
