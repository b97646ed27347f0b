"""The incident story of a thermally throttling enclosure (incident 6): the array that lags is said to
follow the drives that reached their warning temperature, not a link that slowed."""

from __future__ import annotations

from rigmon.cluster.incident import timeline
from rigmon.tui.event_merge import merge_xid_events
from tests.cluster.test_incident import store_of


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
    assert all("warning limit 81.85 °C (critical 84.85 °C), in md127" in s.text for s in hot)
