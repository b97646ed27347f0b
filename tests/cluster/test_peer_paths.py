"""Peer paths on the dashboard side: the summary's figures, the worst path, the why line, the link matrix."""

from __future__ import annotations

from msgspec.structs import replace

import pytest

from rigmon.cluster.incident import path_trouble, problems, rtt
from rigmon.cluster.link_matrix import link_matrix
from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.store import ClusterStore
from rigmon.summary import (
    PathCell,
    WorstWindow,
    path_figures,
    path_rank,
    summarize,
    worst_path,
)
from rigmon.schema import PeerPathReading, Readings
from tests.alarms.helpers import FakeClock
from tests.tui.snapshot_apps.peer_paths import SILENT_FROM, cluster_frames


def reading(peer: str, path: str, state: str = "ok", p99: float | None = 10.0, loss: float | None = 0.0,
            age: float | None = 0.1) -> PeerPathReading:
    return PeerPathReading(name=f"{peer}/{path}", peer=peer, path=path, address="10.0.0.2", state=state,  # type: ignore[arg-type]
                           rtt_p99_us=p99, loss_pct=loss, last_reply_age_s=age, link_gbps=40.0)


def test_no_peer_paths_means_no_figures() -> None:
    assert path_figures(Readings()) is None
    assert summarize(cluster_frames("node01")[0]).paths is not None


def test_path_figures_count_and_pick_the_worst() -> None:
    figures = path_figures(Readings(peer_paths=(
        reading("node02", "roce", p99=8.0), reading("node03", "roce", "degraded", p99=1840.0, loss=2.0),
        reading("node02", "mgmt", p99=450.0), reading("node02", "tbnet", "silent", p99=None, loss=100.0, age=12.0),
    )))
    assert figures is not None
    assert (figures.silent, figures.degraded, len(figures.paths)) == (1, 1, 4)
    assert figures.worst is not None and figures.worst.name == "node02/tbnet"
    assert figures.paths[0] == PathCell("node02/roce", "node02", "roce", "ok", 8.0, 0.0, 40.0, 0.1)


@pytest.mark.parametrize(("cells", "worst"), [
    # Silent is worst of all, whatever the others' round trips.
    ((PathCell("a/x", "a", "x", "ok", 900.0), PathCell("b/x", "b", "x", "silent")), "b/x"),
    # Then degraded over ok, even at a lower p99 (a loss-degraded RDMA path under a healthy TCP one).
    ((PathCell("a/x", "a", "x", "ok", 900.0), PathCell("b/x", "b", "x", "degraded", 20.0, 5.0)), "b/x"),
    # Among equals the highest p99, then the highest loss.
    ((PathCell("a/x", "a", "x", "ok", 9.0), PathCell("b/x", "b", "x", "ok", 450.0)), "b/x"),
    ((PathCell("a/x", "a", "x", "degraded", 9.0, 1.0), PathCell("b/x", "b", "x", "degraded", 9.0, 3.0)), "b/x"),
    # A path without a figure yet is no worse than one with.
    ((PathCell("a/x", "a", "x", "unknown"), PathCell("b/x", "b", "x", "ok", 5.0)), "b/x"),
])
def test_worst_path_ordering(cells: tuple[PathCell, ...], worst: str) -> None:
    found = worst_path(cells)
    assert found is not None and found.name == worst
    found = worst_path(tuple(reversed(cells)))
    assert found is not None and found.name == worst
    assert path_rank(cells[1]) > path_rank(cells[0])


def test_a_silent_path_stays_the_worst_for_the_window() -> None:
    window = WorstWindow(60.0)
    frames = cluster_frames("node01", SILENT_FROM + 1)
    for frame in frames:
        last = window.add(summarize(frame))
    assert last.path_worst is not None and last.path_worst.state == "silent"
    # The link answers again: the row keeps the silent path for 60 s, then shows the round trip.
    healthy = cluster_frames("node01", SILENT_FROM - 1)[-1]
    at = frames[-1].taken_at
    for step in (1, 30, 59):
        later = window.add(replace(summarize(healthy), taken_at=at + step))
        assert later.path_worst is not None and later.path_worst.state == "silent", step
        assert later.paths is not None and later.paths.silent == 0
    after = window.add(replace(summarize(healthy), taken_at=at + 61))
    assert after.path_worst is not None and after.path_worst.state == "ok"


def test_the_why_line_names_a_silent_path_and_whether_the_peer_answers_http() -> None:
    summary = WorstWindow().add(summarize(cluster_frames("node01", SILENT_FROM + 11)[-1]))
    found = path_trouble(summary)
    assert [(p.level, p.text, p.subject) for p in found] == [("bad", "tbnet to node02 silent 12 s", "peer:node02/tbnet")]
    assert path_trouble(summary, frozenset({"node02"}))[0].text == "tbnet to node02 silent 12 s, HTTP up"


def test_the_why_line_names_a_degraded_path_and_one_that_was_silent() -> None:
    summary = WorstWindow().add(summarize(cluster_frames("node03")[-1]))
    assert [p.text for p in path_trouble(summary)] == ["roce to node04 p99 1.8 ms, loss 2%"]
    window = WorstWindow()
    window.add(summarize(cluster_frames("node01", SILENT_FROM + 2)[-1]))
    healthy = cluster_frames("node01", SILENT_FROM - 1)[-1]
    now = window.add(replace(summarize(healthy), taken_at=healthy.taken_at + 10))
    assert [(p.level, p.text) for p in path_trouble(now)] == [("warn", "tbnet to node02 silent within 60 s")]


def test_problems_put_a_silent_path_with_the_bad_ones() -> None:
    frame = cluster_frames("node01", SILENT_FROM + 3)[-1]
    summary = WorstWindow().add(summarize(frame))
    found = problems(frame, summary)
    assert found and found[0].level == "bad" and found[0].subject == "peer:node02/tbnet"


@pytest.mark.parametrize(("us", "text"), [(5.84, "5.8 µs"), (11.2, "11 µs"), (850.0, "850 µs"), (999.6, "1.0 ms"),
                                           (1840.0, "1.8 ms"), (35_000.0, "35 ms")])
def test_round_trips_are_written_short(us: float, text: str) -> None:
    assert rtt(us) == text


def store_with(clock: FakeClock, cluster: ClusterStore, node: str, count: int) -> NodeStore:
    store = cluster.add(f"http://{node}:9871", f"http://{node}:9871")
    store.add_frames(cluster_frames(node, count))
    return store


def test_the_matrix_from_frames_has_one_block_per_path() -> None:
    clock = FakeClock()
    cluster = ClusterStore(clock)
    for node in ("node01", "node02", "node03", "node04"):
        store_with(clock, cluster, node, SILENT_FROM + 2)
    matrix = link_matrix(cluster.views())
    assert matrix.peers == ("node01", "node02", "node03", "node04")
    assert matrix.paths == ("mgmt", "roce", "tbnet")
    assert [(r.path, r.node) for r in matrix.rows][:5] == [
        ("mgmt", "node01"), ("mgmt", "node02"), ("mgmt", "node03"), ("mgmt", "node04"), ("roce", "node01")]
    # Only node01 and node02 have a tbnet path; each row lacks itself.
    tbnet = [r for r in matrix.rows if r.path == "tbnet"]
    assert [r.node for r in tbnet] == ["node01", "node02"]
    assert tbnet[0].cells[0] is None and tbnet[0].cells[2] is None
    assert tbnet[0].cells[1] is not None and tbnet[0].cells[1].state == "silent"
    slow = next(r for r in matrix.rows if (r.path, r.node) == ("roce", "node03"))
    assert slow.cells[3] is not None and slow.cells[3].state == "degraded" and slow.cells[3].rtt_p99_us == 1840.0
    assert slow.link_gbps == (100.0, 100.0)
    assert matrix.peer_states == {n: "live" for n in matrix.peers}


def test_the_matrix_keeps_a_stale_node_s_last_figures_and_says_so() -> None:
    clock = FakeClock()
    cluster = ClusterStore(clock)
    store_with(clock, cluster, "node01", 5)
    clock.t += 30
    store_with(clock, cluster, "node02", 5)
    matrix = link_matrix(cluster.views())
    rows = {(r.path, r.node): r for r in matrix.rows}
    assert rows[("roce", "node01")].state == "stale"
    assert rows[("roce", "node02")].state == "live"
    assert matrix.peer_states["node01"] == "stale"
    # Peers the dashboard does not follow are columns without a state.
    assert "node03" in matrix.peers and "node03" not in matrix.peer_states


def test_http_up_needs_the_peer_live_on_the_dashboard() -> None:
    clock = FakeClock()
    cluster = ClusterStore(clock)
    one = store_with(clock, cluster, "node01", SILENT_FROM + 2)
    assert cluster.peers_up(one) == frozenset()  # node02 is not followed
    two = store_with(clock, cluster, "node02", SILENT_FROM + 2)
    assert cluster.peers_up(one) == frozenset({"node02"})
    views = {v.name: v for v in cluster.views()}
    assert views["node01"].problems[0].text.endswith(", HTTP up")
    clock.t += 30
    two.failed("connection refused")
    store_with(clock, cluster, "node03", 2)  # keeps the clock's node fresh; node01 and node02 are old now
    assert cluster.peers_up(one) == frozenset()


def test_the_agent_s_peer_path_alarm_is_not_listed_twice() -> None:
    from tests.tui.snapshot_apps.fake_agent import make_alarm

    frame = cluster_frames("node01", SILENT_FROM + 3)[-1]
    summary = WorstWindow().add(summarize(frame))
    alarm = make_alarm("node01", 1, "peer_path_silent", "critical", "peer:node02/tbnet",
                       "path node02/tbnet answers no probe")
    found = problems(frame, summary, (alarm,))
    assert [p.subject for p in found].count("peer:node02/tbnet") == 1
    assert not any("answers no probe" in p.text for p in found)
