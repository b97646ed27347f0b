"""``rigmon sim`` and ``rigmon demo``: simulated nodes with real agents (and the dashboard over them)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rigmon.config import (
    DEFAULT_PORT,
    ConfigError,
    ConfigKeyError,
    in_config_file,
    load_agent_config,
    setting_origin,
)

if TYPE_CHECKING:
    import subprocess

#: Real seconds `rigmon demo` waits for the simulated agents to print their URLs.
DEMO_START_TIMEOUT_S = 60.0

#: Highest TCP port: node i of ``rigmon sim --base-port P`` listens on P+i.
MAX_PORT = 65535

#: Most nodes one ``rigmon sim`` or ``rigmon demo`` runs: the most one dashboard is built and measured to
#: follow (DESIGN's scale goal, ``benchmarks/dash_64_nodes.py --nodes 256``, which serves recorded frames
#: because one simulator process cannot keep that many live nodes on a 2-core machine). Unbounded, a
#: typo was obeyed: ``--nodes 100000 --tree-only DIR`` wrote ~15 GB of trees (~150 kB a node).
MAX_SIM_NODES = 256

#: ``[agent]`` keys the simulator sets for each node; an --agent-config file may not change them.
SIM_OWNED_KEYS = ("node", "listen", "root", "state_dir")
#: ``[agent]`` keys of an --agent-config that the simulated agents cannot honour. They serve plain
#: HTTP on 127.0.0.1 to their own dashboard and mark poster: a TLS certificate made them serve HTTPS
#: behind the ``http://`` URL the simulator printed, a read token was ignored (every client read the
#: node, as if protected), and the simulator never drops privileges.
SIM_UNSUPPORTED_KEYS = ("token_file", "tls_cert_file", "tls_key_file", "user")
#: What to do instead, after a refused `SIM_UNSUPPORTED_KEYS` key.
SIM_TLS_ADVICE = ("simulated agents serve plain HTTP on 127.0.0.1 without a read token; to try a token or TLS, "
                  "run `rigmon agent --root DIR/node01` (with --token-file, --tls-cert, --tls-key) "
                  "on the trees of `rigmon sim --tree-only DIR`")


def add_sim_parsers(sub: Any) -> None:
    """The ``sim`` and ``demo`` subcommands."""
    from rigmon.cli import DEMO_EXIT, SIM_EXIT, add_log_options
    from rigmon.cluster.config import DEFAULT_THEME

    sim = sub.add_parser("sim", help="run simulated nodes, each with a real agent on 127.0.0.1", epilog=SIM_EXIT)
    _add_sim_options(sim)
    sim.add_argument("--base-port", type=_port, default=DEFAULT_PORT, metavar="P",
                     help=f"node i listens on P+i (default {DEFAULT_PORT}; 0: free ports)")
    sim.add_argument("--duration", type=_positive_float, metavar="S",
                     help="stop after S real seconds (default: run until stopped)")
    sim.add_argument("--tree-only", metavar="DIR",
                     help="only write the simulated trees under DIR (one folder per node), start no agents "
                          "(default: trees in a temporary directory, removed at the end, and an agent per node)")
    sim.add_argument("--control-token-file", metavar="FILE",
                     help="file holding the token that may acknowledge alarms on every simulated agent "
                          "(default: none, read-only agents)")
    add_log_options(sim, "warning")

    demo = sub.add_parser("demo", help="simulated nodes with real agents, and the dashboard over them",
                          epilog=DEMO_EXIT)
    _add_sim_options(demo, default_scenario="lab")
    demo.add_argument("--theme", metavar="NAME", help=f"theme to start with (default {DEFAULT_THEME})")
    add_log_options(demo, "warning", "append the log of the dashboard and the simulated agents to FILE "
                                     "(default $XDG_STATE_HOME/rigmon/dash.log; never the screen)")


def _positive_float(text: str) -> float:
    from rigmon.cli import _positive_float as check

    return check(text)


def _port(text: str) -> int:
    """A TCP port number (0-65535) of an option (see `rigmon.cli._int_option`)."""
    from rigmon.cli import _int_option

    return _int_option(text, 0, MAX_PORT, "port number", f"a port number from 0 to {MAX_PORT}")


def _node_count(text: str) -> int:
    """A number of simulated nodes, 1 to `MAX_SIM_NODES` (see `rigmon.cli._int_option`)."""
    from rigmon.cli import _int_option

    return _int_option(text, 1, MAX_SIM_NODES, "whole number", f"from 1 to {MAX_SIM_NODES}")


def _add_sim_options(parser: argparse.ArgumentParser, default_scenario: str = "healthy") -> None:
    parser.add_argument("--scenario", default=default_scenario, metavar="NAME",
                        help=f"scenario to simulate (default {default_scenario}; --list lists them)")
    parser.add_argument("--list", action="store_true",
                        help="list the scenarios (name, nodes, what happens) and exit")
    parser.add_argument("--nodes", type=_node_count, metavar="N",
                        help=f"number of nodes, 1 to {MAX_SIM_NODES}: the most one dashboard is built to follow "
                             "(default: the scenario's)")
    parser.add_argument("--speed", type=_positive_float, default=1.0, metavar="X",
                        help="simulated seconds per real second (default 1)")
    parser.add_argument("--seed", type=int, default=1, metavar="N", help="random seed (default 1)")
    parser.add_argument("--agent-config", metavar="FILE",
                        help="agent TOML merged into every simulated agent's configuration "
                             "(notifiers, [alarms], rules): try your own webhook on a simulated incident "
                             "(default: none)")


def list_scenarios() -> int:
    """``--list``: every scenario's name, node count and description, one a line, in name order."""
    from rigmon.sim.scenarios import SCENARIOS

    width = max(len(name) for name in SCENARIOS)
    for name in sorted(SCENARIOS):
        scenario = SCENARIOS[name]
        nodes = f"{scenario.default_nodes} node{'s' if scenario.default_nodes != 1 else ''}"
        print(f"{name:<{width}}  {nodes:<8}  {' '.join(scenario.description.split())}")
    return 0


def load_sim_agent_config(path: str) -> dict[str, object]:
    """Read an --agent-config file as TOML-shaped data to merge into every simulated agent's.

    Raises:
        ConfigError: unreadable, not TOML, an unknown key or bad value (naming the key), an
            unknown collector or an invalid rule, or an ``[agent]`` key the simulator sets per node.
    """
    import tomllib

    from rigmon.agent.agent import FRAME_COLLECTOR_NAMES, check_collector_names, check_guard_rules
    from rigmon.alarms.rule_config import rules_from_config
    from rigmon.alarms.rules import RuleError

    # The whole file is checked as an agent configuration first, so errors name the key; then what
    # only an agent finds (collector names, rules), which failed every simulated agent with a traceback.
    config = load_agent_config(path, environ={})
    try:
        check_collector_names(config)
        rules = rules_from_config(config.alarms, FRAME_COLLECTOR_NAMES)  # checked even when disabled
        if config.alarms.enabled and config.guard.enabled:
            check_guard_rules(config, rules)
    except ConfigKeyError as exc:
        raise ConfigError(in_config_file(path, exc)) from None
    except RuleError as exc:
        raise ConfigError(str(exc)) from None
    if config.agent.control_token_file:
        from rigmon.agent.server import StartupError, read_token_file

        try:
            # Every simulated agent refused it at its start, a traceback (exit 1) naming the bare key.
            read_token_file(config.agent.control_token_file, control_token_origin(path))
        except StartupError as exc:
            raise ConfigError(str(exc)) from None
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    agent = data.get("agent", {})
    if isinstance(agent, dict):
        for key in SIM_OWNED_KEYS:
            if key in agent:
                raise ConfigError(f"{path}: agent.{key}: set by the simulator for each node; remove it")
        for key in SIM_UNSUPPORTED_KEYS:
            if agent.get(key):
                raise ConfigError(f"{path}: agent.{key}: not for a simulated agent: {SIM_TLS_ADVICE}")
    return data


def control_token_origin(agent_config: str | None, option: str | None = None) -> str:
    """What named the simulated agents' control token file, for an error about it: ``--control-token-file``
    when given, else the key of the --agent-config file (``sim.toml: agent.control_token_file``)."""
    return setting_origin("control_token_file", option and "--control-token-file", agent_config, environ={})


def cmd_sim(args: argparse.Namespace) -> int:
    """``rigmon sim``."""
    from rigmon.agent.server import run_until_signalled
    from rigmon.cli import fail, setup_logging, stop_on_hangup
    from rigmon.sim.rig import UnknownScenario, get_scenario

    if args.list:
        return list_scenarios()
    setup_logging(args)
    try:
        scenario = get_scenario(args.scenario)
    except UnknownScenario as exc:
        return fail(str(exc))
    extra: dict[str, object] = {}
    if args.agent_config:
        try:
            extra = load_sim_agent_config(args.agent_config)
        except ConfigError as exc:
            return fail(f"--agent-config: {exc}")
    if args.control_token_file:
        from rigmon.agent.server import StartupError, read_token_file

        try:
            # Every simulated agent refused it at its start, a traceback (exit 1) before any URL.
            read_token_file(args.control_token_file, "--control-token-file")
        except StartupError as exc:
            return fail(str(exc))
    if args.tree_only:
        problem = _tree_dir_problem(Path(args.tree_only))
        if problem:
            return fail(f"--tree-only {args.tree_only}: {problem}")
    nodes = args.nodes or scenario.default_nodes
    if args.base_port and args.base_port + nodes - 1 > MAX_PORT:
        # Checked before the rig starts: the last nodes' configuration was a traceback (port out of range).
        return fail(f"--base-port {args.base_port}: {nodes} nodes would listen up to port "
                    f"{args.base_port + nodes - 1}, past {MAX_PORT}; give a lower one, or 0 for free ports")
    stop_on_hangup()
    try:
        run_until_signalled(_tree_only(args, nodes) if args.tree_only else _serve_sim(args, nodes, extra))
    except SystemExit as exc:
        # uvicorn logs a bind failure (the error above) and exits 3; say it as `rigmon agent` does.
        if not exc.code:
            raise
        ports = (f"127.0.0.1:{args.base_port}" if nodes == 1 else
                 f"127.0.0.1:{args.base_port}-{args.base_port + nodes - 1}")
        return fail(f"a simulated agent cannot serve on {ports} (see the error above); "
                    "--base-port P moves them, --base-port 0 picks free ports")
    return 0


def _tree_dir_problem(folder: Path) -> str | None:
    """Why the simulated trees cannot go under ``folder`` (made when missing), ``None`` when they can.

    The rig makes one folder per node there as it starts: a file in the way or a parent that cannot be
    made was a traceback.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return "is not a directory"
    except OSError as exc:
        return f"cannot make it: {exc.strerror or exc}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return "this user cannot write to it"
    return None


async def _tree_only(args: argparse.Namespace, nodes: int) -> None:
    import asyncio

    from rigmon.sim.rig import SimRig, get_scenario

    rig = SimRig(get_scenario(args.scenario), nodes, Path(args.tree_only), seed=args.seed, speed=args.speed)
    for node in rig.nodes:
        print(f"{node.name} {node.tree.root}", flush=True)
    try:
        await asyncio.wait_for(rig.run(), args.duration)
    except TimeoutError:
        pass
    finally:
        rig.close()


async def _serve_sim(args: argparse.Namespace, nodes: int, extra: dict[str, object]) -> None:
    import asyncio

    from rigmon.logs import FrameLog
    from rigmon.sim.node import merge_config
    from rigmon.sim.rig import running_rig

    if args.control_token_file:
        extra = merge_config(extra, {"agent": {"control_token_file": args.control_token_file}})
    async with running_rig(args.scenario, nodes, seed=args.seed, speed=args.speed, base_port=args.base_port,
                           extra_config=extra or None,
                           control_token_origin=control_token_origin(args.agent_config, args.control_token_file)) as rr:
        for node, url, agent in zip(rr.rig.nodes, rr.urls, rr.agents):
            agent.sampler.add_listener(FrameLog(node.name, logging.getLogger("rigmon.sim")))
            print(f"{node.name} {url}", flush=True)
        if args.duration:
            await asyncio.sleep(args.duration)
        else:
            await asyncio.Event().wait()


def cmd_demo(args: argparse.Namespace) -> int:
    """``rigmon demo``: ``rigmon sim`` in a child process and the dashboard over its agents."""
    import secrets
    import subprocess
    import tempfile

    from rigmon.cli import fail, setup_logging
    from rigmon.cli_dash import default_log_file, run_dashboard
    from rigmon.cluster.config import NodeTarget
    from rigmon.logs import LEVELS, level_for
    from rigmon.sim.rig import UnknownScenario, get_scenario

    if args.list:
        return list_scenarios()
    try:
        scenario = get_scenario(args.scenario)
        if args.agent_config:
            load_sim_agent_config(args.agent_config)
    except UnknownScenario as exc:
        return fail(str(exc))
    except ConfigError as exc:
        return fail(f"--agent-config: {exc}")
    log_file = args.log_file or str(default_log_file())
    setup_logging(args, log_file)
    level = logging.getLevelName(level_for(args.log_default, args.verbose, args.log_level)).lower()
    # The scenario's own count, as `rigmon sim` and --help say (the lab's is four): `--scenario
    # undervolt-bus-drop` ran four copies of the one-node incident, each notifier firing four times.
    nodes = args.nodes or scenario.default_nodes
    # A control token only this demo knows, so the alarms screen can acknowledge.
    token_dir = tempfile.TemporaryDirectory(prefix="rigmon-demo-")
    control_token = secrets.token_urlsafe(24)
    token_file = Path(token_dir.name) / "control.token"
    token_file.write_text(control_token)
    token_file.chmod(0o600)
    command = [sys.executable, "-m", "rigmon", "sim", "--scenario", args.scenario, "--nodes", str(nodes),
               "--speed", str(args.speed), "--seed", str(args.seed), "--base-port", "0",
               "--control-token-file", str(token_file), "--log-file", log_file,
               "--log-level", level if level in LEVELS else "warning"]
    if args.agent_config:
        command += ["--agent-config", str(Path(args.agent_config).resolve())]
    # The agents run in a process of their own so the dashboard's figures (and its
    # responsiveness) are its own; their start-up errors go to a file shown only if they fail.
    with token_dir, tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, start_new_session=True,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        try:
            urls = _read_urls(proc, nodes, DEMO_START_TIMEOUT_S)
            if urls is None:
                errors.seek(0)
                return fail(f"simulated rig did not start:\n{errors.read()[-2000:]}")
            # Every agent has read the token by now (at its start): remove it at once, so a demo
            # that dies without its clean-up (a closed terminal's SIGHUP) leaves no token behind.
            token_dir.cleanup()
            return run_dashboard([NodeTarget(url, control_token=control_token) for url in urls], args.theme)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _die_with_parent() -> None:
    """In the simulator child: get SIGTERM when the demo dies, however it dies (a closed
    terminal sends SIGHUP, which skips the demo's clean-up)."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _read_urls(proc: subprocess.Popen[str], count: int, timeout_s: float) -> list[str] | None:
    """Read ``count`` lines ``NAME URL`` from the simulator; ``None`` if it dies or times out."""
    import queue
    import threading
    import time

    lines: queue.Queue[str] = queue.Queue()
    stdout = proc.stdout
    assert stdout is not None

    def pump() -> None:
        # Reads until the simulator exits, so its pipe never fills up.
        for line in stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, name="rigmon-demo-stdout", daemon=True).start()
    urls: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(urls) < count:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if not line:
            return None
        url = line.strip().partition(" ")[2]
        if url.startswith("http"):
            urls.append(url)
    return urls
