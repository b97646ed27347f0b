"""SimRig: a scenario's nodes stepping on one simulated clock, optionally each served by a real agent."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import secrets
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from rigmon.agent.agent import Agent
from rigmon.agent.server import make_server, read_token_file
from rigmon.agent.to_the_end import to_the_end
from rigmon.config import AgentConfig
from rigmon.sim.clock import SimClock
from rigmon.sim.mark_poster import MarkPoster
from rigmon.sim.node import SimNode, merge_config
from rigmon.sim.scenarios import SCENARIOS, Scenario
from rigmon.sim.tree import Tree, TreeGone
from rigmon.sim.wire import SimWire, free_udp_port
from rigmon.typed import from_data

#: Real seconds between physics steps (tree writes); the simulated step is this times the speed.
STEP_REAL_S = 0.1
#: Physics advance on a fixed grid of simulated time, so a run's trajectory depends on the
#: seed and the scenario, not on how the real-time steps happened to fall.
SUBSTEP_S = 0.1
#: At high speeds a step covers more than this many grid points; the grid then coarsens.
MAX_SUBSTEPS = 50


def substeps(from_s: float, to_s: float) -> list[float]:
    """Simulated times to advance through from ``from_s`` to ``to_s``.

    Grid points of `SUBSTEP_S` when there are at most `MAX_SUBSTEPS` of them; beyond that,
    `MAX_SUBSTEPS` equal steps ending exactly at ``to_s``.
    """
    first = math.floor(from_s / SUBSTEP_S + 1e-9) + 1
    last = math.floor(to_s / SUBSTEP_S + 1e-9)
    if last < first:
        return []
    if last - first + 1 <= MAX_SUBSTEPS:
        return [round(k * SUBSTEP_S, 9) for k in range(first, last + 1)]
    dt = (to_s - from_s) / MAX_SUBSTEPS
    return [from_s + dt * (i + 1) for i in range(MAX_SUBSTEPS)]


def next_step_at(last_at: float, now: float) -> float:
    """When the next physics step is due: `STEP_REAL_S` after the last one, or now when that has
    passed (a busy machine): a late step is taken at once and the ones missed are skipped."""
    return max(last_at + STEP_REAL_S, now)


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
            node = SimNode(name=name, tree=Tree(workdir / name), rng=random.Random(f"{seed}:{index}"),
                           wall0_at=self.clock.time() - self.clock.elapsed())
            scenario.build(node, index)
            scenario.drive(node, index, 0.0)
            node.advance(0.0)
            node.write()
            self.nodes.append(node)

    def step(self, t_s: float | None = None) -> None:
        """Advance every node to simulated time ``t_s`` (default: the clock's current time).

        Physics advance through the grid points of `SUBSTEP_S` up to ``t_s`` (the remainder
        waits for the next step); then each node's tree is written once, for ``t_s``.
        """
        if t_s is None:
            t_s = self.clock.elapsed()
        for index, node in enumerate(self.nodes):
            for sub_t in substeps(node.t_s, t_s):
                self.scenario.drive(node, index, sub_t)
                node.advance(sub_t)
            node.write_t_s = max(node.t_s, t_s)
            node.write()

    async def run(self, first_step_s: float = STEP_REAL_S) -> None:
        """Step the physics until cancelled, every `STEP_REAL_S` of real time, the first in ``first_step_s``.

        On a schedule, not a pause after each step: an agent sampling every second then finds
        the tree written the same time before each read, and its rates do not swing by the
        share of a step that the writes drifted against its ticks.

        Ends (quietly) when a node's tree was removed (`TreeGone`): the rig is over, and its
        files are not written again where no one would remove them.
        """
        loop = asyncio.get_running_loop()
        step_at = loop.time() + first_step_s - STEP_REAL_S
        while True:
            step_at = next_step_at(step_at, loop.time())
            await asyncio.sleep(step_at - loop.time())
            try:
                self.step()
            except TreeGone:
                return

    def close(self) -> None:
        """Release every node's devices."""
        for node in self.nodes:
            node.close()


def node_agent_config(node: SimNode, listen: str, interval_s: float, state_dir: Path | None = None,
                      extra: dict[str, object] | None = None) -> AgentConfig:
    """The agent configuration of a simulated node: its tree as root, plus what its devices add.

    Devices implementing `ConfiguresAgent` contribute sections (a serial ADC's ``[psu]``
    port, relative to the node's root). ``state_dir`` holds the node's journal; ``extra``
    is merged last (a test's ``[[notify]]`` webhook, say), as TOML-shaped data.
    """
    agent: dict[str, object] = {"node": node.name, "listen": listen, "root": str(node.tree.root),
                                "interval_s": interval_s}
    if state_dir is not None:
        agent["state_dir"] = str(state_dir)
    data = merge_config(node.agent_config(), {"agent": agent})
    if extra:
        data = merge_config(data, extra)
    return from_data(AgentConfig, data, strict=True)


#: Real seconds a simulated ADC's windows may be apart: a physics step, and a step held up by a busy machine.
ADC_DELIVERY_REAL_S = 0.5


def adc_pace(node: SimNode, speed: float) -> dict[str, object]:
    """``[psu] stale_after_s`` for a simulated ADC at ``speed``: its windows arrive once a physics step of
    real time, ``speed`` times as many simulated seconds apart, and must not read as a silent ADC
    (`psu_adc_silent`) on the agent's simulated clock. At real speed, the agent's own default."""
    if "psu" not in node.agent_config() or speed * ADC_DELIVERY_REAL_S <= 3.0:
        return {}
    return {"psu": {"stale_after_s": min(speed * ADC_DELIVERY_REAL_S, 86400.0)}}


def _start_wire(scenario: Scenario, rig: SimRig, workdir: Path, seed: int
                ) -> tuple[SimWire | None, list[dict[str, object]]]:
    """Start the scenario's simulated wire (if it has ``wire_paths``) and give each node its probe settings.

    Every node's responder gets a free UDP port on 127.0.0.1 and every node probes its peers
    through the wire's relays, with one probe key file shared by the rig (as a real cluster shares one).
    Each node's ``[[peers]]`` lists the node itself too, straight to its own responder, as a peers file
    copied unchanged to every node of a lab does: the agent skips it (it read a loopback round trip).
    """
    wire_paths = getattr(scenario, "wire_paths", None)
    if wire_paths is None:
        return None, []
    # Every agent's prober and responder are threads of this one process: hand the GIL over
    # every 0.5 ms instead of 5, or a reply waits milliseconds for it (p99 /2). The relays run
    # in a process of their own: a wire does not wait for the nodes' threads.
    sys.setswitchinterval(min(sys.getswitchinterval(), 0.0005))
    # The wire reads each node's tree: a path whose interface lost its carrier there carries nothing.
    wire = SimWire(wire_paths(len(rig.nodes)), rig.clock.elapsed, seed, roots=[n.tree.root for n in rig.nodes])
    key_file = workdir / "probe.key"
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(16) + "\n")
    names = [n.name for n in rig.nodes]
    configs: list[dict[str, object]] = []
    for index in range(len(rig.nodes)):
        port = free_udp_port()
        wire.set_responder(index, port)
        # The responder sees every peer's probes from 127.0.0.1 (the relays): a rate for all of them.
        # Probes run on real time; the window covers the default 10 s of simulated time, so
        # alarms' holds (simulated time) and windows keep their proportions at any speed.
        configs.append({"probes": {"bind": "127.0.0.1", "port": port, "key_file": str(key_file),
                                   "window_s": max(1.0, 10.0 / rig.clock.speed),
                                   "reply_rate_per_s": 2000.0, "reply_burst": 1000},
                        "peers": _with_itself(wire.peers_config(index, names), names[index], port)})
    wire.start(own_process=True)
    return wire, configs


def _with_itself(peers: list[dict[str, object]], name: str, port: int) -> list[dict[str, object]]:
    """``peers`` with the node itself among them (straight to its own responder on ``port``), in name
    order: the lab's one ``[[peers]]`` list, as every node of a real lab may be given it unchanged."""
    own: dict[str, object] = {"name": name, "paths": [{"name": "mgmt", "address": "127.0.0.1", "port": port}]}
    return sorted([own, *peers], key=lambda peer: str(peer["name"]))


@dataclass
class RunningRig:
    """A rig whose nodes each have a real agent on loopback."""

    rig: SimRig
    agents: list[Agent]
    urls: list[str] = field(default_factory=list)
    wire: SimWire | None = None
    """The simulated wire between the nodes, when the scenario has one (``wire_paths``)."""


async def _stop_writers(servers: list[uvicorn.Server], agents: list[Agent], tasks: list[asyncio.Task[object]]) -> None:
    """Stop everything of a running rig that writes below its directory: the servers, the agents
    (their samplers and journal threads, joined by `Agent.stop`) and the physics, and wait for them."""
    for server in servers:
        server.should_exit = True
    for agent in agents:
        await agent.stop()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


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
    extra_config: dict[str, object] | None = None,
    control_token_origin: str = "agent.control_token_file",
) -> AsyncIterator[RunningRig]:
    """Run a simulated rig with one real agent per node on 127.0.0.1.

    ``control_token_origin`` names what gave ``extra_config``'s ``agent.control_token_file`` in an
    error about that file (``--control-token-file``, ``sim.toml: agent.control_token_file``).

    Node ``i`` listens on ``base_port + i``; with ``base_port`` 0 every agent takes a free
    port. The URLs are in the result's ``urls`` once this context is entered. Each agent
    journals into ``workdir/state/<node>``. Without ``workdir``, a temporary directory is used
    and removed on exit, once every writer below it (agents, physics) has stopped, even when
    the exit is cancelled meanwhile.
    """
    scen = get_scenario(scenario)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rigmon-sim-")))
        rig = SimRig(scen, nodes, workdir, seed=seed, speed=speed)
        stack.callback(rig.close)
        wire, wire_config = _start_wire(scen, rig, workdir, seed)
        if wire is not None:
            stack.callback(wire.close)
        agents: list[Agent] = []
        tokens: list[str | None] = []
        servers: list[uvicorn.Server] = []
        tasks: list[asyncio.Task[object]] = []
        try:
            for index, node in enumerate(rig.nodes):
                node_extra = merge_config(wire_config[index], extra_config or {}) if wire_config else extra_config
                node_extra = merge_config(adc_pace(node, speed), node_extra or {})
                config = node_agent_config(node, f"127.0.0.1:{base_port + index if base_port else 0}", interval_s,
                                           workdir / "state" / node.name, node_extra)
                # A control token file in the configuration (``extra_config``) makes the agent
                # accept acknowledgements, as `rigmon agent --control-token-file` does.
                control = (read_token_file(config.agent.control_token_file, control_token_origin)
                           if config.agent.control_token_file else None)
                agent = Agent(config, clock=rig.clock, control_token=control)
                tokens.append(control)
                port = base_port + index if base_port else 0
                server = make_server(agent, "127.0.0.1", port)
                agents.append(agent)
                servers.append(server)
                agent.start()
                tasks.append(asyncio.create_task(server.serve(), name=f"http-{node.name}"))
            # The agents tick from now on, each second: the physics write their trees half a
            # step out of phase with those reads, so a read never races a write (which would
            # give it a step's more or less of I/O: a rate 10 % off).
            tasks.append(asyncio.create_task(rig.run(first_step_s=STEP_REAL_S / 2), name="sim-physics"))
            for server, task in zip(servers, tasks):
                while not server.started:
                    if task.done():
                        task.result()
                        raise RuntimeError("agent server stopped during start-up")
                    await asyncio.sleep(0.01)
            running = RunningRig(rig, agents, [f"http://127.0.0.1:{_bound_port(s)}" for s in servers], wire)
            for agent, server in zip(agents, servers):
                # As `rigmon agent` does: `rigmon check --state-dir` finds the node's agent by its lock file.
                agent.record_listening(f"127.0.0.1:{_bound_port(server)}")
            # The nodes' training scripts mark their checkpoints through the agents' API.
            tasks.append(asyncio.create_task(MarkPoster(rig.nodes, running.urls, tokens).run(), name="sim-marks"))
            yield running
        finally:
            await to_the_end(_stop_writers(servers, agents, tasks))
