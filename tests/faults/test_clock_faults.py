"""Fault matrix, clocks that differ between nodes: one agent an hour ahead, one a minute behind,
one right. The dashboard client keeps every node live (it times arrivals on its own monotonic
clock, never the node's), orders by seq, and the cluster clock-skew rule names the wrong nodes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from rigmon.agent.agent import Agent
from rigmon.agent.background import BackgroundAgent
from rigmon.alarms.cluster import NodeView, clock_skew
from rigmon.clock import SystemClock
from rigmon.cluster.client import AgentClient, Connected, Sampled
from rigmon.cluster.store import NodeStore, contiguous
from rigmon.config import AgentConfig, AgentSection
from rigmon.sim.tree import write_tree

OFFSETS_S = {"ahead": 3600.0, "behind": -60.0, "right": 0.0}


class SkewedClock(SystemClock):
    def __init__(self, offset_s: float) -> None:
        self.offset_s = offset_s

    def time(self) -> float:
        return time.time() + self.offset_s


async def test_skewed_nodes_stay_live_and_are_named(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/proc/stat": "cpu  1 2 3 4 5 6 7 8 0 0\n"})
    agents = {name: BackgroundAgent(Agent(AgentConfig(agent=AgentSection(node=name, root=str(tmp_path),
                                                                         interval_s=0.05)),
                                          clock=SkewedClock(offset), collectors={}))
              for name, offset in OFFSETS_S.items()}
    urls = {name: background.start() for name, background in agents.items()}
    views: list[NodeView] = []
    stores: dict[str, NodeStore] = {}
    try:
        for name, url in urls.items():
            client = AgentClient(url)
            store = stores[name] = NodeStore(url, url, SystemClock())

            async def follow(client: AgentClient = client, store: NodeStore = store) -> float:
                async for update in client.follow():
                    if isinstance(update, Connected):
                        store.connected(update.info)
                    elif isinstance(update, Sampled):
                        store.add_frames(update.frames)
                        if store.latest is not None and store.latest.seq >= 10:
                            return time.time()
                raise AssertionError("follow ended")

            received_at = await asyncio.wait_for(follow(), 20)
            await client.aclose()
            assert store.latest is not None
            views.append(NodeView(node=name, connected=True, last_received_at=received_at,
                                  last_taken_at=store.latest.taken_at))
    finally:
        for background in agents.values():
            background.stop()
    for name, store in stores.items():
        assert store.state() == "live", name
        assert contiguous(store.history.seqs())
        assert store.age_s() is not None and store.age_s() < 5  # type: ignore[operator]
    flagged = {o.node: o.value for o in clock_skew(views, max_skew_s=2.0) if o.active}
    assert set(flagged) == {"ahead", "behind"}
    assert abs(flagged["ahead"] - 3600.0) < 2 and abs(flagged["behind"] + 60.0) < 2  # type: ignore[operator]
