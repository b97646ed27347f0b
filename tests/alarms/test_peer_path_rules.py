"""Default rules on latency probes: a silent path is critical, a slow or lossy path a warning."""

from __future__ import annotations

from typing import Any

from tests.alarms.helpers import Step, default, run


def path(state: str = "ok", **kw: Any) -> dict[str, Any]:
    base = {"name": "node02/tbnet", "peer": "node02", "path": "tbnet", "address": "10.0.0.2", "transport": "udp", "state": state,
            "window_s": 10.0, "sent": 100, "received": 100, "loss_pct": 0.0, "rtt_p50_us": 40.0,
            "rtt_p99_us": 90.0, "p99_limit_us": 1000.0, "loss_limit_pct": 2.0, "p99_over_limit": False,
            "loss_over_limit": False, "key_mismatch": False, "peer_flooded": False, "rdma_port_down": False,
            "peer_rdma_port_down": False}
    return {**base, **kw}


def steps(*paths: dict[str, Any], every_s: float = 5.0) -> list[Step]:
    return [Step(i * every_s, {"peer_paths": [p]}) for i, p in enumerate(paths)]


def test_a_silent_path_is_critical_at_once() -> None:
    engine, seen = run(default("peer_path_silent"), steps(path(), path("silent", received=0, loss_pct=100.0)))
    assert seen == [(5.0, "firing", "peer:node02/tbnet")]
    (alarm,) = engine.active()
    assert alarm.severity == "critical"
    # Before: "path node02/tbnet stopped answering probes" (where to, and what to check, unsaid).
    assert alarm.message == ("path node02/tbnet stopped answering probes to 10.0.0.2 (udp), 100 sent in 10 s: "
                             "check the peer's agent runs, its probe port is open to this node, and the link "
                             "(a thunderbolt-net lockup, a switch port)")


def test_an_outage_of_a_few_seconds_is_one_prompt_critical_alarm() -> None:
    """A path drops everything for 4 s (sampled every second): silent once 2 s of probes in a row are
    lost (the window still holds replies), then its losses stay in the window for 10 s after it is
    back. One alarm, at once: peer_path_silent; the loss after it is not a second one."""
    outage = path("silent", received=80, loss_pct=20.0)
    after = path("degraded", received=60, loss_pct=40.0, loss_over_limit=True)
    engine, seen = run(default("peer_path_silent", "peer_path_p99_high", "peer_path_loss"),
                       steps(path(), path(), path("degraded", received=90, loss_pct=10.0, loss_over_limit=True),
                             outage, outage, *[after] * 10, *[path()] * 5, every_s=1.0))
    assert [s for s in seen if s[1] == "firing"] == [(3.0, "firing", "peer:node02/tbnet")], seen
    assert [(a.rule, a.state) for a in engine.active()] == [("peer_path_silent", "firing")]


def test_p99_above_the_limit_for_ten_seconds_warns() -> None:
    slow = path("degraded", rtt_p99_us=2600.0, rtt_p50_us=2100.0, p99_over_limit=True)
    engine, seen = run(default("peer_path_p99_high"), steps(path(), slow, slow, slow))
    assert seen == [(5.0, "pending", "peer:node02/tbnet"), (15.0, "firing", "peer:node02/tbnet")]
    (alarm,) = engine.active()
    # Before: "... above its limit (the peer_path_degraded event has the figures)".
    assert alarm.message.startswith("path node02/tbnet: p99 2600 us round trip, above its limit 1000 us (p50 2100 us):")


def test_loss_above_the_limit_for_fifteen_seconds_warns_and_a_healthy_path_never_does() -> None:
    lossy = path("degraded", received=95, loss_pct=5.0, loss_over_limit=True)
    engine, seen = run(default("peer_path_loss"), steps(path(), lossy, lossy, lossy, lossy))
    assert seen == [(5.0, "pending", "peer:node02/tbnet"), (20.0, "firing", "peer:node02/tbnet")]
    # Before: "path node02/tbnet loses more probes than its limit (the peer_path_degraded event has the figures)".
    assert engine.active()[0].message.startswith(
        "path node02/tbnet loses 5.0% of probes to 10.0.0.2 (95 of 100 answered in 10 s), above its limit 2%: check")
    _, quiet = run(default("peer_path_silent", "peer_path_p99_high", "peer_path_loss"), steps(*[path()] * 10))
    assert quiet == []


def test_a_path_silent_for_a_key_mismatch_says_key_mismatch_not_silent() -> None:
    """The peer holds another probe key: it refuses this node's probes (bad MAC) and this node refuses
    its. The path reads silent, but the alarm says why: key mismatch, not a path that stopped answering."""
    mismatch = path("silent", received=0, loss_pct=100.0, key_mismatch=True)
    engine, seen = run(default("peer_path_silent", "peer_path_key_mismatch"), steps(path(), mismatch, mismatch))
    assert seen == [(5.0, "firing", "peer:node02/tbnet")]
    (alarm,) = engine.active()
    assert (alarm.rule, alarm.severity) == ("peer_path_key_mismatch", "critical")
    assert alarm.message.startswith("path node02/tbnet: key mismatch")


def test_a_path_silent_while_the_peer_says_its_port_is_flooded_raises_no_critical_alarm() -> None:
    """The peer's replies say its probe port is flooded: the path's silence is the flood's, which the
    peer alarms on (probe_port_flooded); no critical "stopped answering". Once the window holds no such
    reply and the path is still silent, or on a path whose peer says nothing of a flood, it fires."""
    drowned = path("silent", received=40, loss_pct=60.0, peer_flooded=True)
    still_silent = path("silent", received=0, loss_pct=100.0)
    engine, seen = run(default("peer_path_silent", "peer_path_key_mismatch", "peer_path_loss"),
                       steps(path(), drowned, drowned, drowned, still_silent))
    assert seen == [(20.0, "firing", "peer:node02/tbnet")]
    (alarm,) = engine.active()
    assert (alarm.rule, alarm.severity) == ("peer_path_silent", "critical")
    _, beside = run(default("peer_path_silent"), [Step(5.0 * i, {"peer_paths": [
        drowned, {**still_silent, "name": "node03/tbnet", "peer": "node03"}]}) for i in range(2)])
    assert beside == [(0.0, "firing", "peer:node03/tbnet")]


def test_a_flooded_probe_port_warns_on_the_flooded_node() -> None:
    def frame(flooded: bool) -> dict[str, Any]:
        return {"probe_responder": {"address": "0.0.0.0:9872", "flooded": flooded, "flood_from": "10.0.0.66"}}

    engine, seen = run(default("probe_port_flooded"), [Step(i * 5.0, frame(f)) for i, f in
                                                       enumerate([False, True, True])])
    assert seen == [(5.0, "firing", "probe_responder")]
    assert "flooded" in engine.active()[0].message


def test_a_path_silent_with_its_rdma_port_down_is_that_ports_alarm_only() -> None:
    """tp-cluster: node01's RoCE port goes down and its roce paths go silent with it. The port's
    rdma_port_down is the one alarm; a roce path still silent once its port is back for a window (the
    collector's rdma_port_down is false again) fires, and so does a silent path on another interface."""
    port = {"name": "mlx5_0/1", "device": "mlx5_0", "port": 1, "link_state": "down", "rate_gbps": 100.0}
    roce = path("silent", name="node02/roce", path="roce", received=0, loss_pct=100.0, interface="enp1s0f0np0",
                rdma_port_down=True)
    mgmt = path("silent", name="node02/mgmt", path="mgmt", received=0, loss_pct=100.0, interface="eth0")
    frames = [{"infiniband": [port], "peer_paths": [roce, mgmt]}] * 3 + [
        {"infiniband": [{**port, "link_state": "ok"}], "peer_paths": [{**roce, "rdma_port_down": False}]}]
    _, seen = run(default("peer_path_silent", "rdma_port_down"), [Step(5.0 * i, f) for i, f in enumerate(frames)])
    assert sorted(seen) == [(0.0, "firing", "peer:node02/mgmt"), (0.0, "firing", "rdma:mlx5_0/1"),
                            (15.0, "firing", "peer:node02/roce")]


def test_an_rdma_path_silent_while_the_peer_says_its_rdma_port_is_down_raises_nothing_here() -> None:
    """node02's roce path to node01 is silent while node01's replies on mgmt say its RDMA port is down: node01's
    rdma_port_down is the alarm; once the window holds no such reply and the path is still silent, it fires."""
    roce = path("silent", name="node01/roce", peer="node01", path="roce", received=0, loss_pct=100.0,
                interface="enp1s0f0np0", peer_rdma_port_down=True)
    _, seen = run(default("peer_path_silent"), steps(roce, roce, {**roce, "peer_rdma_port_down": False}))
    assert seen == [(10.0, "firing", "peer:node01/roce")]
