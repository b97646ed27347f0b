"""Node stores decide live / stale / unreachable from arrivals and failures on an injected clock."""

from __future__ import annotations

import math
import random

import pytest
from msgspec.structs import replace

from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.store import ClusterStore, contiguous
from rigmon.schema import Alarm, AlarmList, Event, Gap
from tests.tui.snapshot_apps.fake_agent import (
    FakeAgent,
    FakeClock,
    make_alarm,
    make_frame,
)

RNG = random.Random(3)


def frame(seq: int, run_id: str = "r1", node: str = "node01"):  # type: ignore[no-untyped-def]
    return make_frame(node, run_id, seq, RNG)


# Each step: ("frame", seq) | ("fail", reason) | ("wait", seconds); then the expected state.
CASES = [
    ("nothing yet", [], "connecting"),
    ("fresh frame", [("frame", 1)], "live"),
    ("frame within the stale limit", [("frame", 1), ("wait", 3.0)], "live"),
    ("frame too old", [("frame", 1), ("wait", 3.5)], "stale"),
    ("never reached", [("fail", "cannot connect")], "unreachable"),
    ("failed after old data", [("frame", 1), ("wait", 5), ("fail", "timed out")], "unreachable"),
    ("failure just after data stays live", [("frame", 1), ("fail", "connection lost")], "live"),
    ("failure then stale", [("frame", 1), ("fail", "connection lost"), ("wait", 4)], "unreachable"),
    ("back after failure", [("frame", 1), ("wait", 5), ("fail", "x"), ("wait", 5), ("frame", 2)], "live"),
    ("duplicate frame does not refresh", [("frame", 1), ("wait", 4), ("frame", 1)], "stale"),
]


@pytest.mark.parametrize(("steps", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_state_table(steps: list[tuple[str, object]], expected: str) -> None:
    clock = FakeClock()
    store = NodeStore("k", "http://n:1", clock)
    for kind, arg in steps:
        if kind == "frame":
            store.add_frames([frame(int(arg))])  # type: ignore[call-overload]
        elif kind == "fail":
            store.failed(str(arg))
        else:
            clock.advance(float(arg))  # type: ignore[arg-type]
    assert store.state() == expected


def test_view_carries_reason_and_age() -> None:
    clock = FakeClock()
    store = NodeStore("k", "http://n:1", clock)
    store.add_frames([frame(1)])
    clock.advance(12)
    store.failed("401 unauthorized: missing or wrong bearer token")
    view = store.view()
    # The agent answered and refused: its own state word, not "unreachable".
    assert view.state == "refused"
    assert view.reason == "401 unauthorized: missing or wrong bearer token"
    assert view.age_s == 12


def test_view_is_reused_until_something_it_shows_changes() -> None:
    clock = FakeClock()
    store = NodeStore("k", "http://n:1", clock)
    store.add_frames([frame(1)])
    first = store.view()
    clock.advance(0.2)
    assert store.view() is first  # same data, same state, age still shown as 0 s
    store.add_frames([frame(1)])  # a duplicate changes nothing
    assert store.view() is first
    assert store.view(points=60) is not first  # other arguments, another view
    store.add_frames([frame(2)])
    second = store.view()
    assert second is not first and second.summary is not None and store.latest is not None
    assert second.trends["cpu_pct"][-1] == pytest.approx(store.summary.cpu_pct)  # type: ignore[union-attr]
    clock.advance(0.9)
    assert store.view() is second
    clock.advance(0.2)
    assert store.view() is not second and store.view().age_s == pytest.approx(1.1)  # another whole second
    clock.advance(2.5)
    assert store.view().state == "stale"
    stale = store.view()
    store.failed("timed out")
    assert store.view() is not stale and store.view().reason == "timed out"


@pytest.mark.parametrize("change", ["connected", "alarms", "alarms_failed", "gap", "cluster_alarm"])
def test_every_change_a_view_shows_makes_a_new_view(change: str) -> None:
    store = NodeStore("k", "http://n:1", FakeClock())
    store.add_frames([frame(1)])
    before = store.view()
    cluster_alarms: tuple[Alarm, ...] = ()
    if change == "connected":
        store.connected(FakeAgent("node01").info())
    elif change == "alarms":
        assert store.set_alarms(AlarmList(node="node01", active=(), recent=()))
    elif change == "alarms_failed":
        store.alarms_failed("404")
    elif change == "gap":
        store.add_gap(Gap(run_id="r1", from_seq=2, to_seq=3, reason="buffer"))
    else:
        cluster_alarms = (make_alarm("node01", 1, "node_silent", "critical", "node:node01", "silent"),)
    assert store.view(cluster_alarms=cluster_alarms) is not before


def test_restart_duplicates_and_gaps() -> None:
    store = NodeStore("k", "http://n:1", FakeClock())
    assert store.add_frames([frame(1), frame(2), frame(2), frame(3)]) == 3
    assert store.add_frames([frame(1, run_id="r2"), frame(2, run_id="r2")]) == 2
    assert store.restarts == 1
    store.add_gap(Gap(run_id="r2", from_seq=3, to_seq=9, reason="buffer"))
    assert store.frames_lost == 7
    assert store.history.seqs() == [1, 2, 3, 1, 2]
    assert contiguous(store.history.seqs()[:3]) and not contiguous(store.history.seqs())


def test_stale_limit_follows_the_agent_interval() -> None:
    clock = FakeClock()
    store = NodeStore("k", "http://n:1", clock)
    from tests.tui.snapshot_apps.fake_agent import FakeAgent

    store.connected(replace(FakeAgent("n").info(), interval_s=5.0))
    store.add_frames([frame(1)])
    clock.advance(10)
    assert store.state() == "live"
    clock.advance(6)
    assert store.state() == "stale"


def test_cluster_lists_trouble_first() -> None:
    clock = FakeClock()
    cluster = ClusterStore(clock)
    for name in ("a", "b", "c", "d"):
        cluster.add(name, f"http://{name}:1")
    cluster.nodes["a"].add_frames([frame(1, node="a")])
    cluster.nodes["b"].add_frames([frame(1, node="b")])
    clock.advance(10)
    cluster.nodes["a"].add_frames([frame(2, node="a")])
    cluster.nodes["c"].failed("cannot connect")
    assert [v.key for v in cluster.views()] == ["c", "b", "d", "a"]
    assert cluster.counts() == {"live": 1, "stale": 1, "refused": 0, "unreachable": 1, "connecting": 1}


# --- Every source: session inventory and trouble order, from recorded frames of real collectors ---

from rigmon.cluster.node_view import STATE_RANK, hardware_trouble, trouble_order
from tests.tui.snapshot_apps.record_frames import load_frames


def renamed(frames, node: str):  # type: ignore[no-untyped-def]
    return [replace(f, node=node, run_id=f"{node}-r") for f in frames]


def test_gpus_expected_is_the_most_seen_this_session() -> None:
    frames = renamed(load_frames("v100-gpu-lost-rail-sag")[:10], "v100")
    store = NodeStore("k", "http://n:1", FakeClock())
    store.add_frames(frames[:5])
    assert (store.summary.gpus_present, store.summary.gpus_expected) == (4, 4)  # type: ignore[union-attr]
    # The driver went away: the frames list no GPU at all; the node still should have four.
    gone = replace(frames[5], readings=replace(frames[5].readings, gpus=()))
    store.add_frames([gone])
    assert (store.summary.gpus_present, store.summary.gpus_expected) == (0, 4)  # type: ignore[union-attr]


def test_links_total_is_the_most_seen_this_session() -> None:
    frames = renamed(load_frames("enclosure-link-10g-array-lagging")[:3], "encl")
    store = NodeStore("k", "http://n:1", FakeClock())
    store.add_frames(frames[:2])
    assert (store.summary.links_healthy, store.summary.links_total) == (3, 3)  # type: ignore[union-attr]
    unplugged = tuple(d for d in frames[2].readings.thunderbolt if d.name != "0-1")
    store.add_frames([replace(frames[2], readings=replace(frames[2].readings, thunderbolt=unplugged))])
    assert (store.summary.links_healthy, store.summary.links_total) == (2, 3)  # type: ignore[union-attr]


# (name, fixture, frames filed, hardware trouble count)
TROUBLE = [
    ("aaa-healthy-v100", "v100-gpu-lost-rail-sag", 10, 0),
    ("bbb-lost-gpu-low-rail", "v100-gpu-lost-rail-sag", 60, 2),
    ("ccc-link-10g", "enclosure-link-10g-array-lagging", 45, 1),
    ("ddd-raid-degraded", "raid1-member-failed-recovering", 25, 1),
    ("eee-model-load", "two-raid0-model-load", 30, 0),
]


def test_hardware_trouble_sorts_first() -> None:
    clock = FakeClock()
    cluster = ClusterStore(clock)
    for name, fixture, count, _ in TROUBLE:
        cluster.add(name, f"http://{name}:1").add_frames(renamed(load_frames(fixture)[:count], name))
    views = cluster.views()
    assert {v.name: hardware_trouble(v) for v in views} == {name: t for name, _, _, t in TROUBLE}
    assert [v.name for v in views] == ["bbb-lost-gpu-low-rail", "ccc-link-10g", "ddd-raid-degraded",
                                       "aaa-healthy-v100", "eee-model-load"]
    # No data is worse than bad data: a stale node still comes first.
    clock.advance(10)
    cluster.add("zzz", "http://zzz:1").add_frames(renamed(load_frames("raid1-member-failed-recovering")[:25], "zzz"))
    views = cluster.views()
    assert (views[0].name, views[-1].name) == ("bbb-lost-gpu-low-rail", "zzz")
    assert trouble_order(views[-1])[:2] == (STATE_RANK["live"], -1)


def test_a_sag_in_the_recent_trend_keeps_a_node_first() -> None:
    frames = renamed(load_frames("v100-gpu-lost-rail-sag"), "v100")
    # Frames 13-25 hold the sags below 11.5 V (before GPU 3 dropped); the GPUs are put back
    # so only the rail counts.
    healthy_gpus = frames[5].readings.gpus
    frames = [replace(f, readings=replace(f.readings, gpus=healthy_gpus)) for f in frames[:40]]
    store = NodeStore("k", "http://n:1", FakeClock())
    store.add_frames(frames)
    assert store.summary.rail_min_volts is not None and store.summary.rail_min_volts > 11.5  # type: ignore[union-attr]
    assert hardware_trouble(store.view()) == 1
    # A trend of the last 5 frames no longer holds the sags, the last 60 s worst figure does.
    assert store.summary.rail_worst_volts is not None and store.summary.rail_worst_volts < 11.5  # type: ignore[union-attr]
    assert hardware_trouble(store.view(points=5)) == 1


def test_view_details_only_when_asked() -> None:
    store = NodeStore("k", "http://n:1", FakeClock())
    store.add_frames(renamed(load_frames("v100-gpu-lost-rail-sag")[:30], "v100"))
    assert store.view().details == {}
    details = store.view(points=None, buckets=240, details=True).details
    # The mean's trend is a series of its own: the rail minimum's trend keeps the sags.
    assert min(details["rail.mean_volts"]) > min(store.view(points=None, buckets=240).trends["rail_min_volts"]) + 0.2
    assert len([k for k in details if k.startswith("gpu[")]) == 4


def test_view_states_its_trend_span_and_power_limit() -> None:
    from rigmon.cluster.node_store import NodeStore, power_limit_w
    from tests.tui.snapshot_apps.record_frames import load_frames

    frames = load_frames("v100-gpu-lost-rail-sag")[:30]

    class Clock:
        def time(self) -> float:
            return frames[-1].taken_at

        def monotonic(self) -> float:
            return 0.0

    store = NodeStore("k", "http://k", Clock())
    store.add_frames(frames)
    view = store.view(points=10, buckets=5)
    assert view.trend_span_s == frames[-1].taken_at - frames[-10].taken_at
    assert store.view(points=None, buckets=5).trend_span_s == frames[-1].taken_at - frames[0].taken_at
    limits = [g.power_limit_w for g in frames[-1].readings.gpus if g.state != "lost"]
    assert view.gpu_power_limit_w == power_limit_w(frames[-1]) == sum(limits)  # type: ignore[arg-type]
    assert power_limit_w(None) is None


def _alarm_event(seq: int, kind: str, alarm_id: str, at: float) -> Event:
    change = kind.removeprefix("alarm_")
    return Event(id=f"r1-e{seq}", at=at, kind=kind, severity="warning", subject="link:0-1",
                 message=f"thunderbolt_degraded {change}: link 0-1 runs below its expected speed",
                 data={"alarm_id": alarm_id, "rule": "thunderbolt_degraded", "severity": "warning",
                       "state": change, "value": "degraded"})


def _frame_with(seq: int, *events: Event):  # type: ignore[no-untyped-def]
    return replace(frame(seq), events=events)


def test_alarm_events_in_frames_count_before_the_next_fetch() -> None:
    # Reported: node03's thunderbolt_degraded fired, the frame said so, and the row still
    # counted 0 alarms until the /v1/alarms fetch the event triggered came back.
    clock = FakeClock()
    store = NodeStore("k", "http://n:1", clock)
    store.add_frames([frame(1)])
    pending = make_alarm("node01", 1, "thunderbolt_degraded", "warning", "link:0-1", "slow", state="pending")
    store.set_alarms(AlarmList(node="node01", control=False, active=(pending,), recent=()))
    assert store.view().summary.alarms == 0  # type: ignore[union-attr]
    store.add_frames([_frame_with(2, _alarm_event(2, "alarm_firing", pending.id, 1000.0))])
    view = store.view()
    assert view.summary.alarms == 1 and view.summary.alarms_severity == "warning"  # type: ignore[union-attr]
    # A new alarm the list did not have yet counts as well; a resolution takes it away.
    store.add_frames([_frame_with(3, _alarm_event(3, "alarm_firing", "node01-run1-a9", 1001.0))])
    assert store.view().summary.alarms == 2  # type: ignore[union-attr]
    store.add_frames([_frame_with(4, _alarm_event(4, "alarm_resolved", pending.id, 1002.0))])
    assert store.view().summary.alarms == 1  # type: ignore[union-attr]
    assert [a.id for a in store.alarm_list.recent] == [pending.id]  # type: ignore[union-attr]


def test_old_alarm_events_never_undo_the_fetched_list() -> None:
    # Backfilled frames bring events older than the list: a resolved alarm is not revived, a
    # firing one not sent back to pending.
    clock = FakeClock()
    store = NodeStore("k", "http://n:1", clock)
    firing = make_alarm("node01", 1, "thunderbolt_degraded", "warning", "link:0-1", "slow")
    gone = make_alarm("node01", 2, "thunderbolt_degraded", "warning", "link:0-2", "slow", resolved=True)
    listed = AlarmList(node="node01", control=False, active=(firing,), recent=(gone,))
    store.set_alarms(listed)
    store.add_frames([_frame_with(1, _alarm_event(1, "alarm_pending", firing.id, 900.0),
                                  _alarm_event(1, "alarm_firing", gone.id, 900.0))])
    assert store.alarm_list == listed


def test_a_fetch_answered_before_the_frame_does_not_take_its_alarm_back() -> None:
    # A poll sent just before the frame that announced the firing is filed after it: the count
    # stays 1 (no flicker, no second toast), and the next answer is the authority again.
    clock = FakeClock()
    store = NodeStore("k", "http://n:1", clock)
    pending = make_alarm("node01", 1, "thunderbolt_degraded", "warning", "link:0-1", "slow", state="pending")
    before = AlarmList(node="node01", control=False, active=(pending,), recent=())
    store.set_alarms(before)
    store.add_frames([_frame_with(1, _alarm_event(1, "alarm_firing", pending.id, 1000.0))])
    store.set_alarms(before)
    assert store.view().summary.alarms == 1  # type: ignore[union-attr]
    resolved = replace(pending, state="resolved", resolved_at=1010.0)
    store.set_alarms(AlarmList(node="node01", control=False, active=(), recent=(resolved,)))
    assert store.view().summary.alarms == 0  # type: ignore[union-attr]


def test_a_node_s_outage_is_a_gap_in_its_row_trends() -> None:
    # A node that was down for five minutes between two stretches of frames (one a second): its
    # trends hold one gap marker there; a late frame or two (under three intervals) is no gap.
    clock = FakeClock()
    store = NodeStore("k", "http://node01", clock)
    times = [0.0, 1.0, 2.0, 4.5, *range(5, 120), *range(420, 540)]
    for seq, at in enumerate(times, 1):
        store.add_frames([replace(frame(seq), taken_at=1000.0 + at)])
    view = store.view(points=600, buckets=120)
    drawn = {name: trend for name, trend in view.trends.items() if trend}  # a host-only frame has no rail
    assert set(drawn) == {"cpu_pct", "net_bytes_per_s"}
    for name, trend in drawn.items():
        assert [i for i, v in enumerate(trend) if math.isnan(v)] == [60], name


def test_a_store_started_afresh_drops_answers_asked_for_before() -> None:
    # Another agent at the node's URL: an alarm poll asked of the old one (generation 0) is not the new
    # store's. Before, an answer carried no generation and went into whichever store the key had then.
    cluster = ClusterStore(FakeClock())
    old = cluster.add("k", "http://node01.test:9871")
    assert old.generation == 0 and cluster.current("k", 0) is old
    new = cluster.start_afresh("k")
    assert new.generation == 1 and new.url == old.url
    assert cluster.current("k", 0) is None
    assert cluster.current("k", 1) is new
    assert cluster.current("other", 0) is None
