"""AgentClient's summary view: summary records from a real agent, the switch to full frames and
back without a lost or repeated seq, and an agent without the summary view (full frames filed)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
from collections.abc import AsyncIterator, Callable, Sequence

import msgspec
from msgspec.structs import replace

from rigmon.agent.agent import Agent
from rigmon.agent.server import make_server
from rigmon.clock import SystemClock
from rigmon.cluster.client import AgentClient, Backoff, Connected, Sampled, Summarized, Update
from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.store import ClusterStore, contiguous
from rigmon.cluster.updates import Failed, GapReported, as_updates
from rigmon.collectors.base import PolledCollector
from rigmon.config import AgentConfig, AgentSection
from rigmon.schema import Event, Gap, Info, TemperatureReading, decode, encode
from rigmon.summary import SummaryRecord, summary_record
from tests.agent.helpers import listening_port
from tests.tui.snapshot_apps.fake_agent import FakeAgent, FakeClock, make_frame
from tests.tui.snapshot_apps.record_frames import load_frames

WAIT_S = 30.0


class Counter(PolledCollector):
    name = "counter"

    def __init__(self) -> None:
        self.n = 0

    def collect(self) -> Sequence[object]:
        self.n += 1
        return [TemperatureReading(sensor="c", label="counter", temp_c=float(self.n))]


@contextlib.asynccontextmanager
async def served_agent() -> AsyncIterator[str]:
    agent = Agent(AgentConfig(agent=AgentSection(node="n1", interval_s=0.05, buffer_frames=200)),
                  collectors={"counter": Counter()})
    server = make_server(agent, "127.0.0.1", 0)
    agent.start()
    task = asyncio.create_task(server.serve())
    try:
        port = await listening_port(server)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await agent.stop()
        await asyncio.gather(task, return_exceptions=True)


async def file_until(updates: AsyncIterator[Update], store: NodeStore, seen: list[Update],
                     done: Callable[[], bool]) -> None:
    """File updates into ``store`` (noting each in ``seen``) until ``done`` (bounded)."""

    async def run() -> None:
        while not done():
            update = await updates.__anext__()
            seen.append(update)
            if isinstance(update, Connected):
                store.connected(update.info)
            elif isinstance(update, Sampled):
                store.add_frames(update.frames)
            elif isinstance(update, Summarized):
                store.add_summaries(update.records)

    await asyncio.wait_for(run(), WAIT_S)


def seqs_of(updates: Sequence[Update]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for update in updates:
        if isinstance(update, Sampled):
            out += [("full", f.seq) for f in update.frames]
        elif isinstance(update, Summarized):
            out += [("summary", r.frame.seq) for r in update.records]
    return out


async def test_summary_view_switches_to_full_frames_and_back_without_a_hole() -> None:
    async with served_agent() as url:
        client = AgentClient(url, view="summary", backfill_frames=5)
        store = NodeStore(url, url, SystemClock())
        updates = client.follow().__aiter__()
        seen: list[Update] = []
        await file_until(updates, store, seen, lambda: store.latest is not None and store.latest.seq >= 12)
        assert {kind for kind, _ in seqs_of(seen)} == {"summary"}
        assert not store.latest_whole and store.latest is not None
        assert store.latest.readings.temperatures == ()  # a slim frame
        assert store.summary is not None and store.summary.node == "n1"

        switched_at = store.latest.seq
        client.set_view("full")
        before = len(seen)
        await file_until(updates, store, seen, lambda: store.latest is not None and store.latest.seq >= switched_at + 5)
        after = seqs_of(seen[before:])
        # The newest frame comes again whole, then full frames go on from it.
        assert after[0] == ("full", switched_at)
        assert {kind for kind, _ in after} == {"full"}
        assert [seq for _, seq in after] == list(range(switched_at, switched_at + len(after)))
        assert store.latest_whole and store.latest.readings.temperatures

        back_at = store.latest.seq
        client.set_view("summary")
        before = len(seen)
        await file_until(updates, store, seen, lambda: store.latest is not None and store.latest.seq >= back_at + 5)
        after = seqs_of(seen[before:])
        assert {kind for kind, _ in after} == {"summary"}
        assert [seq for _, seq in after] == list(range(back_at + 1, back_at + 1 + len(after)))
        # One point per frame, none twice, none missing, across both switches.
        assert contiguous(store.history.seqs())
        await updates.aclose()  # type: ignore[attr-defined]
        await client.aclose()


async def test_agent_without_the_summary_view_is_followed_by_its_frames() -> None:
    # FakeAgent is an agent from before the summary view: it ignores ``view`` and sends frames.
    agent = FakeAgent("old", frames=5)
    agent.publish(0)
    client = AgentClient(agent.url, transport=agent.transport, view="summary", backoff=Backoff(0.01, 0.01))
    store = NodeStore(agent.url, agent.url, SystemClock())
    updates = client.follow().__aiter__()
    seen: list[Update] = []
    await file_until(updates, store, seen, lambda: store.latest is not None and store.latest.seq >= 5)
    agent.publish(2)
    await file_until(updates, store, seen, lambda: store.latest is not None and store.latest.seq >= 7)
    assert {kind for kind, _ in seqs_of(seen)} == {"full"}
    assert store.latest_whole and store.summary is not None and store.summary.cpu_pct is not None
    assert [r.url.params.get("view") for r in agent.requests if r.url.path == "/v1/stream"][0] == "summary"
    await updates.aclose()  # type: ignore[attr-defined]
    await client.aclose()


def test_store_files_summary_records_like_frames() -> None:
    rng = random.Random(3)
    frames = [make_frame("n", "r1", seq, rng) for seq in range(1, 6)]
    frames[2] = replace(frames[2], events=(Event(id="e1", at=frames[2].taken_at, kind="mark", severity="info",
                                                 subject="job", message="epoch 3"),))
    whole = NodeStore("k", "http://n", SystemClock())
    slim = NodeStore("k", "http://n", SystemClock())
    assert whole.add_frames(frames) == 5
    assert slim.add_summaries([summary_record(f) for f in frames]) == 5
    assert slim.add_summaries([summary_record(frames[-1])]) == 0  # a duplicate
    assert slim.summary == whole.summary
    assert [e.id for e in slim.events] == [e.id for e in whole.events] and "e1" in [e.id for e in slim.events]
    assert slim.history.seqs() == whole.history.seqs()
    assert slim.view(details=True).trends == whole.view(details=True).trends
    assert slim.view(details=True).details == whole.view(details=True).details
    # The whole newest frame after its summary record replaces the slim one, without a new point.
    assert whole.latest is not None
    assert slim.add_frames([whole.latest]) == 0
    assert slim.latest == whole.latest and slim.latest_whole and len(slim.history) == 5


def test_cluster_rules_evaluate_on_nodes_followed_by_summaries() -> None:
    clock = FakeClock()
    cluster = ClusterStore(clock)
    rng = random.Random(5)
    for index, cpu in enumerate((20.0, 22.0, 21.0, 97.0)):
        store = cluster.add(f"http://n{index}", f"http://n{index}")
        frame = make_frame(f"n{index}", "r1", 1, rng, start_at=clock.time() - 1)
        assert frame.readings.host is not None
        frame = replace(frame, readings=replace(frame.readings, host=replace(frame.readings.host, cpu_pct=cpu)))
        store.add_summaries([summary_record(frame)])
        assert not store.latest_whole
    cluster.evaluate_alarms()
    flagged = {(a.rule, a.node) for a in cluster.rules.active()}
    assert flagged == {("cpu_far_from_peers", "n3")}
    # The rules read each node's frame cut to the readings their selectors start from.
    cut = cluster._peer_frames()["http://n0"]
    assert cut.readings.host is not None and cut.readings.net == () and cut.readings.temperatures == ()


def test_what_the_dashboard_builds_per_node_per_second_is_untracked_structs() -> None:
    """The records built for every node every second (updates, the node's summary after the
    store's copies, its view and problems) are frozen Structs the cycle collector does not track:
    a full collection of a dashboard following 256 nodes does not walk them."""
    frames = load_frames("v100-gpu-lost-rail-sag")[:60]
    records = [decode(SummaryRecord, encode(summary_record(f))) for f in frames]
    updates = as_updates([*records, frames[-1]])
    assert [type(u) for u in updates] == [Summarized, Sampled]
    store = NodeStore("k", "http://n", SystemClock())
    store.add_summaries(records)
    view = store.view(details=True)
    assert view.problems and view.sags and view.summary is not None
    built = [*updates, view, view.summary, *view.problems, *view.sags.values(),
             Connected(Info(schema=1, node="n", run_id="r", agent_version="1", agent_start=1.0, interval_s=1.0,
                            collectors=())),
             GapReported(Gap(run_id="r", from_seq=1, to_seq=4, reason="buffer")), Failed("timed out", 2.0)]
    for value in built:
        assert isinstance(value, msgspec.Struct) and type(value).__struct_config__.frozen, type(value)
        assert not gc.is_tracked(value), type(value)
