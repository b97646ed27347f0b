"""The incident story of a thermally throttling enclosure (incident 6): the array that lags is said to
follow the drives that reached their warning temperature, not a link that slowed."""

from __future__ import annotations

from pathlib import Path

from rigmon.cluster.incident import timeline
from rigmon.collectors.nvme import NvmeCollector
from rigmon.hw.root import HostRoot
from rigmon.sim import write_tree
from rigmon.tui.event_merge import merge_xid_events
from tests.cluster.test_incident import store_of
from tests.collectors.test_device_facts import nvme_files, nvme_readings


def test_an_array_lagging_behind_hot_drives_names_them_not_a_link() -> None:
    store = store_of("nvme-enclosure-thermal-throttle")
    view = store.view()
    assert store.latest is not None
    steps = timeline(merge_xid_events(tuple(store.events)), store.rail.causes(), now=view.problems,
                     now_at=store.latest.taken_at)
    assert steps[-1].subject == "md:md127"
    assert steps[-1].text.startswith("md127 at 7") and " % of md126 now" in steps[-1].text
    assert steps[-1].text.endswith(", after NVMe nvme1 reached its warning temperature")
    hot = [s for s in steps if s.kind == "nvme_temp_over_max"]
    assert [s.subject for s in hot] == ["nvme:nvme0", "nvme:nvme1"]
    # One line each at 80 columns; the advice once, on the first drive's step.
    assert [s.text for s in hot] == [
        "NVMe nvme0 at 81.86 °C ≥ warning limit 81.85 °C, in md127: it throttles its reads; check the enclosure's "
        "fan and airflow", "NVMe nvme1 at 81.86 °C ≥ warning limit 81.85 °C, in md127"]


def test_a_hot_drive_is_one_step_with_the_alarm_its_hold_fired_later() -> None:
    # nvme_temp_over_warning holds 10 s: it fires 10 s after the drive's event set it pending, and is
    # that event's step, not a second line repeating it.
    store = store_of("nvme-enclosure-thermal-throttle")
    firing = [e for e in store.events if e.kind == "alarm_firing" and e.subject == "nvme:nvme0"]
    hot = next(e for e in store.events if e.kind == "nvme_temp_over_max" and e.subject == "nvme:nvme0")
    assert firing and firing[0].at - hot.at >= 10  # the recorded fixture: the hold between them
    steps = timeline(merge_xid_events(tuple(store.events)), store.rail.causes())
    drive = [s for s in steps if s.subject == "nvme:nvme0"]
    assert len(drive) == 1, drive
    assert drive[0].kind == "nvme_temp_over_max" and drive[0].alarm == "nvme_temp_over_warning"


def test_hot_drives_are_said_in_a_few_words_and_explain_their_alarms(tmp_path: Path) -> None:
    import msgspec

    from rigmon.cluster.incident import problems, reason
    from rigmon.schema import Alarm

    store = store_of("nvme-enclosure-thermal-throttle")
    frame = store.latest
    assert frame is not None
    found = store.view().problems
    # The cause before the array it slows, in the storage box's words.
    assert reason(found, limit=3) == "nvme0 hot, 82 °C ≥ 81.85; nvme1 hot, 82 °C ≥ 81.85; md127 at 71 % of md126"
    # The firing alarm of a hot drive is explained by its reading: its long message is not the node's "now".
    firing = next(e for e in store.events if e.kind == "alarm_firing" and e.subject == "nvme:nvme0")
    alarm = Alarm(id=str(firing.data["alarm_id"]), rule="nvme_temp_over_warning", rule_kind="state", severity="warning",
                  node="strix-1", subject="nvme:nvme0", state="firing", message=firing.message, started_at=firing.at,
                  updated_at=firing.at, value=True, fired_at=firing.at)
    texts = [p.text for p in problems(frame, None, [alarm])]
    assert not any("throttles" in t for t in texts), texts
    # A drive whose temperature is unread but which set its own warning bit, as the NVMe collector reads
    # such a drive's files.
    hwmon = "/sys/class/nvme/nvme0/hwmon2"
    write_tree(tmp_path, {**nvme_files("nvme0", "Samsung SSD 990 PRO 2TB"), f"{hwmon}/temp1_max": "81850\n",
                          f"{hwmon}/temp1_input": "\n", f"{hwmon}/temp1_alarm": "1\n"})
    unread = nvme_readings(NvmeCollector(HostRoot(tmp_path)).collect())["nvme0"]
    assert (unread.temp_c, unread.temp_over_max) == (None, True)
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, nvme=(unread,)))
    assert [p.text for p in problems(frame, None)][0] == "nvme0 hot (its own warning bit)"


def test_the_lagging_arrays_alarm_leaves_its_list_of_causes_to_the_step_naming_one() -> None:
    # md_array_lagging's message lists what to check ("a member's link below its speed, a drive at its
    # warning temperature or a failing member ..."); the step ending the timeline names the drive seen.
    from rigmon.schema import Event

    store = store_of("nvme-enclosure-thermal-throttle")
    assert store.latest is not None
    text = ("array md127 reads at 71 % of the fastest array loaded beside it: a member's link below its speed, a "
            "drive at its warning temperature or a failing member (the storage box and its alarms say which)")
    lagging = Event(id="lag", at=store.latest.taken_at - 20, kind="alarm_firing", severity="warning", subject="md:md127",
                    message=f"md_array_lagging firing: {text}", data={"rule": "md_array_lagging", "severity": "warning"})
    view = store.view()
    steps = timeline((*merge_xid_events(tuple(store.events)), lagging), store.rail.causes(), now=view.problems,
                     now_at=store.latest.taken_at, frame=store.latest)
    array = [s.text for s in steps if s.subject == "md:md127"]
    assert array[0] == "array md127 reads at 71 % of the fastest array loaded beside it"
    assert array[-1].endswith("now, after NVMe nvme1 reached its warning temperature")


def test_a_hot_drive_step_says_what_its_event_data_holds_and_its_advice_once() -> None:
    from rigmon.schema import Event

    advice = "it throttles its reads; check the enclosure's fan and airflow"

    def hot(n: int, at: float, **data: object) -> Event:
        return Event(id=f"h{n}-{at}", at=at, kind="nvme_temp_over_max", severity="warning", subject=f"nvme:nvme{n}",
                     message=f"NVMe nvme{n} (Model X) at 82 °C, its temperature warning bit set: {advice}",
                     data={"serial": "S", "temp_crit_c": None, **data})  # type: ignore[dict-item]

    steps = timeline([hot(0, 10.0, temp_c=82.0, temp_max_c=None, md_arrays="md127 md126"),
                      hot(1, 20.0, temp_c=None, temp_max_c=81.85, md_arrays=None),
                      hot(2, 30.0),  # an older agent's event: no figures, its message as it is
                      hot(3, 40.0, temp_c=83.0, temp_max_c=81.85, md_arrays=None),
                      hot(3, 50.0, temp_c=83.0, temp_max_c=81.85, md_arrays=None)])
    assert [s.text for s in steps] == [
        f"NVMe nvme0 at 82 °C, its temperature warning bit set, in md127, md126: {advice}",
        "NVMe nvme1, its temperature warning bit set (warning limit 81.85 °C)",
        "NVMe nvme2 (Model X) at 82 °C, its temperature warning bit set",
        "NVMe nvme3 at 83 °C ≥ warning limit 81.85 °C (×2 since 00:00:40)"]
