"""Cluster rules as the dashboard runs them (stores on an injected clock), the alarm board, critical news."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

import pytest
from msgspec.structs import replace

from rigmon.alarms.cluster import DEFAULT_PEER_CHECKS, ClusterAlarms, alarm_node_key
from rigmon.cluster.alarm_board import AlarmRow, AlarmTracker, CriticalWatch, board_view, group_rows
from rigmon.cluster.alarm_events import ended_by_restart
from rigmon.cluster.store import PEER_CHECK_EVERY_S, ClusterStore
from rigmon.schema import Alarm, AlarmList, Event
from tests.tui.snapshot_apps.fake_agent import FakeClock, make_alarm, make_frame


@dataclass
class Node:
    """How one simulated node behaves in a case."""

    name: str
    cpu_pct: float = 30.0
    clock_offset_s: float = 0.0
    refused: bool = False
    silent_after_s: float | None = None


@dataclass
class Case:
    name: str
    nodes: list[Node]
    run_s: int
    expected: dict[str, str] = field(default_factory=dict)
    """``"node/rule"`` -> state of the active cluster alarm; every other is inactive."""


CASES = [
    Case("all well", [Node("n1"), Node("n2"), Node("n3")], 200),
    Case("refused, pending within the hold", [Node("n1"), Node("n2", refused=True)], 8,
         {"n2/node_unreachable": "pending"}),
    Case("refused, critical after 10 s", [Node("n1"), Node("n2", refused=True)], 12,
         {"n2/node_unreachable": "firing"}),
    Case("connected but silent is stale", [Node("n1"), Node("n2", silent_after_s=5)], 17,
         {"n2/node_stale": "firing"}),
    Case("silent for less than 10 s is not stale", [Node("n1"), Node("n2", silent_after_s=5)], 14, {}),
    Case("one clock 5 s ahead of three", [Node("n1"), Node("n2"), Node("n3", clock_offset_s=5.0)], 40,
         {"n3/clock_skew": "firing"}),
    Case("skew under 2 s is fine", [Node("n1"), Node("n2"), Node("n3", clock_offset_s=1.5)], 40, {}),
    Case("two nodes skewed: both flagged", [Node("n1"), Node("n2", clock_offset_s=-4.0)], 40,
         {"n1/clock_skew": "firing", "n2/clock_skew": "firing"}),
    Case("one CPU far from its peers", [Node("n1", cpu_pct=20), Node("n2", cpu_pct=25), Node("n3", cpu_pct=90)],
         130, {"n3/cpu_far_from_peers": "firing"}),
    Case("far CPU still within its hold", [Node("n1", cpu_pct=20), Node("n2", cpu_pct=25), Node("n3", cpu_pct=90)],
         60, {"n3/cpu_far_from_peers": "pending"}),
    Case("two nodes never make a peer verdict", [Node("n1", cpu_pct=20), Node("n3", cpu_pct=90)], 130, {}),
]


def run_case(case: Case) -> ClusterStore:
    clock = FakeClock()
    cluster = ClusterStore(clock)
    rng = random.Random(1)
    for node in case.nodes:
        # Without a port, a node never reached is named like one that answered.
        cluster.add(node.name, f"http://{node.name}")
    for second in range(1, case.run_s + 1):
        clock.advance(1)
        for node in case.nodes:
            store = cluster.nodes[node.name]
            if node.refused:
                store.failed("cannot connect: connection refused")
                continue
            if node.silent_after_s is not None and second > node.silent_after_s:
                continue
            frame = make_frame(node.name, f"{node.name}-run1", second, rng)
            host = replace(frame.readings.host, cpu_pct=node.cpu_pct)  # type: ignore[type-var]
            store.add_frames([replace(frame, taken_at=clock.time() + node.clock_offset_s,
                                      readings=replace(frame.readings, host=host))])
        cluster.evaluate_alarms()
    return cluster


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cluster_rules_as_the_dashboard_runs_them(case: Case) -> None:
    cluster = run_case(case)
    active = {f"{a.node}/{a.rule}": a.state for a in cluster.rules.active()}
    assert active == case.expected


def test_unreachable_is_critical_and_counts_on_the_cluster_screen() -> None:
    cluster = run_case(CASES[2])
    (alarm,) = cluster.rules.active()
    assert alarm.severity == "critical" and alarm.subject == "node:n2" and "connection refused" in alarm.message
    views = {v.name: v for v in cluster.views()}
    assert views["n2"].summary is None  # no frame ever: nothing to attach a count to
    skewed = run_case(CASES[5])
    counts = {v.name: v.summary.alarms for v in skewed.views() if v.summary is not None}
    assert counts == {"n1": None, "n2": None, "n3": 1}


def test_node_alarms_and_cluster_alarms_share_the_count_and_the_board() -> None:
    cluster = run_case(CASES[5])
    store = cluster.nodes["n3"]
    store.set_alarms(AlarmList(node="n3", control=True, active=(
        make_alarm("n3", 1, "gpu_lost", "critical", "gpu:3", "GPU 3 lost"),
        make_alarm("n3", 2, "psu_rail_low_warning", "warning", "psu", "rail low", state="pending"),
    ), recent=(make_alarm("n3", 0, "psu_rail_low_critical", "critical", "psu", "rail 11.3 V", resolved=True),)))
    cluster.nodes["n1"].alarms_failed("HTTP 404: alarms are not enabled on this agent")
    counts = {v.name: v.summary.alarms for v in cluster.views() if v.summary is not None}
    assert counts["n3"] == 2  # gpu_lost and clock_skew firing; the pending one does not count
    board = board_view(cluster)
    assert [(r.node, r.source, r.alarm.rule) for r in board.active] == [
        ("n3", "node", "gpu_lost"), ("n3", "cluster", "clock_skew"), ("n3", "node", "psu_rail_low_warning")]
    assert board.active[1].key == "n3"
    assert [r.alarm.rule for r in board.recent] == ["psu_rail_low_critical"]
    assert board.firing == {"critical": 1, "warning": 1}
    assert board.errors == {"n1": "HTTP 404: alarms are not enabled on this agent"}


def row(node: str, n: int, severity: str = "critical", state: str = "firing", source: str = "node") -> AlarmRow:
    return AlarmRow(node, node, source, make_alarm(node, n, f"rule{n}", severity, "s", "m", state=state))  # type: ignore[arg-type]


def test_critical_news_once_each_and_not_for_what_was_firing_at_first_sight() -> None:
    watch = CriticalWatch()
    assert watch.news([row("a", 1)], listed_keys=["a"]) == []  # already firing when the dashboard started
    assert watch.news([row("a", 1), row("a", 2)], listed_keys=["a"]) == [row("a", 2)]
    assert watch.news([row("a", 1), row("a", 2)], listed_keys=["a"]) == []
    assert watch.news([row("a", 3, severity="warning"), row("a", 4, state="pending")], ["a"]) == []
    assert watch.news([row("b", 5, source="cluster")], ["a"]) == [row("b", 5, source="cluster")]
    # Resolved, then firing again under a new id: news again.
    assert watch.news([], ["a"]) == []
    assert watch.news([row("a", 6)], ["a"]) == [row("a", 6)]
    # The same alarm (id, rule, subject and start) back on the list after a gap (a replay sought
    # back before it and over it again) was announced already.
    assert watch.news([], ["a"]) == []
    assert watch.news([row("a", 2), row("a", 6)], ["a"]) == []


def event(n: int, kind: str, at: float, message: str, **data: object) -> Event:
    return Event(id=f"r-{n}", at=at, kind=kind, severity="critical" if kind == "alarm_firing" else "info",
                 subject="gpu:3", message=message, data=data)  # type: ignore[arg-type]


def test_tracker_rebuilds_alarms_from_their_events() -> None:
    tracker = AlarmTracker("node01")
    ident = {"alarm_id": "r-a1", "rule": "gpu_lost", "severity": "critical"}
    tracker.apply(event(1, "alarm_firing", 100.0, "gpu_lost firing: GPU 3 lost", state="firing", value="lost", **ident))
    tracker.apply(event(2, "gpu_lost", 100.0, "not an alarm event"))
    (alarm,) = tracker.alarm_list().active
    assert (alarm.rule, alarm.severity, alarm.state, alarm.message, alarm.fired_at, alarm.value) == (
        "gpu_lost", "critical", "firing", "GPU 3 lost", 100.0, "lost")
    tracker.apply(event(3, "alarm_acknowledged", 105.0, "gpu_lost acknowledged: GPU 3 lost", **ident))
    assert tracker.alarm_list().active[0].acknowledged_at == 105.0
    tracker.apply(event(4, "alarm_resolved", 110.0, "gpu_lost resolved: GPU 3 lost", state="resolved", **ident))
    listed = tracker.alarm_list()
    assert listed.active == () and listed.recent[0].resolved_at == 110.0 and listed.recent[0].fired_at == 100.0
    assert not listed.control



def test_an_incidents_alarms_are_one_row_and_separate_episodes_are_not() -> None:
    def alarm(n: int, rule: str, severity: str, subject: str, start: float, end: float | None = None,
              kind: str = "threshold") -> AlarmRow:
        a = Alarm(id=f"a{n}", rule=rule, rule_kind=kind, severity=severity, node="n1", subject=subject,  # type: ignore[arg-type]
                  state="resolved" if end is not None else "firing", message=f"{rule} message", started_at=start,
                  updated_at=start, fired_at=start, resolved_at=end)
        return AlarmRow("k", "n1", "node", a)

    rows = [alarm(1, "rail_warning", "warning", "psu", 10.0), alarm(2, "rail_critical", "critical", "psu", 12.0),
            alarm(3, "xid", "critical", "gpu:3", 15.0, kind="event"), alarm(4, "gpu_lost", "critical", "gpu:3", 15.1),
            alarm(5, "pcie", "warning", "gpu:2", 1.0)]
    grouped = group_rows(rows)
    assert [(r.alarm.rule, [a.rule for a in r.also]) for r in grouped] == [
        ("rail_critical", ["rail_warning"]), ("gpu_lost", ["xid"]), ("pcie", [])]
    assert grouped[0].message == "rail_critical message (a warning since 00:00:10 UTC)"
    assert grouped[1].message == "gpu_lost message; xid message"
    # Resolved: two episodes of one subject that did not overlap stay two rows.
    old = [alarm(6, "rail_warning", "warning", "psu", 0.0, 5.0), alarm(7, "rail_warning", "warning", "psu", 9.0, 20.0)]
    assert len(group_rows(old)) == 2


def test_a_replayed_rail_escalation_reads_as_one_alarm() -> None:
    def alarm(n: int, rule: str, severity: str, start: float) -> AlarmRow:
        a = Alarm(id=f"a{n}", rule=rule, rule_kind="replay", severity=severity, node="n1", subject="psu",  # type: ignore[arg-type]
                  state="firing", message=f"{rule} text", started_at=start, updated_at=start, fired_at=start)
        return AlarmRow("k", "n1", "node", a)

    (row,) = group_rows([alarm(1, "psu_rail_low_warning", "warning", 0.0),
                         alarm(2, "psu_rail_low_critical", "critical", 5.0)])
    assert row.message == "psu_rail_low_critical text (a warning since 00:00:00 UTC)"


def test_two_agents_sharing_a_name_keep_their_own_cluster_alarms() -> None:
    """Two agents that both call themselves gpu01 (a cloned image): the one that stops answering
    alarms, and its alarm is on its own row and board key only, not on the live one."""
    clock = FakeClock()
    cluster = ClusterStore(clock)
    rng = random.Random(1)
    live, dead = "http://10.0.0.1:9120", "http://10.0.0.2:9120"
    for key in (live, dead):
        cluster.add(key, key)
    for second in range(1, 31):
        clock.advance(1)
        cluster.nodes[live].add_frames([replace(make_frame("gpu01", "run-a", second, rng), taken_at=clock.time())])
        if second <= 5:
            cluster.nodes[dead].add_frames([replace(make_frame("gpu01", "run-b", second, rng),
                                                    taken_at=clock.time())])
        else:
            cluster.nodes[dead].failed("cannot connect: connection refused")
        cluster.evaluate_alarms()
    (alarm,) = cluster.rules.active()
    assert alarm.rule == "node_unreachable" and alarm.state == "firing"
    assert dead in alarm.message
    views = {v.key: v for v in cluster.views()}
    assert views[dead].summary is not None and views[dead].summary.alarms == 1
    assert views[live].summary is not None and views[live].summary.alarms is None
    board = board_view(cluster)
    assert [(r.key, r.alarm.rule) for r in board.active] == [(dead, "node_unreachable")]


def test_a_peer_outlier_on_one_of_two_agents_sharing_a_name_is_not_reported_on_the_other() -> None:
    """The cluster rules know each node by its key (URL): a CPU far from its peers on one gpu01 is that
    agent's alarm only, and it stays the same alarm (same id) when a second gpu01 joins the dashboard
    and the names the rules' messages use change."""
    clock = FakeClock()
    check = dataclasses.replace(DEFAULT_PEER_CHECKS[2], hold_s=0.0)
    cluster = ClusterStore(clock, rules=lambda: ClusterAlarms(peer_checks=[check]))
    rng = random.Random(3)
    busy, idle = "http://10.0.0.1:9120", "http://10.0.0.2:9120"
    agents = {"http://10.0.0.3:9120": ("n3", 95.0), "http://10.0.0.4:9120": ("n4", 96.0),
              "http://10.0.0.5:9120": ("n5", 94.0), idle: ("gpu01", 5.0), busy: ("gpu01", 97.0)}

    def tick(keys: list[str]) -> None:
        clock.advance(PEER_CHECK_EVERY_S)
        for key in keys:
            name, cpu = agents[key]
            frame = make_frame(name, f"{name}-{key}", int(clock.time()), rng)
            host = replace(frame.readings.host, cpu_pct=cpu)  # type: ignore[type-var]
            cluster.nodes[key].add_frames([replace(frame, taken_at=clock.time(),
                                                   readings=replace(frame.readings, host=host))])
        cluster.evaluate_alarms()

    for key in agents:
        cluster.add(key, key)
    tick([k for k in agents if k != busy])  # the busy gpu01 has sent nothing yet
    (alarm,) = cluster.rules.active()
    assert (alarm.rule, alarm_node_key(alarm), alarm.node) == ("cpu_far_from_peers", idle, "gpu01")
    tick(list(agents))
    tick(list(agents))
    (still,) = cluster.rules.active()
    assert still.id == alarm.id and alarm_node_key(still) == idle
    views = {v.key: v for v in cluster.views()}
    assert views[idle].summary is not None and views[idle].summary.alarms == 1
    assert views[busy].summary is not None and views[busy].summary.alarms is None
    assert cluster.cluster_alarms_of(busy) == () and cluster.cluster_alarms_of(idle) == (still,)
    assert [(r.key, r.alarm.rule) for r in board_view(cluster).active] == [(idle, "cpu_far_from_peers")]


def test_a_dead_node_s_alarms_are_as_of_the_newer_of_its_last_fetch_and_its_last_alarm_event() -> None:
    # Before: "firing as of" the last fetch, though a frame after it had brought the alarm's firing.
    clock = FakeClock()
    cluster = ClusterStore(clock)
    store = cluster.add("n1", "http://n1")
    rng = random.Random(2)
    store.add_frames([make_frame("n1", "n1-run1", 1, rng)])
    pending = make_alarm("n1", 1, "gpu_lost", "critical", "gpu:3", "GPU 3 lost", state="pending")
    store.set_alarms(AlarmList(node="n1", active=(pending,), recent=()))
    fetched_at = clock.time()
    clock.advance(5)
    firing = Event(id="n1-run1-e1", at=clock.time(), kind="alarm_firing", severity="critical", subject="gpu:3",
                   message="gpu_lost firing: GPU 3 lost",
                   data={"alarm_id": pending.id, "rule": "gpu_lost", "severity": "critical", "state": "firing"})
    store.add_frames([replace(make_frame("n1", "n1-run1", 2, rng), events=(firing,))])
    heard_at = clock.time()
    clock.advance(1)
    store.add_frames([make_frame("n1", "n1-run1", 3, rng)])  # no alarm news: not newer word on them
    clock.advance(30)
    store.failed("cannot connect: connection refused")
    (node_row,) = [r for r in board_view(cluster).active if r.source == "node"]
    assert node_row.alarm.state == "firing"
    assert (node_row.as_of, node_row.as_of_why) == (heard_at, "node unreachable")
    assert heard_at > fetched_at
    # A later fetch is newer again.
    clock.advance(1)
    store.set_alarms(AlarmList(node="n1", active=(replace(pending, state="firing"),), recent=()))
    store.alarms_failed("timed out")
    (node_row,) = [r for r in board_view(cluster).active if r.source == "node"]
    assert node_row.as_of == clock.time()


def test_an_incident_ended_by_a_restart_says_why_once() -> None:
    # Before: "GPU 3 is lost (fell off the bus) (agent restarted without it); Xid 79 on GPU 3: GPU has
    # fallen off the bus (agent restarted without it)", the reason once per alarm of the row.
    def row(n: int, rule: str, message: str, restarted: bool = True) -> AlarmRow:
        a = Alarm(id=f"a{n}", rule=rule, rule_kind="state", severity="critical", node="n1", subject="gpu:3",
                  state="firing", message=message, started_at=10.0 + n, updated_at=10.0 + n, fired_at=10.0 + n)
        return AlarmRow("k", "n1", "node", ended_by_restart(a, 100.0) if restarted else a)

    lost = row(1, "gpu_lost", "GPU 3 is lost (fell off the bus)")
    (grouped,) = group_rows([lost, row(2, "gpu_xid_fatal", "Xid 79 on GPU 3: GPU has fallen off the bus")])
    assert grouped.message == ("GPU 3 is lost (fell off the bus); Xid 79 on GPU 3: GPU has fallen off the bus"
                               " (agent restarted without it)")
    # Said of one alarm only, it stays with that alarm.
    (grouped,) = group_rows([lost, row(2, "gpu_xid_fatal", "Xid 79", restarted=False)])
    assert grouped.message == "Xid 79; GPU 3 is lost (fell off the bus) (agent restarted without it)"


def test_an_incidents_row_leads_with_the_alarm_that_has_a_reading() -> None:
    # Before: the ADC's latch, a flag that started a moment before the rail critical, led the row:
    # "the rail ADC's under-voltage comparator latched ...; 12 V rail minimum ...", cut at 80 columns
    # before any figure said how low the rail went.
    latch = replace(make_alarm("n1", 1, "psu_rail_undervoltage_latched", "critical", "psu",
                               "the rail ADC's under-voltage comparator latched", at=100.0), rule_kind="state", value=True)
    low = replace(make_alarm("n1", 2, "psu_rail_low_critical", "critical", "psu",
                             "12 V rail minimum 11.255 V is below 11.5 V", at=100.4), value=11.255)
    (row,) = group_rows([AlarmRow("k", "n1", "node", latch), AlarmRow("k", "n1", "node", low)])
    assert row.alarm.rule == "psu_rail_low_critical"
    assert row.message.startswith("12 V rail minimum 11.255 V is below 11.5 V; the rail ADC's")


def test_the_alarms_of_two_agents_of_one_name_say_which_agent() -> None:
    # Before: both rows read "node01" (only the cluster rules' alarms said "node01 (http://...)"), so a
    # dead node01's GPU loss could not be told from the live node01's.
    cluster = ClusterStore(FakeClock())
    rng = random.Random(3)
    for n, url in enumerate(("http://10.0.0.1:9871", "http://10.0.0.2:9871"), 1):
        store = cluster.add(url, url)
        store.add_frames([make_frame("node01", f"run{n}", 1, rng)])
        store.set_alarms(AlarmList(node="node01", active=(make_alarm("node01", n, "gpu_lost", "critical", "gpu:3",
                                                                     "GPU 3 is lost"),), recent=()))
    assert sorted(r.node for r in board_view(cluster).active) == [
        "node01 (http://10.0.0.1:9871)", "node01 (http://10.0.0.2:9871)"]
    # A name of its own is left as it is.
    node02 = cluster.add("http://10.0.0.3:9871", "http://10.0.0.3:9871")
    node02.add_frames([make_frame("node02", "run3", 1, rng)])
    node02.set_alarms(AlarmList(node="node02", active=(
        make_alarm("node02", 3, "gpu_lost", "critical", "gpu:1", "GPU 1 is lost"),), recent=()))
    assert "node02" in [r.node for r in board_view(cluster).active]
