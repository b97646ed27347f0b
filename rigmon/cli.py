"""Command line: argument parsing and wiring only."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rigmon import __version__
from rigmon.config import (
    DEFAULT_PORT,
    ConfigError,
    default_state_dir,
    load_agent_config,
)

if TYPE_CHECKING:
    from rigmon.cluster.config import NodeTarget


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``rigmon`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="rigmon", description="Cluster and power monitor for deep-learning rigs.")
    parser.add_argument("--version", action="version", version=f"rigmon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    agent = sub.add_parser("agent", help="sample this node and serve the HTTP API")
    agent.add_argument("--config", metavar="FILE", help="agent TOML (default /etc/rigmon/agent.toml if present)")
    agent.add_argument("--listen", metavar="HOST:PORT", help=f"address to serve on (default 127.0.0.1:{DEFAULT_PORT})")
    agent.add_argument("--token-file", metavar="FILE", help="file holding the bearer token clients must send")
    agent.add_argument("--root", metavar="DIR", help="directory standing for / (a simulated node's tree)")
    agent.add_argument("--node", metavar="NAME", help="node name (default: host name)")
    agent.add_argument("--control-token-file", metavar="FILE",
                       help="file holding the token that may acknowledge alarms (default: read-only API)")
    agent.add_argument("--tls-cert", metavar="FILE", help="PEM certificate: serve HTTPS (with --tls-key)")
    agent.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert (mode 600)")
    agent.add_argument("--user", metavar="NAME",
                       help="when started as root: switch to this user after binding the port and opening devices")

    check = sub.add_parser("check", help="one-shot health gate before a job: exit 0 healthy, 1 warnings, 2 critical")
    check.add_argument("--config", metavar="FILE", help="agent TOML (collectors, [alarms] rules)")
    check.add_argument("--root", metavar="DIR", help="directory standing for / (a simulated node's tree)")
    check.add_argument("--node", metavar="NAME", help="node name (default: host name)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--wait", type=_positive_float, default=1.0, metavar="S",
                       help="seconds between the two collection passes rates need (default 1)")
    agent.add_argument("--state-dir", metavar="DIR",
                       help="journal directory (default /var/lib/rigmon if writable, else ~/.local/state/rigmon)")

    snap = sub.add_parser("snapshot", help="bug-report bundle from agents, or from a node's journal after a crash")
    snap.add_argument("urls", nargs="*", metavar="URL", help="agents to pull (http://HOST:PORT)")
    snap.add_argument("--journal", action="append", default=[], metavar="DIR",
                      help="read a node's journal (state directory) directly, no agent needed; repeatable")
    snap.add_argument("--since", default="1h", metavar="DURATION",
                      help="window before each node's latest frame: 90s, 10m, 1h, 2d (default 1h)")
    snap.add_argument("--token-file", metavar="FILE", help="file holding the agents' bearer token")
    snap.add_argument("--ca-file", metavar="FILE",
                      help="PEM CA certificate(s) to verify https:// agents with (default: the system's)")
    snap.add_argument("-o", "--output", required=True, metavar="FILE", help="bundle to write (.tar.gz)")

    sim = sub.add_parser("sim", help="run simulated nodes, each with a real agent on 127.0.0.1")
    _add_sim_options(sim)
    sim.add_argument("--base-port", type=int, default=DEFAULT_PORT, metavar="P",
                     help="node i listens on P+i (0: free ports)")
    sim.add_argument("--duration", type=_positive_float, metavar="S", help="stop after S real seconds")
    sim.add_argument("--tree-only", metavar="DIR",
                     help="only write the simulated trees under DIR (one folder per node), start no agents")
    sim.add_argument("--control-token-file", metavar="FILE",
                     help="file holding the token that may acknowledge alarms on every simulated agent")

    dash = sub.add_parser("dash", help="dashboard over agents (with none: over this machine)")
    dash.add_argument("urls", nargs="*", metavar="URL", help="agent URL (http://HOST:PORT or HOST:PORT)")
    dash.add_argument("--config", metavar="FILE", help="dashboard TOML (default: user config dir, rigmon/dash.toml)")
    dash.add_argument("--theme", metavar="NAME", help="theme to start with (default: the config's)")
    dash.add_argument("--replay", metavar="FILE", help="play back a snapshot bundle (rigmon snapshot, or the export key)")

    demo = sub.add_parser("demo", help="simulated nodes with real agents, and the dashboard over them")
    _add_sim_options(demo, default_scenario="lab")
    demo.add_argument("--theme", metavar="NAME", help="theme to start with")
    return parser


def _add_sim_options(parser: argparse.ArgumentParser, default_scenario: str = "healthy") -> None:
    parser.add_argument("--scenario", default=default_scenario, metavar="NAME",
                        help=f"scenario to simulate (default {default_scenario}; see README for the list)")
    parser.add_argument("--nodes", type=_positive_int, metavar="N", help="number of nodes (default: the scenario's)")
    parser.add_argument("--speed", type=_positive_float, default=1.0, metavar="X",
                        help="simulated seconds per real second")
    parser.add_argument("--seed", type=int, default=1, metavar="N", help="random seed (default 1)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rigmon`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "agent":
        return _cmd_agent(args)
    if args.command == "sim":
        return _cmd_sim(args)
    if args.command == "check":
        return _cmd_check(args)
    if args.command == "snapshot":
        return _cmd_snapshot(args)
    if args.command == "dash":
        return _cmd_dash(args)
    if args.command == "demo":
        return _cmd_demo(args)
    parser.print_help()
    return 2


def _fail(message: str, code: int = 2) -> int:
    print(f"rigmon: {message}", file=sys.stderr)
    return code


def _cmd_agent(args: argparse.Namespace) -> int:
    from rigmon.agent.agent import Agent
    from rigmon.agent.server import (
        StartupError,
        check_listen_policy,
        check_tls_files,
        read_token_file,
        run,
    )

    overrides = {"listen": args.listen, "token_file": args.token_file, "root": args.root, "node": args.node,
                 "control_token_file": args.control_token_file, "state_dir": args.state_dir,
                 "tls_cert_file": args.tls_cert, "tls_key_file": args.tls_key, "user": args.user}
    try:
        config = load_agent_config(args.config, overrides)
        if not config.agent.state_dir:
            config = dataclasses.replace(
                config, agent=dataclasses.replace(config.agent, state_dir=str(default_state_dir())))
        token = read_token_file(config.agent.token_file) if config.agent.token_file else None
        control = read_token_file(config.agent.control_token_file) if config.agent.control_token_file else None
        check_listen_policy(config.agent.listen, token)
        if config.agent.tls_cert_file:
            check_tls_files(config.agent.tls_cert_file, config.agent.tls_key_file)
        if not Path(config.agent.root).is_dir():
            raise StartupError(f"root {config.agent.root} is not a directory")
        agent = Agent(config, token=token, control_token=control)
    except (ConfigError, StartupError, ValueError) as exc:
        return _fail(str(exc))
    scheme = "https" if config.agent.tls_cert_file else "http"
    print(f"rigmon agent {__version__}: node {config.node_name} on {scheme}://{config.agent.listen}, "
          f"journal in {config.agent.state_dir if config.journal.enabled else '(disabled)'}", flush=True)
    try:
        run(agent, config.agent.listen, config.agent.user)
    except StartupError as exc:
        return _fail(str(exc))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    import json

    from rigmon.agent.check import format_report, run_check
    from rigmon.clock import SystemClock
    from rigmon.typed import to_data

    try:
        config = load_agent_config(args.config, {"root": args.root, "node": args.node})
        if not Path(config.agent.root).is_dir():
            raise ValueError(f"root {config.agent.root} is not a directory")
        report = run_check(config, SystemClock(), pause_s=args.wait)
    except (ConfigError, ValueError) as exc:
        # Exit 3: the check itself could not run, distinct from 1 (warnings) and 2 (critical).
        return _fail(str(exc), 3)
    print(json.dumps(to_data(report), indent=2) if args.json else format_report(report), flush=True)
    return report.exit_code
def _cmd_snapshot(args: argparse.Namespace) -> int:
    from rigmon.snapshot.command import parse_duration, take_snapshot

    if not args.urls and not args.journal:
        return _fail("snapshot: give at least one agent URL or --journal DIR")
    try:
        since_s = parse_duration(args.since)
    except ValueError as exc:
        return _fail(f"--since: {exc}")
    from rigmon.agent.server import StartupError, read_token_file

    token = None
    if args.token_file:
        try:
            # The same rule as the agent's: a token other users can read is refused.
            token = read_token_file(args.token_file)
        except StartupError as exc:
            return _fail(str(exc))
    if args.ca_file and not Path(args.ca_file).is_file():
        return _fail(f"--ca-file {args.ca_file}: no such file")
    path, parts = take_snapshot(args.urls, args.journal, since_s, args.output, token, ca_file=args.ca_file)
    failed = [p for p in parts if p.error]
    for part in failed:
        print(f"rigmon: {part.node}: {part.error}", file=sys.stderr)
    frames = sum(p.frame_count for p in parts)
    print(f"{path}: {len(parts)} nodes, {frames} frames", flush=True)
    return 1 if len(failed) == len(parts) else 0


def _cmd_sim(args: argparse.Namespace) -> int:
    from rigmon.sim.rig import UnknownScenario, get_scenario

    try:
        scenario = get_scenario(args.scenario)
    except UnknownScenario as exc:
        return _fail(str(exc))
    nodes = args.nodes or scenario.default_nodes
    from rigmon.agent.server import run_until_signalled

    run_until_signalled(_tree_only(args, nodes) if args.tree_only else _serve_sim(args, nodes))
    return 0


async def _tree_only(args: argparse.Namespace, nodes: int) -> None:
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


async def _serve_sim(args: argparse.Namespace, nodes: int) -> None:
    from rigmon.sim.rig import running_rig

    extra: dict[str, object] | None = None
    if args.control_token_file:
        extra = {"agent": {"control_token_file": args.control_token_file}}
    async with running_rig(args.scenario, nodes, seed=args.seed, speed=args.speed, base_port=args.base_port,
                           extra_config=extra) as rr:
        for node, url in zip(rr.rig.nodes, rr.urls):
            print(f"{node.name} {url}", flush=True)
        if args.duration:
            await asyncio.sleep(args.duration)
        else:
            await asyncio.Event().wait()


def _cmd_dash(args: argparse.Namespace) -> int:
    from rigmon.cluster.config import (
        DashConfigError,
        NodeTarget,
        load_dash_config,
        resolve_targets,
    )

    try:
        config = load_dash_config(args.config)
        targets = resolve_targets(args.urls, config)
    except DashConfigError as exc:
        return _fail(str(exc))
    export_dir = Path(config.export_dir).expanduser() if config.export_dir else None
    if args.replay:
        return _run_replay(args.replay, args.theme or config.theme, export_dir)
    local = None
    if not targets:
        # No node at all: watch this machine through an agent of our own on loopback.
        from rigmon.agent.agent import Agent
        from rigmon.agent.background import BackgroundAgent

        try:
            agent_config = load_agent_config(None, {"listen": "127.0.0.1:0"})
            local = BackgroundAgent(Agent(agent_config))
            targets = [NodeTarget(local.start())]
        except (ConfigError, RuntimeError, ValueError) as exc:
            return _fail(f"cannot start a local agent: {exc}")
    try:
        return _run_dashboard(targets, args.theme or config.theme, export_dir)
    finally:
        if local is not None:
            local.stop()


def _run_dashboard(targets: list[NodeTarget], theme: str | None, export_dir: Path | None = None) -> int:
    from rigmon.tui.app import RigmonApp, tune_gc

    tune_gc()
    RigmonApp(targets, theme_name=theme, export_dir=export_dir).run()
    return 0


def _run_replay(path: str, theme: str | None, export_dir: Path | None) -> int:
    from rigmon.cluster.replay import Replay
    from rigmon.snapshot.bundle import BundleError
    from rigmon.tui.app import RigmonApp, tune_gc

    try:
        replay = Replay.open(path)
    except BundleError as exc:
        return _fail(str(exc))
    if not replay.frame_count:
        return _fail(f"{path}: the bundle holds no frames to replay")
    tune_gc()
    RigmonApp([], theme_name=theme, replay=replay, export_dir=export_dir).run()
    return 0


#: Real seconds `rigmon demo` waits for the simulated agents to print their URLs.
DEMO_START_TIMEOUT_S = 60.0


def _cmd_demo(args: argparse.Namespace) -> int:
    import secrets
    import tempfile

    from rigmon.cluster.config import NodeTarget
    from rigmon.sim.rig import UnknownScenario, get_scenario

    try:
        get_scenario(args.scenario)
    except UnknownScenario as exc:
        return _fail(str(exc))
    nodes = args.nodes or 4
    # A control token only this demo knows, so the alarms screen can acknowledge.
    token_dir = tempfile.TemporaryDirectory(prefix="rigmon-demo-")
    control_token = secrets.token_urlsafe(24)
    token_file = Path(token_dir.name) / "control.token"
    token_file.write_text(control_token)
    token_file.chmod(0o600)
    command = [sys.executable, "-m", "rigmon", "sim", "--scenario", args.scenario, "--nodes", str(nodes),
               "--speed", str(args.speed), "--seed", str(args.seed), "--base-port", "0",
               "--control-token-file", str(token_file)]
    # The agents run in a process of their own so the dashboard's figures (and its
    # responsiveness) are its own; their log goes to a file shown only if they fail.
    with token_dir, tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        try:
            urls = _read_urls(proc, nodes, DEMO_START_TIMEOUT_S)
            if urls is None:
                log.seek(0)
                return _fail(f"simulated rig did not start:\n{log.read()[-2000:]}")
            return _run_dashboard([NodeTarget(url, control_token=control_token) for url in urls], args.theme)
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


if __name__ == "__main__":
    sys.exit(main())
