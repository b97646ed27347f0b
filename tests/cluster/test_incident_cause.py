"""The cause the timeline names for a lagging array is a drive of THAT array (or a link nothing ties to
another array): a hot drive of md126 does not slow md127."""

from __future__ import annotations

import msgspec

from rigmon.cluster.incident import Problem, timeline
from rigmon.schema import Event
from rigmon.tui.event_merge import merge_xid_events
from tests.cluster.test_incident import store_of

_LAG = Problem("warn", "md127 at 71 % of md126", "md:md127")


def _hot(drive: str, at: float, arrays: str | None) -> Event:
    """A drive's ``nvme_temp_over_max``, as the NVMe collector words it (``md_arrays`` null: in no array)."""
    where = f", in {arrays.replace(' ', ', ')}" if arrays else ""
    return Event(id=f"r-{drive}-{at}", at=at, kind="nvme_temp_over_max", severity="warning", subject=f"nvme:{drive}",
                 message=f"NVMe {drive} at 81.86 °C, at or over its warning limit 81.85 °C (critical 84.85 °C){where}",
                 data={"serial": f"S-{drive}", "temp_c": 81.86, "temp_max_c": 81.85, "temp_crit_c": 84.85,
                       "md_arrays": arrays})


def _link_below_max(drive: str, at: float) -> Event:
    """A drive's PCIe link below its maximum: its event does not say which arrays the drive is in."""
    return Event(id=f"r-{drive}-link-{at}", at=at, kind="nvme_link_below_max", severity="warning",
                 subject=f"nvme:{drive}", message=f"NVMe {drive} link 8.0 GT/s x4 below its maximum 16.0 GT/s x4",
                 data={"serial": f"S-{drive}", "link_gts": 8.0, "link_width": 4, "max_link_gts": 16.0,
                       "max_link_width": 4})


def test_a_hot_drive_of_the_other_array_is_not_named() -> None:
    steps = timeline([_hot("nvme2", 100.0, "md126")], now=[_LAG], now_at=130.0)
    assert steps[-1].subject == "md:md127"
    assert steps[-1].text == "md127 at 71 % of md126 now"


def test_the_lagging_array_names_its_own_hot_drive_not_a_later_one_of_another() -> None:
    events = [_hot("nvme0", 100.0, "md127"), _hot("nvme2", 110.0, "md126")]
    steps = timeline(events, now=[_LAG], now_at=130.0)
    assert steps[-1].text == "md127 at 71 % of md126 now, after NVMe nvme0 reached its warning temperature"


def test_a_drive_in_several_arrays_is_named_for_each() -> None:
    steps = timeline([_hot("nvme0", 100.0, "md126 md127")], now=[_LAG], now_at=130.0)
    assert steps[-1].text.endswith(", after NVMe nvme0 reached its warning temperature")


def test_a_drive_in_no_array_is_not_named() -> None:
    steps = timeline([_hot("nvme4", 100.0, None)], now=[_LAG], now_at=130.0)
    assert steps[-1].text == "md127 at 71 % of md126 now"


def test_the_frame_ties_a_drive_whose_event_does_not_say_its_arrays() -> None:
    # The partitioned recording: its frame says nvme2 is in md126 (through nvme2n1p1's holders).
    store = store_of("nvme-partitioned-thermal-throttle")
    frame = store.latest
    assert frame is not None
    events = [*merge_xid_events(tuple(store.events)), _link_below_max("nvme2", frame.taken_at - 1)]
    lag = next(p for p in store.view().problems if p.subject == "md:md127")
    steps = timeline(events, store.rail.causes(), now=[lag], now_at=frame.taken_at, frame=frame)
    assert steps[-1].text.endswith(", after NVMe nvme1 reached its warning temperature"), steps[-1].text


def test_an_array_of_partitions_ties_its_drives_through_its_members() -> None:
    # Without `NvmeReading.md_arrays` (an agent older than it), md127's members nvme0n1p1 and nvme1n1p1 are
    # partitions of nvme0's and nvme1's namespaces.
    store = store_of("nvme-partitioned-thermal-throttle")
    frame = store.latest
    assert frame is not None
    drives = tuple(msgspec.structs.replace(d, md_arrays=()) for d in frame.readings.nvme)
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, nvme=drives))
    events = [_link_below_max("nvme0", 100.0), _link_below_max("nvme2", 110.0)]
    steps = timeline(events, now=[_LAG], now_at=130.0, frame=frame)
    assert steps[-1].text == "md127 at 71 % of md126 now, after NVMe nvme0's PCIe link slowed"


def test_a_usb4_link_is_named_when_no_drive_of_the_array_is() -> None:
    # The 10 Gb/s recording's frame predates `md_arrays`: its arrays' members (nvme2n1) tie nvme2 to md126.
    store = store_of("enclosure-link-10g-array-lagging")
    frame = store.latest
    assert frame is not None
    assert all(not d.md_arrays for d in frame.readings.nvme)
    events = [*merge_xid_events(tuple(store.events)), _link_below_max("nvme2", frame.taken_at - 1)]
    view = store.view()
    steps = timeline(events, store.rail.causes(), now=view.problems, now_at=frame.taken_at, frame=frame)
    assert steps[-1].text == "md127 at 67 % of md126 now, after link 0-1 slowed"


def test_a_drive_of_the_array_comes_before_a_link_nothing_ties_to_it() -> None:
    store = store_of("enclosure-link-10g-array-lagging")
    frame = store.latest
    assert frame is not None
    link = next(e for e in store.events if e.subject == "link:0-1" and e.severity != "info")
    # nvme0 (md127's, by the frame's members) hot before the link slowed: the drive of the array is named.
    # Its event from an agent older than ``md_arrays`` does not say its arrays.
    hot = Event(id="r-hot", at=link.at - 5, kind="nvme_temp_over_max", severity="warning", subject="nvme:nvme0",
                message="NVMe nvme0 at 81.86 °C, at or over its warning limit 81.85 °C",
                data={"serial": "S-nvme0", "temp_c": 81.86, "temp_max_c": 81.85, "temp_crit_c": 84.85})
    events = [hot, *merge_xid_events(tuple(store.events))]
    steps = timeline(events, store.rail.causes(), now=store.view().problems, now_at=frame.taken_at, frame=frame)
    assert steps[-1].text == "md127 at 67 % of md126 now, after NVMe nvme0 reached its warning temperature"
