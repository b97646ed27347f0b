"""A bundle dates each node's pull: the agent's clock in its capture and the puller's when it came in
(what a replay judges clock skew and staleness by); a bundle without them still reads."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from rigmon.snapshot.bundle import NodePart, read_bundle, write_bundle
from rigmon.snapshot.pull import pull_agent
from tests.cluster.test_replay import _retar
from tests.snapshot.test_pull_retry import journaled_agent


async def test_a_pull_records_the_agents_clock_and_the_pullers(tmp_path: Path) -> None:
    agent, t0 = journaled_agent(tmp_path)  # its clock stands at t0 + 1000
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app()), base_url="http://agent") as client:
        # This machine's clock is 37 s behind the agent's.
        part = await pull_agent(client, "http://agent", 1001.0, now=lambda: t0 + 963.0)
    assert (part.agent_now_at, part.pulled_at) == (t0 + 1000, t0 + 963)
    bundle = read_bundle(write_bundle(tmp_path / "b.tar.gz", [part], 1001.0, ""))
    assert (bundle.nodes[0].agent_now_at, bundle.nodes[0].pulled_at) == (t0 + 1000, t0 + 963)
    entry = bundle.manifest["nodes"][0]
    assert (entry["agent_now_at"], entry["pulled_at"]) == (t0 + 1000, t0 + 963)


def test_a_bundle_without_pull_times_or_with_bad_ones_reads_without_them(tmp_path: Path) -> None:
    path = write_bundle(tmp_path / "b.tar.gz", [NodePart(node="a", source="journal:/x"),
                                                 NodePart(node="b", source="http://b:9871", pulled_at=5.0,
                                                          agent_now_at=9.0)], 60.0, "", created_at=100.0)
    bundle = read_bundle(path)
    assert [(n.pulled_at, n.agent_now_at) for n in bundle.nodes] == [(None, None), (5.0, 9.0)]
    manifest = bundle.manifest
    # As an older rigmon wrote it (no such keys), and as a hand-edited one might (not numbers).
    del manifest["nodes"][0]["pulled_at"], manifest["nodes"][0]["agent_now_at"]
    manifest["nodes"][1].update(pulled_at="yesterday", agent_now_at=True)
    edited = _retar(path, tmp_path / "edited.tar.gz", {"manifest.json": json.dumps(manifest).encode()})
    assert [(n.pulled_at, n.agent_now_at) for n in read_bundle(edited).nodes] == [(None, None), (None, None)]
