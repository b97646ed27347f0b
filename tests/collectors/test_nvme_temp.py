"""An NVMe drive at its warning temperature: the limits, the drive's alarm bit, the md array it is in, the events."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft
from rigmon.collectors.device_facts import REFRESH_EVERY
from rigmon.collectors.nvme import NvmeCollector
from rigmon.collectors.nvme_temp import judge_over_max, parse_alarm, temp_reason
from rigmon.hw.root import HostRoot
from rigmon.sim import write_tree
from tests.collectors.test_device_facts import nvme_files, nvme_readings

HWMON = "/sys/class/nvme/nvme0/hwmon2"


@pytest.mark.parametrize(("text", "flag"), [("0", False), ("1", True), (" 1", True), ("", None), ("2", None),
                                            ("garbled", None), (None, None)])
def test_parse_alarm(text: str | None, flag: bool | None) -> None:
    assert parse_alarm(text) is flag


@pytest.mark.parametrize(("temp", "limit", "alarm", "over"), [
    (81.84, 81.85, False, False),
    (81.85, 81.85, False, True),   # "at" the threshold is where the controller throttles
    (82.85, 81.85, None, True),    # a kernel without temp1_alarm
    (70.0, 81.85, True, True),     # the drive's own bit (its over-temperature threshold set lower)
    (None, 81.85, True, True),     # the temperature unreadable, the bit read
    (82.85, None, None, None),     # no threshold (temp1_max unsupported): cannot be told
    (82.85, None, False, False),
    (None, None, None, None),
])
def test_judge_over_max(temp: float | None, limit: float | None, alarm: bool | None, over: bool | None) -> None:
    assert judge_over_max(temp, limit, alarm) is over


def _hot(tmp_path: Path, temp: str, alarm: str) -> None:
    write_tree(tmp_path, {f"{HWMON}/temp1_input": temp, f"{HWMON}/temp1_alarm": alarm})


def _temp_events(records: object) -> list[tuple[str, str]]:
    return [(r.kind, r.message) for r in records if isinstance(r, EventDraft) and "temp" in r.kind]  # type: ignore[attr-defined]


def test_a_drive_passing_its_warning_threshold_names_its_array_and_figures(tmp_path: Path) -> None:
    files = {**nvme_files("nvme0", "Samsung SSD 990 PRO 2TB"), f"{HWMON}/temp1_max": "81850\n",
             f"{HWMON}/temp1_alarm": "0\n", "/sys/class/nvme/nvme0/nvme0n1/size": "100\n",
             "/sys/block/nvme0n1/holders/md127/size": "200\n"}
    write_tree(tmp_path, files)
    collector = NvmeCollector(HostRoot(tmp_path))
    first = collector.collect()
    drive = nvme_readings(first)["nvme0"]
    assert (drive.temp_c, drive.temp_max_c, drive.temp_crit_c) == (38.85, 81.85, 84.85)
    assert (drive.temp_alarm, drive.temp_over_max, drive.md_arrays) == (False, False, ("md127",))
    assert _temp_events(first) == []
    _hot(tmp_path, "82850\n", "1\n")
    hot = collector.collect()
    assert nvme_readings(hot)["nvme0"].temp_over_max is True
    assert _temp_events(hot) == [(
        "nvme_temp_over_max",
        "NVMe nvme0 (Samsung SSD 990 PRO 2TB) at 82.85 °C, at or over its warning limit 81.85 °C "
        "(critical 84.85 °C), in md127: it throttles its reads; check the enclosure's fan and airflow")]
    assert nvme_readings(hot)["nvme0"].temp_warning_reason == (
        "82.85 °C, at or over its warning limit 81.85 °C (critical 84.85 °C), in md127")
    assert _temp_events(collector.collect()) == []  # still hot: no second event
    # A read that cannot tell (SMART log unreadable during a reset) is no cooling down.
    _hot(tmp_path, "\n", "\n")
    assert nvme_readings(unreadable := collector.collect())["nvme0"].temp_over_max is None
    assert _temp_events(unreadable) == []
    _hot(tmp_path, "82850\n", "1\n")
    assert _temp_events(collector.collect()) == []
    _hot(tmp_path, "76850\n", "0\n")
    assert _temp_events(collector.collect()) == [
        ("nvme_temp_normal", "NVMe nvme0 (Samsung SSD 990 PRO 2TB) in md127 back below its warning limit: "
                             "76.85 °C of 81.85 °C")]


def test_a_drive_hot_when_first_seen_says_so_and_one_in_no_array_names_none(tmp_path: Path) -> None:
    files = {**nvme_files("nvme0", "WD_BLACK SN850X 4000GB"), f"{HWMON}/temp1_max": "81850\n",
             f"{HWMON}/temp1_input": "83850\n", "/sys/class/nvme/nvme0/nvme0n1/size": "100\n"}
    write_tree(tmp_path, files)
    records = NvmeCollector(HostRoot(tmp_path)).collect()
    assert nvme_readings(records)["nvme0"].md_arrays == ()
    assert [kind for kind, _ in _temp_events(records)] == ["nvme_temp_over_max"]
    assert _temp_events(records)[0][1].startswith(
        "NVMe nvme0 (WD_BLACK SN850X 4000GB) at 83.85 °C, at or over its warning limit 81.85 °C (critical 84.85 °C): ")


def test_the_reason_in_words() -> None:
    assert temp_reason(82.05, 81.85, 84.85, ("md126", "md127")) == (
        "82.05 °C, at or over its warning limit 81.85 °C (critical 84.85 °C), in md126, md127")
    # No temp1_max (the threshold feature unsupported): the drive's own bit said so.
    assert temp_reason(None, None, None, ()) == "? °C, its temperature warning bit set"


def test_an_array_linked_later_without_a_proc_mdstat_is_seen_when_the_facts_are_read_again(tmp_path: Path) -> None:
    files = {**nvme_files("nvme0", "Samsung SSD 990 PRO 2TB"), "/sys/class/nvme/nvme0/nvme0n1/size": "100\n"}
    write_tree(tmp_path, files)
    collector = NvmeCollector(HostRoot(tmp_path))
    assert nvme_readings(collector.collect())["nvme0"].md_arrays == ()
    write_tree(tmp_path, {"/sys/block/nvme0n1/holders/md126/size": "200\n"})
    # md sends the controller no event, and no /proc/mdstat (a tree copied without it) says the
    # arrays changed: the periodic re-read finds it (with /proc/mdstat, the next read: test_nvme_md).
    assert [nvme_readings(collector.collect())["nvme0"].md_arrays for _ in range(REFRESH_EVERY)][-1] == ("md126",)
