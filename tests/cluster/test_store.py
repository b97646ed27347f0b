"""Node stores decide live / stale / unreachable from arrivals and failures on an injected clock."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from rigmon.cluster.store import ClusterStore, NodeStore, contiguous
from rigmon.schema import Gap
from tests.tui.snapshot_apps.fake_agent import FakeClock, make_frame

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
    assert view.state == "unreachable"
    assert view.reason == "401 unauthorized: missing or wrong bearer token"
    assert view.age_s == 12


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
    assert cluster.counts() == {"live": 1, "stale": 1, "unreachable": 1, "connecting": 1}
