"""Scenario tp-cluster end to end: real probes through the simulated wire between four real agents.

The slow RoCE path (node02 <-> node03) is reported degraded and alarms, the thunderbolt-net path
(node03 <-> node04) goes silent after 60 simulated seconds while both agents' HTTP answers and
alarms critical, and the healthy paths are ok.
"""

from __future__ import annotations

import asyncio
import time
from statistics import median

import httpx

from rigmon.clock import SystemClock
from rigmon.cluster.client import AgentClient
from rigmon.cluster.link_matrix import LinkMatrix, link_matrix
from rigmon.cluster.store import ClusterStore, NodeView
from rigmon.schema import Frame, PeerPathReading
from rigmon.sim.rig import running_rig
from rigmon.sim.scenarios.tp_cluster import SLOW_DELAY_US, TBNET_SILENT_FROM_S
from tests.sim.test_scenario_alarms import fired_rules

#: The simulator gives the agents probe windows of 10 simulated seconds: 2.5 s at this speed.
SPEED = 4.0
DEADLINE_S = 60.0


def paths(frame: Frame | None) -> dict[str, PeerPathReading]:
    return {} if frame is None else {p.name: p for p in frame.readings.peer_paths}


async def test_the_slow_path_and_the_silent_path_are_reported_and_alarm() -> None:
    async with running_rig("tp-cluster", 4, base_port=0, speed=SPEED) as rig, \
            httpx.AsyncClient(timeout=10) as client:
        assert rig.wire is not None
        node01, node02, node03, node04 = rig.agents
        slow_seen: list[PeerPathReading] = []
        #: Each healthy path's median round trip and state, window after window (node01 sees only healthy paths).
        healthy_p50: dict[str, list[float]] = {}
        healthy_states: dict[str, list[str]] = {}
        slow_p50: list[float] = []
        deadline = time.monotonic() + DEADLINE_S
        fired: dict[str, set[str]] = {}
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            slow = paths(node02.buffer.latest if node02.buffer else None).get("node03/roce")
            if slow is not None and slow.state == "degraded":
                slow_seen.append(slow)
            if slow is not None and slow.rtt_p50_us is not None:
                slow_p50.append(slow.rtt_p50_us)
            for name, p in paths(node01.buffer.latest if node01.buffer else None).items():
                if p.rtt_p50_us is not None:
                    healthy_p50.setdefault(name, []).append(p.rtt_p50_us)
                if p.state != "unknown":
                    healthy_states.setdefault(name, []).append(p.state)
            fired = await fired_rules(client, rig.urls, per_node=True)
            if {"node02/peer_path_loss", "node03/peer_path_silent", "node04/peer_path_silent"} <= set(fired) \
                    and rig.rig.clock.elapsed() > TBNET_SILENT_FROM_S + 20:
                break
        # The silent path: both ends, while both agents still answer HTTP.
        assert fired.get("node03/peer_path_silent") == {"peer:node04/tbnet"}, fired
        assert fired.get("node04/peer_path_silent") == {"peer:node03/tbnet"}, fired
        for url in rig.urls[2:]:
            assert (await client.get(f"{url}/healthz")).status_code == 200
        tbnet = paths(node03.buffer.latest if node03.buffer else None)["node04/tbnet"]
        assert tbnet.state == "silent" and tbnet.received == 0 and tbnet.sent > 0
        assert tbnet.peer_reachable is True  # node04 still answers on roce and mgmt: the path locked up
        assert tbnet.interface == "thunderbolt0" and tbnet.link_gbps == 40.0
        # The slow path: degraded by its loss, its round trip the wire's 2.5 ms and more.
        assert "peer:node03/roce" in fired.get("node02/peer_path_loss", set()), fired
        assert slow_seen and any(s.loss_over_limit for s in slow_seen)
        assert all(s.rtt_p50_us is not None and s.rtt_p50_us >= SLOW_DELAY_US * 0.7 for s in slow_seen)
        # Healthy paths: ok, and faster than the slow one.
        healthy = paths(node01.buffer.latest if node01.buffer else None)
        assert set(healthy) == set(healthy_states) == {"node02/roce", "node02/mgmt", "node03/roce", "node03/mgmt",
                                                       "node04/roce", "node04/mgmt"}
        for name in healthy:
            # One reply later than the reply timeout (the wire's thread waiting for a CPU) is one lost
            # probe of ~25 in a window: above the 2 % loss limit, so that window reads degraded. A
            # healthy path is ok in most windows and never silent; the slow one (10 % loss) is
            # degraded in ~13 windows of 14, and its alarm fires (above); node01's never do (below).
            states = healthy_states[name]
            assert "silent" not in states and states.count("ok") > len(states) / 2, (name, states)
            # Round trips are real time in one process that runs four agents and the wire: on a busy
            # machine every path reads slower (a whole run's median of 2.2 ms was seen), so a healthy
            # path is compared with the slow one in the same run, which has the wire's 2.5 ms on top.
            assert median(healthy_p50[name]) < median(slow_p50), (name, healthy_p50[name], slow_p50)
            if name.endswith("/roce"):
                # Same kind of path, same overheads: the slow one is a healthy one plus the wire's
                # 2.5 ms (+-0.5), and at least half of that shows between their medians.
                assert median(healthy_p50[name]) + SLOW_DELAY_US / 2 < median(slow_p50), (name, healthy_p50[name],
                                                                                         slow_p50)
        assert not {key for key in fired if key.startswith("node01/peer_path")}, fired
        # The lockup is one alarm per end: the window filling with losses before it is silent is not a second one.
        assert not {key for key in fired if key.endswith("/peer_path_loss") and "tbnet" in str(fired[key])}, fired
        assert node01.config.probes.window_s == 10.0 / SPEED
        responder = node01.buffer.latest.readings.probe_responder if node01.buffer and node01.buffer.latest else None
        assert responder is not None and responder.answered_total > 0
        assert responder.refused_mac_total == responder.refused_peer_total == 0
        # The dashboard's side: the summary records the agents serve put the weak paths in the
        # link matrix and on the node's row.
        # The slow path loses 10 % of its probes at random: a window of ~25 probes loses none about
        # once in 14, and reads ok; a healthy path's window reads degraded now and then (one late
        # reply, above). So the views of up to eight windows are looked at for one in which the
        # slow cell is degraded and node01's (healthy) cells are ok.
        for _ in range(8):
            matrix, views = await dashboard_view(rig.urls)
            row = {(r.path, r.node): r for r in matrix.rows}
            column = {peer: i for i, peer in enumerate(matrix.peers)}
            slow_cell = row[("roce", "node02")].cells[column["node03"]]
            healthy_cells = [c for c in row[("roce", "node01")].cells if c is not None]
            if slow_cell is not None and slow_cell.state == "degraded" and all(c.state == "ok" for c in healthy_cells):
                break
            await asyncio.sleep(10.0 / SPEED)  # the next probe window
        assert not [v for v in views if v.state != "live"], views
        assert slow_cell is not None and slow_cell.state == "degraded", slow_cell
        silent_cell = row[("tbnet", "node03")].cells[column["node04"]]
        assert silent_cell is not None and silent_cell.state == "silent", silent_cell
        assert len(healthy_cells) == 3 and all(c.state == "ok" for c in healthy_cells), healthy_cells
        by_name = {v.name: v for v in views}
        worst = by_name["node03"].summary.path_worst if by_name["node03"].summary else None
        assert worst is not None and (worst.path, worst.peer, worst.state) == ("tbnet", "node04", "silent")


async def dashboard_view(urls: list[str]) -> tuple[LinkMatrix, list[NodeView]]:
    """What the dashboard builds from each agent's last summary records (GET /v1/samples?view=summary)."""
    cluster = ClusterStore(SystemClock())
    for url in urls:
        client = AgentClient(url)
        try:
            info = await client.info()
            latest = await client.latest()
            assert latest is not None
            page = await client.samples(since=max(0, latest.seq - 5), view="summary")
        finally:
            await client.aclose()
        assert page.summaries, url
        store = cluster.add(url, url)
        store.connected(info)
        store.add_summaries(page.summaries)
    views = cluster.views()
    return link_matrix(views), views
