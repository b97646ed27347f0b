"""Pilot tests of the switch between summary records and full frames: nodes off screen follow
/v1/stream?view=summary of real agents on 127.0.0.1, the node screen's node its full frames."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from rigmon.cluster.client import AgentClient, Backoff
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.store import contiguous
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.node import NodeScreen
from tests.cluster.test_client_summary import served_agent
from tests.tui.snapshot_apps.dashboard import wait_for

SIZE = (120, 40)


@contextlib.asynccontextmanager
async def two_agents() -> AsyncIterator[tuple[str, str]]:
    async with served_agent() as first, served_agent() as second:
        yield first, second


def newer(store: NodeStore, than: int, whole: bool) -> bool:
    latest = store.latest
    return latest is not None and latest.seq > than and store.latest_whole == whole


async def test_the_open_node_follows_full_frames_and_the_others_summaries(tmp_path: Path) -> None:
    async with two_agents() as (url1, url2):
        def client(target: NodeTarget) -> AgentClient:
            return AgentClient(target.url, backoff=Backoff(0.01, 0.02))

        app = RigmonApp([NodeTarget(url1), NodeTarget(url2)], client_factory=client, refresh_s=3600,
                        alarm_poll_s=3600, export_dir=tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            one, two = app.cluster.nodes[url1], app.cluster.nodes[url2]
            # On the cluster screen every node follows summary records.
            await wait_for(lambda: newer(one, 5, whole=False) and newer(two, 5, whole=False))
            assert one.latest is not None and one.latest.readings.temperatures == ()

            app.open_node(url1)
            await pilot.pause()
            assert isinstance(app.screen, NodeScreen)
            mark = two.latest.seq if two.latest else 0
            # The node on screen gets its newest frame again whole, then full frames; the other stays on summaries.
            await wait_for(lambda: one.latest_whole and newer(two, mark + 3, whole=False))
            assert one.latest is not None and one.latest.readings.temperatures
            opened_at = one.latest.seq
            await wait_for(lambda: newer(one, opened_at + 3, whole=True))

            app.action_show_mode("cluster")
            await pilot.pause()
            assert isinstance(app.screen, ClusterScreen)
            back_at = one.latest.seq
            await wait_for(lambda: newer(one, back_at + 3, whole=False))
            # No point lost or filed twice across both switches; its events and alarms are its store's.
            assert contiguous(one.history.seqs()) and contiguous(two.history.seqs())
            assert one.restarts == 0 and one.frames_lost == 0
            await pilot.press("q")
