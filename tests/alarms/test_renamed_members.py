"""An md member renamed across a reboot (NVMe enumeration order: nvme2n1 -> nvme4n1) is one alarm:
``md_member_failed`` keys its alarms on the array's UUID and the member's device number in the
superblock (``nvme2n1[1]`` in /proc/mdstat, the raid collector's ``device``), while the subject shows the
member's kernel name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rigmon.agent.check import readings_from
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.memory import CarriedAlarm, EngineMemory
from rigmon.collectors.raid import RaidCollector
from rigmon.hw.root import HostRoot
from rigmon.schema import SCHEMA_VERSION, Alarm, CollectorStatus, Frame
from rigmon.sim import write_tree
from tests.alarms.helpers import T0, FakeClock, changes, default, restarted, sim_frames

UUID = "3b1f2c4e-0a1b-2c3d-4e5f-60718293a4b5"


def array(uuid: str | None, *members: tuple[str, int | None, str]) -> dict[str, Any]:
    """A ``raid`` reading of one RAID1 array with members (kernel name, device number, role)."""
    return {"raid": [{"name": "md127", "uuid": uuid, "health": "degraded", "level": "raid1",
                      "members": [{"name": name, "slot": None, "device": device, "role": role}
                                  for name, device, role in members]}]}


def engine(prefix: str) -> AlarmEngine:
    return AlarmEngine(default("md_member_failed"), "n1", FakeClock(T0), id_prefix=prefix)


def restart(old: AlarmEngine, now: float) -> AlarmEngine:
    return restarted(old, engine("run2"), now)


def test_a_member_renamed_over_a_reboot_goes_on_as_the_same_acknowledged_alarm() -> None:
    first = engine("run1")
    assert changes(first, array(UUID, ("nvme1n1", 0, "in_sync"), ("nvme2n1", 1, "faulty")), 0) == [
        ("firing", "run1-a1", "disk:nvme2n1", False)]
    first.acknowledge("run1-a1", "alice")
    # The reboot enumerated the drives in another order: the failed member is nvme4n1 now.
    second = restart(first, T0 + 300)
    seen = changes(second, array(UUID, ("nvme1n1", 0, "in_sync"), ("nvme4n1", 1, "faulty")), 300)
    assert seen == [("firing", "run1-a1", "disk:nvme4n1", True)]
    (alarm,) = second.book.active()
    assert (alarm.id, alarm.acknowledged_by, alarm.labels["name"]) == ("run1-a1", "alice", "nvme4n1")
    assert alarm.message.startswith("md127 member nvme4n1 is faulty: ")
    assert changes(second, array(UUID, ("nvme1n1", 0, "in_sync"), ("nvme4n1", 1, "faulty")), 400) == []
    assert changes(second, array(UUID, ("nvme1n1", 0, "in_sync"), ("nvme4n1", 1, "in_sync")), 500) == [
        ("resolved", "run1-a1", "disk:nvme4n1", False)]


def test_a_member_renamed_while_the_agent_runs_is_one_alarm_and_another_member_another() -> None:
    e = engine("run1")
    assert changes(e, array(UUID, ("nvme2n1", 1, "missing")), 0) == [("firing", "run1-a1", "disk:nvme2n1", False)]
    assert changes(e, array(UUID, ("nvme4n1", 1, "missing")), 10) == []
    assert [a.subject for a in e.book.active()] == ["disk:nvme4n1"]
    # A drive that takes the failed one's kernel name is not the failed member.
    assert changes(e, array(UUID, ("nvme4n1", 1, "missing"), ("nvme2n1", 0, "faulty")), 20) == [
        ("firing", "run1-a2", "disk:nvme2n1", False)]


def test_without_a_uuid_or_a_device_number_a_member_is_its_kernel_name_as_before() -> None:
    for uuid, device in ((None, 1), (UUID, None)):
        first = engine("run1")
        assert changes(first, array(uuid, ("nvme2n1", device, "faulty")), 0) == [
            ("firing", "run1-a1", "disk:nvme2n1", False)]
        second = restart(first, T0 + 300)
        assert changes(second, array(uuid, ("nvme2n1", device, "faulty")), 300) == [
            ("firing", "run1-a1", "disk:nvme2n1", True)]


def test_alarm_state_saved_before_the_upgrade_is_taken_over() -> None:
    """A state file of the previous version: the alarm's labels have no device number, its key was its subject."""
    saved = Alarm(id="old-a3", rule="md_member_failed", rule_kind="state", severity="critical", node="n1",
                  subject="disk:nvme2n1", state="firing",
                  message="md member nvme2n1 is missing: the array that holds it has lost it", value="missing",
                  started_at=T0 - 900, updated_at=T0 - 60, fired_at=T0 - 900, acknowledged_at=T0 - 800,
                  acknowledged_by="bob", labels={"uuid": UUID, "name": "nvme2n1"}, value_now="missing",
                  worst_at=T0 - 900)
    new = engine("run2")
    assert new.restore_memory(EngineMemory(alarms=(CarriedAlarm(saved),)), T0).alarms == 1
    assert changes(new, array(UUID, ("nvme1n1", 0, "in_sync"), ("nvme2n1", 1, "missing")), 0) == [
        ("firing", "old-a3", "disk:nvme2n1", True)]
    (alarm,) = new.book.active()
    assert (alarm.acknowledged_by, alarm.labels.get("device")) == ("bob", "1")
    # From now on it is kept by its identity: renamed over the next reboot, it goes on.
    third = restart(new, T0 + 600)
    assert changes(third, array(UUID, ("nvme1n1", 0, "in_sync"), ("nvme4n1", 1, "missing")), 600) == [
        ("firing", "old-a3", "disk:nvme4n1", True)]


def test_an_old_alarm_taken_over_by_a_clear_member_resolves_after_its_clear_hold() -> None:
    saved = Alarm(id="old-a4", rule="md_member_failed", rule_kind="state", severity="critical", node="n1",
                  subject="disk:nvme2n1", state="firing", message="md member nvme2n1 is faulty", value="faulty",
                  started_at=T0 - 900, updated_at=T0 - 60, fired_at=T0 - 900, labels={"uuid": UUID, "name": "nvme2n1"},
                  value_now="faulty", worst_at=T0 - 900)
    new = engine("run2")
    new.restore_memory(EngineMemory(alarms=(CarriedAlarm(saved),)), T0)
    seen = changes(new, array(UUID, ("nvme2n1", 1, "in_sync")), 0)
    assert seen == [("resolved", "old-a4", "disk:nvme2n1", True)]
    assert new.book.recent()[0].message.endswith("(clear after the agent restarted)")


def test_the_raid_collector_gives_each_member_its_device_number(tmp_path: Path) -> None:
    """On the simulator's md tree the real collector reads mdstat's ``[n]``: the alarm carries it and is kept by it."""
    clock = FakeClock(T0)
    e = AlarmEngine(default("md_member_failed"), "n1", clock)
    fired = [t.alarm for frame in sim_frames("md-degraded", 1, tmp_path, clock, 20, 1.0)
             for t in e.evaluate(frame) if t.change == "firing"]
    assert fired and fired[0].subject.startswith("disk:nvme")
    labels = fired[0].labels
    assert labels["device"] == "1" and labels["uuid"]
    assert list(e.book._active) == [("md_member_failed", f"md:{labels['uuid']}:{labels['device']}")]


def md_tree(root: Path, failed: str) -> HostRoot:
    """A RAID1 md127 whose member 1 failed, as the kernel shows it, the failed drive named ``failed``."""
    base = "/sys/block/md127/md"
    files = {
        "/proc/mdstat": "Personalities : [raid1] \n"
                        f"md127 : active raid1 {failed}[1](F) nvme1n1[0]\n"
                        "      1953382400 blocks super 1.2 [2/1] [U_]\n      \nunused devices: <none>\n",
        f"{base}/uuid": f"{UUID}\n", f"{base}/level": "raid1\n", f"{base}/raid_disks": "2\n",
        f"{base}/array_state": "clean\n", f"{base}/degraded": "1\n", f"{base}/sync_action": "idle\n",
        f"{base}/dev-nvme1n1/slot": "0\n", f"{base}/dev-nvme1n1/state": "in_sync\n", f"{base}/dev-nvme1n1/block": "",
        # A faulty member leaves its slot: md prints none.
        f"{base}/dev-{failed}/slot": "none\n", f"{base}/dev-{failed}/state": "faulty\n", f"{base}/dev-{failed}/block": "",
        "/sys/block/nvme1n1/size": "0\n", f"/sys/block/{failed}/size": "0\n",
    }
    write_tree(root, files)
    return HostRoot(str(root))


def frame(root: HostRoot, at: float) -> Frame:
    records = list(RaidCollector(root, FakeClock(at)).collect())
    return Frame(schema=SCHEMA_VERSION, node="n1", run_id="r", seq=1, taken_at=at, agent_start=at,
                 collectors={"raid": CollectorStatus(state="ok", ok=True, duration_s=0.001, sampled_at=at)},
                 readings=readings_from(records))


def test_a_member_the_raid_collector_reads_under_a_new_name_after_a_reboot_is_one_alarm(tmp_path: Path) -> None:
    first = engine("run1")
    fired = [(t.change, t.alarm.subject) for t in first.evaluate(frame(md_tree(tmp_path / "boot1", "nvme2n1"), T0))]
    assert fired == [("firing", "disk:nvme2n1")]
    first.acknowledge("run1-a1", "alice")
    second = restart(first, T0 + 300)
    after = second.evaluate(frame(md_tree(tmp_path / "boot2", "nvme4n1"), T0 + 300))
    assert [(t.change, t.alarm.id, t.alarm.subject, t.restored) for t in after] == [
        ("firing", "run1-a1", "disk:nvme4n1", True)]
    assert after[0].alarm.acknowledged_by == "alice"
