"""The default rules' messages about links and storage name the device, give the figures and say what to
check, as the rail messages do (the figures are the fields of the record the rule matched: see
`rigmon.alarms.record_fields`)."""

from __future__ import annotations

from pathlib import Path

from rigmon.alarms.engine import AlarmEngine
from rigmon.schema import Alarm
from tests.alarms.helpers import T0, FakeClock, default, sim_frames


def firing(scenario: str, steps: int, rule: str, workdir: Path) -> Alarm:
    clock = FakeClock(T0)
    engine = AlarmEngine(default(rule), "n1", clock)
    for frame in sim_frames(scenario, 1, workdir, clock, steps, 1.0):
        for tr in engine.evaluate(frame):
            if tr.change == "firing":
                return tr.alarm
    raise AssertionError(f"{rule} did not fire in {scenario}")


def test_a_degraded_thunderbolt_link_names_its_device_and_speeds(tmp_path: Path) -> None:
    alarm = firing("tb-retrain-10g", 40, "thunderbolt_degraded", tmp_path)
    # Before: "Thunderbolt/USB4 link 0-1 runs below its expected speed: re-plug both ends".
    assert alarm.message == ("Thunderbolt/USB4 link 0-1 at 20 Gb/s below expected 40 Gb/s: "
                             "re-plug both ends, try another cable or port")


def test_an_rdma_port_below_its_rate_gives_the_rate_now_and_expected(tmp_path: Path) -> None:
    alarm = firing("rdma-port-flap", 60, "rdma_port_below_rate", tmp_path)
    assert alarm.message == ("RDMA port mlx5_0/1 at 25 Gb/s, below the 100 Gb/s expected: re-seat the cable, "
                             "check the switch port's speed and the transceiver")


def test_a_failed_md_member_names_its_array(tmp_path: Path) -> None:
    alarm = firing("md-degraded", 30, "md_member_failed", tmp_path)
    # Before: "md member nvme1n1 is faulty: the array that holds it has lost it".
    assert alarm.message == ("md127 member nvme1n1 is faulty: check the drive, its enclosure, "
                             "cable and power, then re-add it or add a replacement (mdadm --detail /dev/md127)")


def test_a_degraded_md_array_counts_its_members_and_says_what_to_check(tmp_path: Path) -> None:
    alarm = firing("md-degraded", 30, "md_array_degraded", tmp_path)
    assert alarm.message == ("array md127 is degraded, 1 of 2 members working (raid1): "
                             "mdadm --detail /dev/md127 names the member to replace or re-add")


def test_an_array_lagging_the_other_says_how_far_and_where_to_look(tmp_path: Path) -> None:
    # Before: no node rule; only Prometheus' RigmonMdArrayLagging said an array lagged (incident 6).
    alarm = firing("tb-retrain-10g", 90, "md_array_lagging", tmp_path)
    assert alarm.subject == "md:md127"
    assert alarm.message.startswith("array md127 reads at ") and "% of the fastest array loaded beside it" in alarm.message
    value = float(alarm.message.split("reads at ")[1].split(" %")[0])
    assert 50 <= value < 80
