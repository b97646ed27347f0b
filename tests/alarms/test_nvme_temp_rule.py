"""The default rule nvme_temp_over_warning on the simulated thermally throttling enclosure (incident 6):
it fires for the drives past their warning threshold only, and its message names the drive, its figures
and its array."""

from __future__ import annotations

import re
from pathlib import Path

from rigmon.alarms.engine import AlarmEngine
from tests.alarms.helpers import T0, FakeClock, default, sim_frames


def test_a_drive_past_its_warning_threshold_names_its_figures_and_array(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    engine = AlarmEngine(default("nvme_temp_over_warning"), "n1", clock)
    fired = {}
    for frame in sim_frames("nvme-thermal-throttle", 1, tmp_path, clock, 100, 1.0):
        for tr in engine.evaluate(frame):
            if tr.change == "firing":
                fired[tr.alarm.subject] = tr.alarm
    assert sorted(fired) == ["nvme:nvme0", "nvme:nvme1"]  # enclosure A's drives; md126's stay cool
    message = fired["nvme:nvme0"].message
    assert re.fullmatch(r"NVMe nvme0 at 8[12]\.\d+ °C, at or over its warning limit 81\.85 °C \(critical 84\.85 °C\), "
                        r"in md127: it throttles its reads, and an array on it lags; check the enclosure's fan and "
                        r"airflow", message), message
