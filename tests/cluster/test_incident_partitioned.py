"""Incident 6's thermal story on a rig whose md arrays hold partitions (drives partitioned before
``mdadm --create``): the hot drives are still in md127, and the array that lags follows them."""

from __future__ import annotations

from rigmon.cluster.incident import reason, timeline
from rigmon.tui.event_merge import merge_xid_events
from tests.cluster.test_incident import store_of


def test_an_array_of_partitions_lagging_behind_hot_drives_names_them_in_it() -> None:
    store = store_of("nvme-partitioned-thermal-throttle")
    frame = store.latest
    assert frame is not None
    assert [m.name for a in frame.readings.raid if a.name == "md127" for m in a.members] == ["nvme0n1p1", "nvme1n1p1"]
    assert {d.name: d.md_arrays for d in frame.readings.nvme} == {
        "nvme0": ("md127",), "nvme1": ("md127",), "nvme2": ("md126",), "nvme3": ("md126",)}
    view = store.view()
    steps = timeline(merge_xid_events(tuple(store.events)), store.rail.causes(), now=view.problems,
                     now_at=frame.taken_at)
    assert steps[-1].subject == "md:md127" and " % of md126 now" in steps[-1].text
    assert steps[-1].text.endswith(", after NVMe nvme1 reached its warning temperature")
    hot = [s for s in steps if s.kind == "nvme_temp_over_max"]
    assert [s.subject for s in hot] == ["nvme:nvme0", "nvme:nvme1"]
    assert all("≥ warning limit 81.85 °C, in md127" in s.text for s in hot)
    # The cluster row: the cause before the array it slows.
    said = reason(view.problems, limit=3)
    assert said.startswith("nvme0 hot, 82 °C ≥ 81.85; nvme1 hot, 82 °C ≥ 81.85; md127 at "), said
