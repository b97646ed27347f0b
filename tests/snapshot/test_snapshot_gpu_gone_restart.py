"""Incident 1 after an agent restart: GPU 3 of the undervolt scenario falls off the bus, the operator restarts the
agent, then takes a snapshot. The lost GPU is in no frame of the window (the new run lists a GPU 3 "lost" without
a UUID, bus id or name); the bundle still names it (UUID, index, PCI bus id, name), its loss and its Xid 79, first
in REPORT.md and in the command's summary, from the agent and from the journal alike.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from pathlib import Path

import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.journal import JournalError, JournalReader
from rigmon.agent.server import make_server
from rigmon.schema import Event
from rigmon.sim.rig import adc_pace, node_agent_config, running_rig
from rigmon.snapshot.bundle import Bundle, NodePart, read_bundle
from rigmon.snapshot.command import gpus_gone_lines, take_snapshot

SPEED = 4
INTERVAL_S = 0.25
#: The snapshot's window (simulated s): the restarted agent's last frames only, long after the loss.
WINDOW_S = 6.0


@dataclass
class Taken:
    lost: Event
    from_agent: tuple[Bundle, list[NodePart]]
    from_journal: tuple[Bundle, list[NodePart]]


def _journal_events(state: Path, kind: str) -> list[Event]:
    if not (state / "journal.sqlite3").exists():
        return []
    try:
        with JournalReader(state) as reader:
            return [e for e in reader.events(0.0, float("inf")) if e.kind == kind]
    except JournalError:
        return []  # the file exists before the agent has created its tables


async def _wait_for(check: object, what: str) -> None:
    for _ in range(4000):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


async def take_after_a_restart(workdir: Path) -> Taken:
    state = workdir / "state" / "node01"
    async with running_rig("undervolt-bus-drop", 1, base_port=0, speed=SPEED, workdir=workdir,
                           interval_s=INTERVAL_S) as rr:
        await _wait_for(lambda: _journal_events(state, "gpu_lost"), "GPU 3 lost")
        (lost,) = _journal_events(state, "gpu_lost")
        # The operator restarts the agent (the GPU stays lost: NVML still counts it, and cannot name it).
        await rr.agents[0].stop()
        node = rr.rig.nodes[0]
        agent = Agent(node_agent_config(node, "127.0.0.1:0", INTERVAL_S, state, adc_pace(node, SPEED)),
                      clock=rr.rig.clock)
        server = make_server(agent, "127.0.0.1", 0)
        agent.start()
        serving = asyncio.create_task(server.serve())
        try:
            await _wait_for(lambda: server.started, "the restarted agent serves")
            url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
            # Long enough that the window (WINDOW_S before the latest frame) holds the new run alone.
            await _wait_for(lambda: rr.rig.clock.time() - lost.at > 4 * WINDOW_S,
                            "the restarted agent ran past the window")
            path, parts = await asyncio.to_thread(take_snapshot, [url], [], WINDOW_S, workdir / "agent.tar.gz",
                                                  None, io.StringIO())
            from_agent = (read_bundle(path), parts)
        finally:
            server.should_exit = True
            await agent.stop()
            await serving
    path, parts = await asyncio.to_thread(take_snapshot, [], [str(state)], WINDOW_S, workdir / "journal.tar.gz",
                                          None, io.StringIO())
    return Taken(lost, from_agent, (read_bundle(path), parts))


@pytest.fixture(scope="module")
def taken(tmp_path_factory: pytest.TempPathFactory) -> Taken:
    return asyncio.run(take_after_a_restart(tmp_path_factory.mktemp("sim")))


@pytest.mark.parametrize("source", ["from_agent", "from_journal"])
def test_a_gpu_lost_before_a_restart_is_named_first(taken: Taken, source: str) -> None:
    bundle, parts = getattr(taken, source)
    (node,) = bundle.nodes
    lost = taken.lost
    uuid = lost.data["uuid"]
    # The premise: the window's frames do not name the GPU (the new run lists an unnamed lost GPU 3).
    assert node.frames and all(g.uuid != uuid for f in node.frames for g in f.readings.gpus)
    assert all(f.run_id != lost.id.rsplit("-", 1)[0] for f in node.frames)
    assert all(e.at > lost.at for e in node.events)
    (gone,) = node.gpus_gone
    assert (gone.uuid, gone.index, gone.pci_bus_id, gone.name) == (
        uuid, 3, lost.data["pci_bus_id"], "Tesla V100-SXM2-16GB")
    assert gone.lost_at == pytest.approx(lost.at)
    assert [code for code, _ in gone.xids] == [79] and gone.xids[0][1] <= lost.at + 1.0
    # Last on the bus in the frame before the loss, not at its run's start.
    assert gone.last_seen_at is not None and lost.at - 3.0 < gone.last_seen_at < lost.at
    assert gone.now == "lost_unnamed"
    # In inventory.json, in the manifest's count, and first in REPORT.md: before the nodes table.
    assert node.inventory["gpus_gone"][0]["uuid"] == uuid
    assert bundle.manifest["nodes"][0]["gpus_gone"] == 1
    report = bundle.report
    assert report.index("## GPUs gone") < report.index("| node |")
    assert uuid in report.split("| node |")[0] and "Xid 79" in report.split("| node |")[0]
    # And first in what the command prints.
    (line,) = gpus_gone_lines(parts)
    assert line.startswith("node01: GPU 3 (Tesla V100-SXM2-16GB, " + uuid) and "Xid 79" in line
