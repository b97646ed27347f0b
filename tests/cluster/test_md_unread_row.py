"""The cluster row of a node whose md arrays cannot be read now (/proc/mdstat gone: listed with their state
unknown, `rigmon.collectors.raid_unread`): neither healthy nor degraded, its storage figure greyed, sorted
with the nodes whose collectors fail, after a node whose array is degraded."""

from __future__ import annotations

from msgspec.structs import replace

from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.node_view import NodeView, trouble_order
from rigmon.collectors.raid_unread import unread_array
from rigmon.schema import CollectorStatus, Frame
from rigmon.summary import summary_record
from rigmon.tui.row_columns import figure_level
from tests.tui.snapshot_apps.fake_agent import FakeClock
from tests.tui.snapshot_apps.record_frames import load_frames

#: Frames of an md raid1 whose member fails at frame 16 (degraded from then).
FRAMES = load_frames("raid1-member-failed-recovering")[:30]


def _node(name: str, frames: list[Frame], summaries: bool = False) -> NodeView:
    store = NodeStore(name, f"http://{name}:9871", FakeClock())
    for frame in frames:
        frame = replace(frame, node=name)
        if summaries:
            store.add_summaries([summary_record(frame)])
        else:
            store.add_frames([frame])
    return store.view()


def _unread(frame: Frame, last_read: Frame, old_agent: bool = False) -> Frame:
    """``frame`` once /proc/mdstat is gone after ``last_read``; ``old_agent``: as the round before listed such
    an array (its health the last read, ``mdstat_state`` ``unknown``)."""
    raid = tuple(replace(unread_array(a), health=a.health, health_last_read=None) if old_agent else unread_array(a)
                 for a in last_read.readings.raid)
    collectors = {**frame.collectors, "raid": CollectorStatus(state="error", ok=False, error="md status unreadable")}
    return replace(frame, readings=replace(frame.readings, raid=raid), collectors=collectors)


def _gone(old_agent: bool = False) -> list[Frame]:
    """Degraded at frame 16, unreadable from frame 20 on."""
    return FRAMES[:20] + [_unread(f, FRAMES[19], old_agent) for f in FRAMES[20:]]


def test_an_unread_array_is_not_counted_degraded_and_its_storage_figure_is_greyed() -> None:
    assert FRAMES[19].readings.raid[0].health == "degraded"
    for old_agent in (False, True):
        for summaries in (False, True):
            view = _node("n1", _gone(old_agent), summaries)
            assert view.summary is not None
            assert (view.summary.arrays_degraded, view.arrays_unknown) == (0, 1), (old_agent, summaries)
            assert figure_level("storage", view.summary, view.arrays_unknown) == "missing"
            texts = [p.text for p in view.problems]
            assert not any("md127" in t for t in texts), texts
            assert "collector raid failing" in texts
    degraded = _node("n2", FRAMES[:30])
    assert degraded.summary is not None and degraded.summary.arrays_degraded == 1 and degraded.arrays_unknown == 0
    assert figure_level("storage", degraded.summary, degraded.arrays_unknown) == "bad"


def test_a_node_with_an_unread_array_sorts_after_one_with_a_degraded_array() -> None:
    unread = _node("a-unread", _gone())
    degraded = _node("b-degraded", FRAMES[:30])
    healthy = _node("c-healthy", FRAMES[:10])
    order = [v.name for v in sorted((healthy, unread, degraded), key=trouble_order)]
    assert order == ["b-degraded", "a-unread", "c-healthy"]
