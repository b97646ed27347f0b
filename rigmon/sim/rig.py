"""SimRig: a scenario's nodes stepping on one simulated clock, optionally each served by a real agent."""

from __future__ import annotations

import asyncio
import contextlib
import random
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from rigmon.agent.agent import Agent
from rigmon.agent.server import make_server
from rigmon.config import AgentConfig
from rigmon.sim.clock import SimClock
from rigmon.sim.node import SimNode, merge_config
from rigmon.sim.scenarios import SCENARIOS, Scenario
from rigmon.sim.tree import Tree
from rigmon.typed import from_data

#: Real seconds between physics steps; the simulated step is this times the speed.
STEP_REAL_S = 0.1


class UnknownScenario(ValueError):
    """No scenario of that name."""


def get_scenario(name: str) -> Scenario:
    """Look up a scenario by name.

    Raises:
        UnknownScenario: naming the known ones.
    """
    try:
        return SCENARIOS[name]
    except KeyError:
        raise UnknownScenario(f"unknown scenario {name!r} (known: {', '.join(sorted(SCENARIOS))})") from None


class SimRig:
    """The nodes of one scenario and their shared simulated clock.

    Args:
        scenario: what to simulate.
        nodes: how many nodes.
        workdir: each node's tree is ``workdir/<node name>``.
        seed: makes the run repeatable.
        speed: simulated seconds per real second.
    """

    def __init__(self, scenario: Scenario, nodes: int, workdir: Path, seed: int = 1, speed: float = 1.0) -> None:
        if nodes < 1:
            raise ValueError("nodes must be at least 1")
        self.scenario = scenario
        self.clock = SimClock(speed)
        self.nodes: list[SimNode] = []
        for index in range(nodes):
            name = f"node{index + 1:02d}"
            node = SimNode(name=name, tree=Tree(workdir / name), rng=random.Random(f"{seed}:{index}"))
            scenario.build(node, index)
            self.nodes.append(node)
        self.step(0.0)

    def step(self, t_s: float | None = None) -> None:
        """Advance every node to simulated time ``t_s`` (default: the clock's current time)."""
        if t_s is None:
            t_s = self.clock.elapsed()
        for index, node in enumerate(self.nodes):
            self.scenario.drive(node, index, t_s)
            node.step(t_s)

    async def run(self) -> None:
        """Step the physics until cancelled."""
        while True:
            await asyncio.sleep(STEP_REAL_S)
            self.step()

    def close(self) -> None:
        """Release every node's devices."""
        for node in self.nodes:
            node.close()


def node_agent_config(node: SimNode, listen: str, interval_s: float, state_dir: Path | None = None) -> AgentConfig:
    """The agent configuration of a simulated node: its tree as root, plus what its devices add.

    Devices implementing `ConfiguresAgent` contribute sections (a serial ADC's ``[psu]``
    port, relative to the node's root). ``state_dir`` holds the node's journal.
    """
    agent: dict[str, object] = {"node": node.name, "listen": listen, "root": str(node.tree.root),
                                "interval_s": interval_s}
    if state_dir is not None:
        agent["state_dir"] = str(state_dir)
    data = merge_config(node.agent_config(), {"agent": agent})
    return from_data(AgentConfig, data, strict=True)


@dataclass
class RunningRig:
    """A rig whose nodes each have a real agent on loopback."""

    rig: SimRig
    agents: list[Agent]
    urls: list[str] = field(default_factory=list)


def _bound_port(server: uvicorn.Server) -> int:
    for s in server.servers:
        for sock in s.sockets:
            return int(sock.getsockname()[1])
    raise RuntimeError("server has no socket")


@contextlib.asynccontextmanager
async def running_rig(
    scenario: str,
    nodes: int,
    seed: int = 1,
    speed: float = 1.0,
    base_port: int = 9871,
    workdir: Path | None = None,
    interval_s: float = 1.0,
) -> AsyncIterator[RunningRig]:
    """Run a simulated rig with one real agent per node on 127.0.0.1.

    Node ``i`` listens on ``base_port + i``; with ``base_port`` 0 every agent takes a free
    port. The URLs are in the result's ``urls`` once this context is entered. Each agent
    journals into ``workdir/state/<node>``.
    """
    scen = get_scenario(scenario)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rigmon-sim-")))
        rig = SimRig(scen, nodes, workdir, seed=seed, speed=speed)
        stack.callback(rig.close)
        agents: list[Agent] = []
        servers: list[uvicorn.Server] = []
        tasks: list[asyncio.Task[object]] = [asyncio.create_task(rig.run(), name="sim-physics")]
        try:
            for index, node in enumerate(rig.nodes):
                config = node_agent_config(node, f"127.0.0.1:{base_port + index if base_port else 0}", interval_s,
                                           workdir / "state" / node.name)
                agent = Agent(config, clock=rig.clock)
                port = base_port + index if base_port else 0
                server = make_server(agent, "127.0.0.1", port)
                agents.append(agent)
                servers.append(server)
                agent.start()
                tasks.append(asyncio.create_task(server.serve(), name=f"http-{node.name}"))
            for server, task in zip(servers, tasks[1:]):
                while not server.started:
                    if task.done():
                        task.result()
                        raise RuntimeError("agent server stopped during start-up")
                    await asyncio.sleep(0.01)
            running = RunningRig(rig, agents, [f"http://127.0.0.1:{_bound_port(s)}" for s in servers])
            yield running
        finally:
            for server in servers:
                server.should_exit = True
            for agent in agents:
                await agent.stop()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
