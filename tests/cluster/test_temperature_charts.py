"""The history view's temperature charts: host sensors by chip and NVMe drives, against their limits, the view
opening on the temperature of the node's worst problem, and a long window drawing each bucket's maximum."""

from __future__ import annotations

from rigmon.cluster.chart import Window, charts_for, frame_values, history_from_frames, opening_chart, plot_data
from rigmon.cluster.incident import problems
from rigmon.cluster.temperature_charts import MAX_TEMPERATURE_LINES, subject_series, temperature_charts
from tests.tui.snapshot_apps.record_frames import load_frames

PACKAGE = "coretemp-isa-0000/Package id 0"


def test_a_cpu_package_at_tjmax_has_a_chart_against_its_limits() -> None:
    charts = {c.key: c for c in charts_for(frame_values(load_frames("cpu-cooler-failed")[-1]))}
    package = charts["temp:coretemp-isa-0000"]
    # Labelled by the sensor's boot-stable name, each point's highest, against coretemp's max and TjMax.
    assert [(line.label, line.series, line.stat) for line in package.lines] == [
        (PACKAGE, f"temperatures[{PACKAGE}].temp_c", "max")]
    assert [(t.value, t.level) for t in package.thresholds] == [(80.0, "warn"), (100.0, "bad")]
    assert package.unit == "°C"
    assert "high 80, critical 100" in package.title
    # The thermal zone has no limit of its own: a chart without threshold lines.
    assert [line.label for line in charts["temp:thermal zones"].lines] == ["x86_pkg_temp"]
    assert charts["temp:thermal zones"].thresholds == ()


def test_hot_nvme_drives_are_charted_against_wctemp_and_cctemp() -> None:
    charts = {c.key: c for c in charts_for(frame_values(load_frames("nvme-partitioned-thermal-throttle")[-1]))}
    drives = charts["nvme_temp"]
    assert [line.series for line in drives.lines] == [f"nvme[nvme{i}].temp_c" for i in range(4)]
    assert all(line.stat == "max" for line in drives.lines)
    assert [(t.value, t.level) for t in drives.thresholds] == [(81.85, "warn"), (84.85, "bad")]


def test_the_view_opens_on_the_temperature_of_the_worst_problem() -> None:
    for fixture, key in (("cpu-cooler-failed", "temp:coretemp-isa-0000"),
                         ("nvme-partitioned-thermal-throttle", "nvme_temp")):
        frame = load_frames(fixture)[-1]
        subject = problems(frame, None)[0].subject
        charts = charts_for(frame_values(frame), subject)
        assert charts[opening_chart(charts, subject)].key == key
    # Another problem (a link at 10 Gb/s, a lost GPU) or none: the first chart, as before.
    frame = load_frames("enclosure-link-10g-array-lagging")[-1]
    charts = charts_for(frame_values(frame))
    assert problems(frame, None)[0].subject == "link:0-1"
    assert opening_chart(charts, "link:0-1") == opening_chart(charts, None) == 0
    assert opening_chart(charts, "gpu:3") == 0


def test_subject_series() -> None:
    assert subject_series(f"temp:{PACKAGE}") == f"temperatures[{PACKAGE}].temp_c"
    assert subject_series("nvme:nvme1") == "nvme[nvme1].temp_c"
    assert subject_series("psu") is None


def test_a_chip_of_many_sensors_keeps_the_subject_first_and_the_hottest() -> None:
    values = {f"temperatures[coretemp-isa-0000/Core {i}].temp_c": 40.0 + i for i in range(12)}
    values |= {f"temperatures[coretemp-isa-0000/Core {i}].crit_c": 100.0 for i in range(12)}
    (chart,) = temperature_charts(values, "temp:coretemp-isa-0000/Core 0")
    assert len(chart.lines) == MAX_TEMPERATURE_LINES
    assert [line.label for line in chart.lines] == ["coretemp-isa-0000/Core 0"] + [
        f"coretemp-isa-0000/Core {i}" for i in range(8, 12)]
    assert [t.value for t in chart.thresholds] == [100.0]


def test_a_long_window_draws_the_hottest_of_each_bucket() -> None:
    frames = load_frames("cpu-cooler-failed")
    (package,) = [c for c in charts_for(frame_values(frames[-1])) if c.key == "temp:coretemp-isa-0000"]
    end = frames[-1].taken_at
    # A day's window: buckets of the frames (a minute's at least), each drawn at its highest.
    window = Window(end, 86400.0)
    history = history_from_frames(frames, "node01", window.from_at, end, package.series)
    assert history.tier != "frames"
    plotted = plot_data(package, history, window)
    series = history.series[f"temperatures[{PACKAGE}].temp_c"]
    # The bucket the cooler stopped in: its mean far below the 100 °C the package reached in it.
    assert series.mean[0] < series.max[0] == 100.0
    assert plotted.lines[0].ys == series.max
    assert plotted.highest == 100.0
