"""Cluster rules for the dashboard: unreachable, stale, clock skew, a node far from its peers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rigmon.alarms.cluster import (
    ClusterAlarms,
    NodeView,
    PeerCheck,
    alarm_node_key,
    clock_skew,
    peer_outliers,
    stale,
    unreachable,
)
from rigmon.schema import SCHEMA_VERSION, Frame, HostReading, Readings

T0 = 1_700_000_000.0


def view(node: str, connected: bool = True, received: float | None = T0, taken: float | None = T0) -> NodeView:
    return NodeView(node=node, connected=connected, last_received_at=received, last_taken_at=taken,
                    error=None if connected else "connection refused")


def frame(node: str, cpu_pct: float | None) -> Frame:
    host = HostReading(cpu_pct=cpu_pct, cpu_count=32, load_1=None, load_5=None, load_15=None, mem_total_bytes=None,
                       mem_available_bytes=None, swap_total_bytes=None, swap_free_bytes=None, uptime_s=None,
                       boot_id=None)
    return Frame(schema=SCHEMA_VERSION, node=node, run_id="r", seq=1, taken_at=T0, agent_start=T0, collectors={},
                 readings=Readings(host=host))


def active(observations: list) -> set[str]:  # type: ignore[type-arg]
    return {o.subject for o in observations if o.active}


def test_unreachable_and_stale() -> None:
    nodes = [view("a"), view("b", connected=False), view("c", received=T0 - 30)]
    assert active(unreachable(nodes)) == {"node:b"}
    assert active(stale(nodes, T0 + 1, max_age_s=10)) == {"node:c"}


@pytest.mark.parametrize(
    ("offsets", "flagged"),
    [
        ({"a": 0.0, "b": 0.1, "c": -0.1}, set()),
        ({"a": 0.0, "b": 0.1, "c": 5.0}, {"node:c"}),
        # Two nodes 3 s apart: no telling which is wrong, so both are flagged.
        ({"a": 0.0, "b": 3.0}, {"node:a", "node:b"}),
        ({"a": 0.0}, set()),
    ],
)
def test_clock_skew(offsets: dict[str, float], flagged: set[str]) -> None:
    nodes = [view(n, received=T0, taken=T0 + off) for n, off in offsets.items()]
    assert active(clock_skew(nodes, max_skew_s=2.0)) == flagged


CPU = PeerCheck(name="cpu_off", select="host.cpu_pct", min_deviation=20.0, direction="below")


@pytest.mark.parametrize(
    ("cpus", "flagged"),
    [
        ({"a": 90.0, "b": 92.0, "c": 91.0, "d": 30.0}, {"node:d"}),
        ({"a": 90.0, "b": 92.0, "c": 91.0, "d": 80.0}, set()),  # within min_deviation
        ({"a": 90.0, "b": 92.0, "c": 99.0, "d": 91.0}, set()),  # above, but the check looks below
        ({"a": 90.0, "b": 30.0}, set()),  # two nodes: no telling
        ({"a": 90.0, "b": 92.0, "c": None, "d": 30.0}, {"node:d"}),  # c has no figure
    ],
)
def test_peer_outliers(cpus: dict[str, float | None], flagged: set[str]) -> None:
    frames = {n: frame(n, v) for n, v in cpus.items()}
    assert active(peer_outliers(frames, CPU)) == flagged


def test_cluster_alarms_lifecycle() -> None:
    alarms = ClusterAlarms(unreachable_hold_s=10.0, peer_checks=[CPU])
    frames = {n: frame(n, 90.0) for n in "abc"}
    nodes = [view("a"), view("b"), view("c", connected=False)]
    assert [t.change for t in alarms.evaluate(nodes, frames, T0)] == ["pending"]
    t = alarms.evaluate(nodes, frames, T0 + 10)
    assert [(x.change, x.alarm.node, x.alarm.rule, x.alarm.severity) for x in t] == [
        ("firing", "c", "node_unreachable", "critical")]
    t = alarms.evaluate([view(n, received=T0 + 11, taken=T0 + 11) for n in "abc"], frames, T0 + 11)
    assert [(x.change, x.alarm.subject) for x in t] == [("resolved", "node:c")]
    assert alarms.recent()[0].rule == "node_unreachable" and alarms.active() == ()


def test_peer_checks_read_the_records_without_converting_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard runs the peer checks over every node's newest frame: they read the
    records' values directly, without converting each frame to plain data."""
    import rigmon.alarms.walk as walk  # where frame_data converts frames

    def refuse(obj: object) -> object:
        raise AssertionError("a frame was converted to plain data")

    monkeypatch.setattr(walk, "to_data", refuse)
    alarms = ClusterAlarms(peer_checks=[CPU])
    frames = {n: frame(n, v) for n, v in {"a": 90.0, "b": 92.0, "c": 91.0, "d": 30.0}.items()}
    changes = alarms.evaluate([view(n) for n in frames], frames, T0)
    assert [(t.change, t.alarm.subject) for t in changes] == [("pending", "node:d")]


def test_two_nodes_of_one_name_are_two_nodes_to_the_rules() -> None:
    """Two agents that both call themselves gpu01 (a cloned image), at two keys: the rules keyed them
    by name, so one's figure stood for both and a peer outlier on one was reported on the other."""
    alarms = ClusterAlarms(peer_checks=[replace(CPU, hold_s=0.0)])
    keys = {"http://a:1": ("n1", 90.0), "http://b:1": ("n2", 91.0), "http://c:1": ("gpu01", 92.0),
            "http://d:1": ("gpu01", 30.0)}
    nodes = [NodeView(node=name, connected=True, last_received_at=T0, last_taken_at=T0, key=key)
             for key, (name, _) in keys.items()]
    frames = {key: frame(name, cpu) for key, (name, cpu) in keys.items()}
    changes = alarms.evaluate(nodes, frames, T0)
    assert [(t.change, alarm_node_key(t.alarm), t.alarm.node, t.alarm.subject) for t in changes] == [
        ("firing", "http://d:1", "gpu01", "node:gpu01")]
    assert changes[0].alarm.message == "gpu01 host.cpu_pct 30.00 is below its peers' median of 90.50"
    # The other gpu01 is off now, and this one is not: one alarm resolves, one fires.
    frames["http://c:1"], frames["http://d:1"] = frame("gpu01", 30.0), frame("gpu01", 92.0)
    changes = alarms.evaluate(nodes, frames, T0 + 1)
    assert sorted((t.change, alarm_node_key(t.alarm)) for t in changes) == [
        ("firing", "http://c:1"), ("resolved", "http://d:1")]


def test_unreachable_and_skew_of_two_nodes_of_one_name_stay_apart() -> None:
    nodes = [NodeView(node="gpu01", connected=True, last_received_at=T0, last_taken_at=T0, key="k1"),
             NodeView(node="gpu01", connected=False, error="refused", key="k2"),
             NodeView(node="gpu01", connected=True, last_received_at=T0, last_taken_at=T0 + 9, key="k3"),
             NodeView(node="n4", connected=True, last_received_at=T0, last_taken_at=T0, key="k4")]
    assert [(o.key, o.active) for o in unreachable(nodes)] == [("k1", False), ("k2", True), ("k3", False),
                                                               ("k4", False)]
    assert {o.key for o in clock_skew(nodes, max_skew_s=2.0) if o.active} == {"k3"}
    alarms = ClusterAlarms(unreachable_hold_s=0.0, peer_checks=[])
    alarms.evaluate(nodes, {}, T0)
    assert sorted((a.rule, alarm_node_key(a), a.state) for a in alarms.active()) == [
        ("clock_skew", "k3", "pending"), ("node_unreachable", "k2", "firing")]


def test_a_node_whose_newest_frame_is_old_is_not_compared_with_its_peers() -> None:
    # A stale node (its sampler stalled), or in a replay a node whose recording ended before the
    # cursor, keeps its last figures: the peers' current ones must not call it far off.
    alarms = ClusterAlarms(stale_after_s=10.0, peer_checks=[CPU])
    frames = {"a": frame("a", 90.0), "b": frame("b", 88.0), "c": frame("c", 91.0), "d": frame("d", 20.0)}
    fresh = [view(n, received=T0 + 30, taken=T0 + 30) for n in "abc"]
    old_d = view("d", received=T0, taken=T0)
    changes = alarms.evaluate([*fresh, old_d], frames, T0 + 30)
    assert not [t for t in changes if t.alarm.rule == "cpu_off"], [(t.change, t.alarm.subject) for t in changes]
    # The same node with a current frame is compared.
    changes = alarms.evaluate([*fresh, view("d", received=T0 + 30, taken=T0 + 30)], frames, T0 + 30)
    assert [(t.change, t.alarm.subject) for t in changes if t.alarm.rule == "cpu_off"] == [("pending", "node:d")]
