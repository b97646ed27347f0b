"""``rigmon snapshot`` and the dashboard's export against an agent serving other exports: its 503 with
Retry-After is waited out and asked again a bounded number of times, and the wait is said."""

from __future__ import annotations

import io
from pathlib import Path

import httpx

from rigmon.agent.agent import Agent
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.export import pull_targets
from rigmon.config import AgentConfig, AgentSection
from rigmon.snapshot.progress import Progress
from rigmon.snapshot.pull import EXPORT_RETRIES, pull_agent
from tests.agent.export_helpers import stalled_exports
from tests.agent.test_api import Counter
from tests.agent.test_history_api import spoilt_journal
from tests.agent.test_history_stream import FRAMES, filled_state
from tests.agent.journal_frames import FakeClock

BUSY = b'{"error": "2 exports (history frames, snapshots) are being served, the most this agent serves at once"}'


class BusyFirst(httpx.AsyncBaseTransport):
    """The agent's own answers, but its first ``snapshots`` captures and ``frames`` frame exports refused
    as an agent serving others refuses them."""

    def __init__(self, app: httpx.ASGITransport, snapshots: int, frames: int) -> None:
        self.app = app
        self.busy = {"/v1/snapshot": snapshots, "/v1/history": frames}
        self.refused: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        export = path == "/v1/snapshot" or request.url.params.get("frames") == "1"
        if export and self.busy[path]:
            self.busy[path] -= 1
            self.refused.append(path)
            return httpx.Response(503, headers={"Retry-After": "5", "content-type": "application/json"}, content=BUSY)
        return await self.app.handle_async_request(request)


def journaled_agent(tmp_path: Path) -> tuple[Agent, float]:
    """An agent (built, not started) over a journal of 1000 frames, 900 of them readable."""
    state = tmp_path / "state"
    state.mkdir()
    _, t0 = spoilt_journal(state)
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), state_dir=str(state)))
    return Agent(config, clock=FakeClock(t0 + 1000), collectors={"counter": Counter()}), t0


async def test_an_export_refused_while_the_agent_serves_others_is_asked_again_after_the_wait(
        tmp_path: Path) -> None:
    """The agent answers a third export at once 503 with Retry-After: the snapshot lost the node's
    capture (or its frames) with '503: ... cannot answer this now'. Now it waits as told and asks again."""
    agent, _ = journaled_agent(tmp_path)
    transport = BusyFirst(httpx.ASGITransport(app=agent.app()), snapshots=2, frames=1)
    slept: list[float] = []
    notes: list[tuple[str, str]] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        part = await pull_agent(client, "http://agent", 1001.0, note=lambda node, what: notes.append((node, what)),
                                sleep=sleep)
    assert transport.refused == ["/v1/snapshot", "/v1/snapshot", "/v1/history"]
    assert slept == [5.0, 5.0, 5.0]
    assert part.info is not None and part.config is not None and part.frame_count == 900
    assert part.error is not None and part.error.startswith("the agent's journal is damaged")  # not the 503
    assert [n for n, _ in notes] == ["t1", "t1", "t1"]
    assert notes[0][1] == "the agent is busy with other exports (503); asking again in 5 s (retry 1 of 4)"


async def test_an_agent_that_stays_busy_is_given_up_on_after_a_bounded_number_of_tries(tmp_path: Path) -> None:
    agent, _ = journaled_agent(tmp_path)
    transport = BusyFirst(httpx.ASGITransport(app=agent.app()), snapshots=100, frames=100)
    slept: list[float] = []
    progress_out = io.StringIO()

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        part = await pull_agent(client, "http://agent", 1001.0, Progress(4, progress_out), sleep=sleep)
    assert len(transport.refused) == EXPORT_RETRIES + 1 and len(slept) == EXPORT_RETRIES
    assert part.error is not None and part.error.startswith("503: http://agent cannot answer this now: 2 exports")
    assert part.error.endswith(f"(asked {EXPORT_RETRIES + 1} times, waiting as it said in between; "
                               "take the snapshot again later); the bundle lacks its capture (configuration, "
                               "latest frame, raw files), its history (series and events) and its frames")
    said = progress_out.getvalue().splitlines()
    # The waits on lines of their own; then the steps the pull could not take, one line (the reason is
    # said once, at the end).
    assert said[1] == "t1: the agent is busy with other exports (503); asking again in 5 s (retry 1 of 4)"
    assert sum("asking again" in line for line in said) == EXPORT_RETRIES
    assert said[-1] == "[4/4] t1: failed (the reason follows at the end)"
    assert len(said) == 1 + EXPORT_RETRIES + 1


async def test_the_dashboards_export_waits_for_a_busy_agent_and_says_so(tmp_path: Path) -> None:
    """The dashboard's export (the export key) pulls through the same code: a node whose agent is
    serving two other exports is waited for (its Retry-After, 5 s), the wait shown, then pulled."""
    state = tmp_path / "state"
    filled_state(state)
    notes: list[tuple[str, str]] = []
    async with stalled_exports(tmp_path, state) as (port, _, stalled):

        def note(node: str, what: str) -> None:
            notes.append((node, what))
            for sock in stalled:  # the other exports' clients go away while this one waits
                sock.close()

        (part,) = await pull_targets([NodeTarget(url=f"http://127.0.0.1:{port}")], float(FRAMES), note=note)
    assert notes and notes[0] == ("t1", "the agent is busy with other exports (503); asking again in 5 s "
                                        "(retry 1 of 4)")
    assert part.error is None and part.config is not None and part.frame_count == FRAMES
