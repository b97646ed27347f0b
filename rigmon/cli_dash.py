"""``rigmon dash``: the dashboard over agents, over this machine, or over a recorded bundle."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rigmon.config import (
    DEFAULT_CONFIG_PATH,
    ConfigError,
    default_state_dir,
    load_agent_config,
    local_url,
    setting_origin,
)

if TYPE_CHECKING:
    from rigmon.agent.background import BackgroundAgent
    from rigmon.cluster.config import NodeTarget


def default_log_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where the dashboard logs (its stderr is the screen): ``$XDG_STATE_HOME/rigmon/dash.log``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(base) / "rigmon" / "dash.log"


def add_dash_parsers(sub: Any) -> None:
    """The ``dash`` subcommand."""
    from rigmon.cli import DASH_EXIT, add_log_options
    from rigmon.cluster.config import DEFAULT_THEME

    dash = sub.add_parser("dash", help="dashboard over agents (with none: over this machine)", epilog=DASH_EXIT)
    dash.add_argument("urls", nargs="*", metavar="URL",
                      help="agent URL (HOST:PORT, http:// or https://; none: the config's nodes, else this machine)")
    dash.add_argument("--config", metavar="FILE", help="dashboard TOML (default: user config dir, rigmon/dash.toml)")
    dash.add_argument("--theme", metavar="NAME",
                      help=f"theme to start with (default: the config's theme, else {DEFAULT_THEME})")
    dash.add_argument("--replay", metavar="FILE",
                      help="play back a snapshot bundle (rigmon snapshot, or the export key; "
                           "default: follow live agents)")
    dash.add_argument("--token-file", metavar="FILE",
                      help="read token for the URLs given here that the config does not list "
                           "(mode 600; default: none)")
    dash.add_argument("--control-token-file", metavar="FILE",
                      help="control token (acknowledging alarms) for the URLs given here that the config does not list "
                           "(default: none, alarms read-only)")
    dash.add_argument("--ca-file", metavar="FILE",
                      help="PEM CA certificate(s) to verify https:// agents given here with (default: httpx's certifi CA bundle)")
    add_log_options(dash, "warning", "append the log to FILE (default $XDG_STATE_HOME/rigmon/dash.log; "
                                     "never the screen)")


def cmd_dash(args: argparse.Namespace) -> int:
    """``rigmon dash``."""
    from rigmon.cli import fail, setup_logging
    from rigmon.cluster.config import (
        DashConfigError,
        load_dash_config,
        read_secret_file,
        resolve_targets,
        user_config_path,
    )

    setup_logging(args, str(default_log_file()))
    try:
        config = load_dash_config(args.config)
        token = read_secret_file(args.token_file, "--token-file") if args.token_file else None
        control = read_secret_file(args.control_token_file, "--control-token-file") \
            if args.control_token_file else None
        if args.ca_file and not Path(args.ca_file).is_file():
            raise DashConfigError(f"--ca-file {args.ca_file}: no such file")
        targets = resolve_targets(args.urls, config, token=token, control_token=control, ca_file=args.ca_file,
                                  source=str(args.config or user_config_path()),
                                  token_from=f"--token-file {args.token_file}" if args.token_file else None)
    except DashConfigError as exc:
        return fail(str(exc))
    export_dir = Path(config.export_dir).expanduser() if config.export_dir else None
    if args.replay:
        return _run_replay(args.replay, args.theme or config.theme, export_dir)
    local: BackgroundAgent | None = None
    if not targets:
        # No node given: the agent installed on this machine, if there is one. Not a second agent
        # of our own from its configuration: that one would send the node's notifications again,
        # fight the installed one for the ADC's port and its state directory.
        try:
            installed = installed_agent_target(INSTALLED_CONFIG, control)
        except (ConfigError, DashConfigError) as exc:
            return fail(f"this machine's agent cannot be followed: {exc} (give its URL with "
                        "--token-file and --ca-file copies this user can read)")
        if installed is not None:
            targets = [installed]
    if not targets:
        # No node at all: watch this machine through its agent's state directory's agent, or one of our own.
        try:
            target, local = local_agent()
        except DashConfigError as exc:
            return fail(f"this machine's agent cannot be followed: {exc} (give its URL with a --token-file "
                        "copy this user can read)")
        except (ConfigError, RuntimeError, ValueError) as exc:
            return fail(f"cannot start a local agent: {exc}")
        targets = [target]
    try:
        return run_dashboard(targets, args.theme or config.theme, export_dir)
    finally:
        if local is not None:
            local.stop()


#: Where `rigmon setup agent` puts an installed agent's configuration (`installed_agent_target`).
INSTALLED_CONFIG = DEFAULT_CONFIG_PATH


def installed_agent_target(path: Path, control_token: str | None = None) -> NodeTarget | None:
    """The agent installed on this machine (its configuration at ``path``) as the dashboard's node:
    its ``listen`` address from here, its read token and its certificate. ``None`` when there is
    no such configuration.

    Raises:
        ConfigError: the configuration cannot be read.
        DashConfigError: its token file cannot be read by this user.
    """
    from rigmon.cluster.config import NodeTarget, read_secret_file

    if not path.exists():
        return None
    agent = load_agent_config(path).agent
    # Named as the agent's start names it: the file's key, or the environment variable that set it.
    origin = setting_origin("token_file", None, path)
    token = read_secret_file(agent.token_file, origin) if agent.token_file else None
    return NodeTarget(local_url(agent.listen, bool(agent.tls_cert_file)), token=token, control_token=control_token,
                      ca_file=agent.tls_cert_file or None, token_from=f"{origin} ({agent.token_file})" if token else None)


def local_agent() -> tuple[NodeTarget, BackgroundAgent | None]:
    """This machine's node when no agent is installed, and the agent started for it (``None``: none was).

    The node's agent keeps the state directory ``rigmon agent`` would take (``RIGMON_AGENT_STATE_DIR``, else
    `default_state_dir`), which is where ``rigmon check`` looks for this machine's running agent. An agent
    already serving on it (``rigmon agent`` started by hand: the address its lock file records) is followed,
    with its token and certificate, never a second one beside it. Otherwise one is started in-process on a
    free loopback port: it locks that directory, journals there and records its address in the lock file
    once it serves (so ``rigmon check`` finds it and asks it for the rail, whose port it holds), until the
    dashboard stops it.

    Raises:
        ConfigError: the agent configuration (the environment's ``RIGMON_AGENT_*``) is invalid.
        DashConfigError: the running agent's token file cannot be read by this user.
        RuntimeError: the agent did not start (its state directory is unusable, or another agent holds it).
    """
    import msgspec

    from rigmon.agent.agent import Agent
    from rigmon.agent.background import BackgroundAgent
    from rigmon.agent.state_lock import LOCK_FILE, listening_agent
    from rigmon.cluster.config import NodeTarget, read_secret_file

    config = load_agent_config(None, {"listen": "127.0.0.1:0"})
    state_dir = config.agent.state_dir or str(default_state_dir())
    running = listening_agent(state_dir)
    if running is not None:
        origin = f"the running agent's token file (recorded in {state_dir}/{LOCK_FILE})"
        token = read_secret_file(running.token_file, origin) if running.token_file else None
        return NodeTarget(running.url, token=token, ca_file=running.tls_cert_file or None,
                          token_from=f"{origin}: {running.token_file}" if token else None), None
    config = msgspec.structs.replace(config, agent=msgspec.structs.replace(config.agent, state_dir=state_dir))
    local = BackgroundAgent(Agent(config))
    return NodeTarget(local.start()), local


def run_dashboard(targets: list[NodeTarget], theme: str | None, export_dir: Path | None = None) -> int:
    """Run the dashboard over ``targets`` until the user quits."""
    from rigmon.tui.app import RigmonApp, tune_gc

    tune_gc()
    RigmonApp(targets, theme_name=theme, export_dir=export_dir).run()
    return 0


def _run_replay(path: str, theme: str | None, export_dir: Path | None) -> int:
    from rigmon.cli import fail
    from rigmon.cluster.replay import Replay
    from rigmon.snapshot.bundle import BundleError
    from rigmon.tui.app import RigmonApp, tune_gc

    try:
        replay = Replay.open(path)
    except BundleError as exc:
        return fail(str(exc))
    if not replay.frame_count:
        return fail(f"{path}: the bundle holds no frames to replay")
    tune_gc()
    RigmonApp([], theme_name=theme, replay=replay, export_dir=export_dir).run()
    return 0
