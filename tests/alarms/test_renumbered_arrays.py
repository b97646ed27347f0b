"""An md array renumbered over a reboot (md127 -> md126, same array UUID) is one alarm: the md rules key
their alarms on the array's UUID (``identity = "md:{uuid}"``) while the subject shows its md name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.memory import CarriedAlarm, EngineMemory
from rigmon.schema import Alarm
from tests.alarms.helpers import T0, FakeClock, changes, default, restarted, rules, sim_frames

UUID_A = "3b1f2c4e-0a1b-2c3d-4e5f-60718293a4b5"
UUID_B = "9c8d7e6f-5a4b-3c2d-1e0f-a9b8c7d6e5f4"


def arrays(*items: tuple[str, str | None, str]) -> dict[str, Any]:
    """``raid`` readings of (kernel name, UUID or ``None`` on kernels without md/uuid, health)."""
    return {"raid": [{"name": name, "uuid": uuid, "health": health, "level": "raid1", "raid_disks": 2,
                      "working_disks": 2 if health == "ok" else 1, "members": []} for name, uuid, health in items]}


def engine(prefix: str) -> AlarmEngine:
    return AlarmEngine(default("md_array_degraded", "md_array_broken"), "n1", FakeClock(T0), id_prefix=prefix)


def restart(old: AlarmEngine, now: float) -> AlarmEngine:
    return restarted(old, engine("run2"), now)


def test_an_array_renumbered_over_a_reboot_goes_on_as_the_same_acknowledged_alarm() -> None:
    first = engine("run1")
    assert changes(first, arrays(("md127", UUID_A, "degraded"), ("md126", UUID_B, "ok")), 0) == [
        ("firing", "run1-a1", "md:md127", False)]
    first.acknowledge("run1-a1", "alice")
    # After the reboot the other array was assembled first: the degraded one is md126 now.
    second = restart(first, T0 + 300)
    seen = changes(second, arrays(("md127", UUID_B, "ok"), ("md126", UUID_A, "degraded")), 300)
    assert seen == [("firing", "run1-a1", "md:md126", True)]  # not a second episode on md:md126
    (alarm,) = second.book.active()
    assert (alarm.id, alarm.subject, alarm.acknowledged_by) == ("run1-a1", "md:md126", "alice")
    assert alarm.message.startswith("array md126 is degraded, 1 of 2 members working (raid1): ")
    assert alarm.labels["name"] == "md126"
    # md:md127 is not "not reported since the agent restarted", and md127 (the healthy array) fires nothing.
    assert changes(second, arrays(("md127", UUID_B, "ok"), ("md126", UUID_A, "degraded")), 400) == []
    assert changes(second, arrays(("md127", UUID_B, "ok"), ("md126", UUID_A, "ok")), 500) == [
        ("resolved", "run1-a1", "md:md126", False)]


def test_an_array_renamed_while_the_agent_runs_is_one_alarm_and_a_new_uuid_another() -> None:
    e = engine("run1")
    assert changes(e, arrays(("md127", UUID_A, "degraded")), 0) == [("firing", "run1-a1", "md:md127", False)]
    # Stopped and assembled again under another number within absent_resolve_s.
    assert changes(e, arrays(("md125", UUID_A, "degraded")), 10) == []
    assert [a.subject for a in e.book.active()] == ["md:md125"]
    assert changes(e, arrays(("md125", UUID_A, "degraded"), ("md127", UUID_B, "broken")), 20) == [
        ("firing", "run1-a2", "md:md127", False)]


def test_without_a_uuid_an_array_is_its_md_name_as_before() -> None:
    """Kernels without md/uuid: the identity falls back to the subject, so nothing changes for them."""
    first = engine("run1")
    assert changes(first, arrays(("md127", None, "degraded")), 0) == [("firing", "run1-a1", "md:md127", False)]
    second = restart(first, T0 + 300)
    assert changes(second, arrays(("md127", None, "degraded")), 300) == [("firing", "run1-a1", "md:md127", True)]
    # Renumbered, it is another subject: as before this change, a second episode.
    third = restart(second, T0 + 600)
    assert changes(third, arrays(("md126", None, "degraded")), 600) == [("firing", "run2-a1", "md:md126", False)]


def test_alarm_state_saved_before_the_upgrade_is_taken_over() -> None:
    """A state file of the previous version: alarms carry their subject and identity labels, no identity key."""
    saved = Alarm(id="old-a7", rule="md_array_degraded", rule_kind="state", severity="warning", node="n1",
                  subject="md:md127", state="firing", message="array md127 is degraded", value="degraded",
                  started_at=T0 - 900, updated_at=T0 - 60, fired_at=T0 - 900, acknowledged_at=T0 - 800,
                  acknowledged_by="bob", labels={"uuid": UUID_A, "name": "md127"}, value_now="degraded",
                  worst_at=T0 - 900)
    new = engine("run2")
    summary = new.restore_memory(EngineMemory(alarms=(CarriedAlarm(saved),)), T0)
    assert summary.alarms == 1
    assert changes(new, arrays(("md127", UUID_A, "degraded")), 0) == [("firing", "old-a7", "md:md127", True)]
    assert new.book.active()[0].acknowledged_by == "bob"


def test_a_rule_s_identity_template_is_checked_like_its_subject() -> None:
    (rule,) = rules('[[rule]]\nname = "r"\nkind = "state"\nselect = "raid[*].health"\nequals = "broken"\n'
                    'identity = "md:{uuid}"\n')
    assert rule.identity == "md:{uuid}"
    try:
        rules('[[rule]]\nname = "r"\nkind = "state"\nselect = "raid[*].health"\nequals = "broken"\n'
              'identity = "md:{uuid"\n')
    except ValueError as exc:
        assert "rule 'r': identity: " in str(exc)
    else:
        raise AssertionError("a template that can never render was taken")


def test_the_raid_collector_s_arrays_are_kept_by_their_uuid(tmp_path: Path) -> None:
    """On the simulator's md tree the real collector reads md/uuid: the alarm carries it and is kept by it."""
    clock = FakeClock(T0)
    e = AlarmEngine(default("md_array_degraded"), "n1", clock)
    fired = [t.alarm for frame in sim_frames("md-degraded", 1, tmp_path, clock, 60, 1.0)
             for t in e.evaluate(frame) if t.change == "firing"]
    assert fired and fired[0].subject == "md:md127"
    uuid = fired[0].labels["uuid"]
    assert list(e.book._active) in ([], [("md_array_degraded", f"md:{uuid}")])
    assert e._identity("md_array_degraded", fired[0].labels) == f"md:{uuid}"
