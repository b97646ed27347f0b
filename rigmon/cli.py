"""Command line: argument parsing and wiring only."""

from __future__ import annotations

import argparse
import gc
import math
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from rigmon import __version__

# rigmon.config and rigmon.logs are imported where they are used, after `main` has decided whether
# to collect garbage while they load (not for `rigmon agent`: see rigmon/cli_agent.py, cmd_agent).

AGENT_EXIT = ("exit codes: 0 stopped cleanly (SIGTERM, SIGINT, SIGHUP); 2 cannot start (configuration, token, address, "
              "log file)")
CHECK_EXIT = ("exit codes: 0 healthy; 1 warnings; 2 critical findings; 3 the check cannot run (arguments, "
              "configuration, rules)")
#: `rigmon check`'s exit code when it could not check (bad arguments, configuration or rules).
CHECK_CANNOT_RUN = 3
SNAPSHOT_EXIT = ("exit codes: 0 every node pulled; 1 bundle written, but some node failed (named on stderr); "
                 "2 bad arguments; 3 no node gave anything, or the bundle could not be written (a full disk): "
                 "no bundle written")
SIM_EXIT = ("exit codes: 0 stopped (--duration, SIGTERM, SIGINT, SIGHUP); 2 bad arguments (scenario, --agent-config, "
            "--control-token-file, --log-file) or a port in use")
DASH_EXIT = "exit codes: 0 quit; 2 bad configuration, token file, bundle or log file"
DEMO_EXIT = "exit codes: 0 quit; 2 a bad scenario, --agent-config or log file, or the simulated rig did not start"
SETUP_EXIT = (
    "exit codes: 0 done (or nothing to do); 1 a step failed (see the message); 2 bad arguments or not root; "
    "3 done with warnings (the lines starting with 'warning:'), with --strict only")


def _positive_float(text: str) -> float:
    """A positive, finite number of an option (seconds, a speed factor).

    Raises:
        argparse.ArgumentTypeError: naming what was given. argparse's own message for a ValueError
            named this function ("invalid _positive_float value: 'abc'"), and ``nan`` or ``inf`` passed
            ``value <= 0``: a traceback from the simulator, a check that waited forever.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < math.inf:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _int_option(text: str, low: int, high: int | None, noun: str, bounds: str) -> int:
    """A whole number of an option from ``low`` to ``high`` (``None``: no upper bound).

    Raises:
        argparse.ArgumentTypeError: naming what was given (``not a <noun>``, ``must be <bounds>``).
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a {noun}: {text!r}") from None
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"must be {bounds}, got {text}")
    return value


def add_log_options(parser: argparse.ArgumentParser, default: str, log_file_help: str | None = None) -> None:
    """``-v/--verbose``, ``--log-level`` and ``--log-file`` of a long-running command."""
    from rigmon.logs import LEVELS

    parser.set_defaults(log_default=default)
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help=f"log more (default level {default}; -v one level more, -vv two)")
    parser.add_argument("--log-level", choices=LEVELS, metavar="LEVEL",
                        help=f"least severe level logged: {', '.join(LEVELS)} "
                             f"(default: {default}, one level lower per -v)")
    parser.add_argument("--log-file", metavar="FILE",
                        help=log_file_help or "append the log to FILE (default: stderr; journald-friendly under systemd)")


def build_parser(agent_only: bool = False) -> argparse.ArgumentParser:
    """The ``rigmon`` argument parser with every subcommand, or with ``agent_only`` that of ``agent`` alone.

    ``rigmon agent ARGS`` parses, helps and fails alike with either; the agent-only parser spares a
    node's service start the other commands' parsers and modules (dash, sim, mark, setup: ~4 ms).
    """
    from rigmon.config import DEFAULT_PORT

    parser = argparse.ArgumentParser(prog="rigmon", description="Cluster and power monitor for deep-learning rigs.")
    parser.add_argument("--version", action="version", version=f"rigmon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    agent = sub.add_parser("agent", help="sample this node and serve the HTTP API", epilog=AGENT_EXIT)
    agent.add_argument("--config", metavar="FILE", help="agent TOML (default /etc/rigmon/agent.toml if present)")
    agent.add_argument("--listen", metavar="HOST:PORT", help=f"address to serve on (default 127.0.0.1:{DEFAULT_PORT})")
    agent.add_argument("--token-file", metavar="FILE",
                       help="file holding the bearer token clients must send (default: none, loopback only)")
    agent.add_argument("--root", metavar="DIR", help="directory standing for / (a simulated node's tree; default /)")
    agent.add_argument("--node", metavar="NAME", help="node name (default: host name)")
    agent.add_argument("--control-token-file", metavar="FILE",
                       help="file holding the token that may acknowledge alarms (default: read-only API)")
    agent.add_argument("--tls-cert", metavar="FILE",
                       help="PEM certificate: serve HTTPS (with --tls-key; default: none, plain HTTP)")
    agent.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert (mode 600; default: none)")
    agent.add_argument("--user", metavar="NAME",
                       help="when started as root: switch to this user after binding the port and opening devices "
                            "(default: stay the user it was started as)")
    agent.add_argument("--state-dir", metavar="DIR",
                       help="journal directory (default /var/lib/rigmon if writable, else ~/.local/state/rigmon)")
    add_log_options(agent, "info")
    if agent_only:
        return parser

    check = sub.add_parser("check", help="one-shot health gate before a job: exit 0 healthy, 1 warnings, 2 critical",
                           epilog=CHECK_EXIT)
    check.add_argument("--config", metavar="FILE",
                       help="agent TOML: collectors, [alarms] rules (default /etc/rigmon/agent.toml if present)")
    check.add_argument("--root", metavar="DIR", help="directory standing for / (a simulated node's tree; default /)")
    check.add_argument("--node", metavar="NAME", help="node name (default: host name)")
    check.add_argument("--state-dir", metavar="DIR",
                       help="state directory of the agent running on this node, asked for its firing alarms and for "
                            "the rail when it holds the ADC's port (default: the configuration's, as for rigmon agent)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--no-agent-alarms", action="store_true",
                       help="do not count the running agent's firing alarms (default: asked, as for the rail)")
    check.add_argument("--wait", type=_positive_float, default=1.0, metavar="S",
                       help="seconds between the two collection passes rates need (default 1)")

    snap = sub.add_parser("snapshot", help="bug-report bundle from agents, or from a node's journal after a crash",
                          epilog=SNAPSHOT_EXIT)
    snap.add_argument("urls", nargs="*", metavar="URL",
                      help="agents to pull (HOST:PORT, http:// or https://; none: --journal only)")
    snap.add_argument("--journal", action="append", default=[], metavar="DIR",
                      help="read a node's journal (state directory) directly, no agent needed; repeatable "
                           "(default: none, agents only)")
    snap.add_argument("--since", default="1h", metavar="DURATION",
                      help="window before each node's latest frame: 90s, 10m, 1h, 2d (default 1h)")
    snap.add_argument("--token-file", metavar="FILE",
                      help="file holding the agents' bearer token (default: none, no token sent)")
    snap.add_argument("--ca-file", metavar="FILE",
                      help="PEM CA certificate(s) to verify https:// agents with (default: httpx's certifi CA bundle)")
    snap.add_argument("-o", "--output", required=True, metavar="FILE", help="bundle to write (.tar.gz)")

    from rigmon.cli_dash import add_dash_parsers
    from rigmon.cli_mark import add_mark_parser
    from rigmon.cli_sim import add_sim_parsers

    add_sim_parsers(sub)
    add_dash_parsers(sub)
    add_mark_parser(sub)
    # The parser only: the command's module (and what it needs) is imported when `setup` runs.
    from rigmon.setup.parser import add_setup_parser

    add_setup_parser(sub, SETUP_EXIT)
    return parser


def setup_logging(args: argparse.Namespace, log_file: str | None = None) -> None:
    """Configure logging from a command's ``-v``/``--log-level``/``--log-file``.

    Args:
        args: the command's parsed options.
        log_file: where the log goes without ``--log-file`` (the dashboard's file), else stderr.

    Raises:
        SystemExit: exit code 2, after saying on stderr that the log file cannot be written.
    """
    from rigmon.logs import configure_logging, level_for

    level = level_for(args.log_default, args.verbose, args.log_level)
    target = args.log_file or log_file
    if target is not None:
        _check_log_file(target, "--log-file" if args.log_file else "log file")
    configure_logging(level, target)


def _check_log_file(target: str, what: str) -> None:
    """Make sure the log file can be appended to, before the command starts.

    The handler opens it at the first record: a directory that cannot be made was a traceback, a
    file that cannot be opened a "--- Logging error ---" block for every record of the run.

    Raises:
        SystemExit: exit code 2, after saying why on stderr.
    """
    path = Path(target).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except FileExistsError:
        # mkdir's word for a parent that is a file: say that, not "File exists".
        raise SystemExit(fail(f"{what} {target}: cannot write to it: {path.parent} is not a directory")) from None
    except OSError as exc:
        raise SystemExit(fail(f"{what} {target}: cannot write to it: {exc.strerror or exc}")) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rigmon`` console script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["agent"]:
        # No garbage collection while the agent loads (rigmon/cli_agent.py, cmd_agent): from here,
        # before the configuration's modules, which this module leaves to the commands.
        enabled = gc.isenabled()
        gc.disable()
        try:
            args = build_parser(agent_only=True).parse_args(argv)
            from rigmon.cli_agent import cmd_agent

            return cmd_agent(args)
        finally:
            if enabled:
                gc.enable()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        if argv[:1] == ["check"] and exc.code == 2:
            # argparse's usage error is exit 2, the gate's "critical findings": a job script that reads
            # the exit code took a mistyped option for a critical node. The check could not run: 3.
            raise SystemExit(CHECK_CANNOT_RUN) from None
        raise
    if args.command == "check":
        return _cmd_check(args)
    if args.command == "snapshot":
        return _cmd_snapshot(args)
    if args.command in ("sim", "demo"):
        from rigmon.cli_sim import cmd_demo, cmd_sim

        return cmd_sim(args) if args.command == "sim" else cmd_demo(args)
    if args.command == "dash":
        from rigmon.cli_dash import cmd_dash

        return cmd_dash(args)
    if args.command == "setup":
        from rigmon.setup.command import cmd_setup

        return cmd_setup(args)
    if args.command == "mark":
        from rigmon.cli_mark import cmd_mark

        return cmd_mark(args)
    parser.print_help()
    return 2


def fail(message: str, code: int = 2) -> int:
    """Say why a command cannot go on (stderr, one line) and return its exit code."""
    print(f"rigmon: {message}", file=sys.stderr)
    return code


def stop_on_hangup() -> None:
    """Make SIGHUP a clean stop of ``rigmon agent`` or ``rigmon sim``, like SIGTERM (unless it is
    ignored, as under ``nohup``).

    Closing the terminal or the ssh session one runs in sends SIGHUP, whose default action killed
    it on the spot: the agent without closing its journal, so its next start reported a critical
    ``unclean_shutdown`` ("node restarted unexpectedly") for a stop the operator chose; the
    simulator without removing its temporary trees. The handler passes it on as SIGTERM, which
    their event loop turns into a clean stop.
    """
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, lambda *_: os.kill(os.getpid(), signal.SIGTERM))


def _cmd_check(args: argparse.Namespace) -> int:
    import json

    from functools import partial

    from rigmon.agent.check import run_check
    from rigmon.agent.check_alarms import alarms_from_agent
    from rigmon.agent.check_format import format_report
    from rigmon.agent.check_rail import rail_from_agent
    from rigmon.clock import SystemClock
    from rigmon.config import ConfigError, ConfigKeyError, in_config_file, load_agent_config
    from rigmon.typed import to_data

    try:
        config = load_agent_config(args.config, {"root": args.root, "node": args.node, "state_dir": args.state_dir})
        if not Path(config.agent.root).is_dir():
            raise ValueError(f"root {config.agent.root} is not a directory")
        report = run_check(config, SystemClock(), pause_s=args.wait,
                           agent_rail=partial(rail_from_agent, config, config_path=args.config),
                           agent_alarms=None if args.no_agent_alarms else partial(alarms_from_agent, config))
    except ConfigKeyError as exc:
        return fail(in_config_file(args.config, exc), CHECK_CANNOT_RUN)
    except (ConfigError, ValueError) as exc:
        # Exit 3: the check itself could not run, distinct from 1 (warnings) and 2 (critical).
        return fail(str(exc), CHECK_CANNOT_RUN)
    from rigmon.cluster.sanitise import clean_lines

    # Device names and kernel messages come from the hardware: shown as text, never as terminal control.
    try:
        print(json.dumps(to_data(report), indent=2) if args.json else clean_lines(format_report(report, _width())),
              flush=True)
    except BrokenPipeError:
        # `rigmon check --json | head`: the reader left early and the verdict stands. No traceback, and
        # none from the interpreter's last flush into the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return report.exit_code


def _width() -> int | None:
    """Columns of the terminal standard output is, else ``None`` (a pipe, a file: one line per item, for grep).

    ``rigmon check``'s findings ran past 80 columns (the terminal broke them at its edge, under nothing).
    """
    import shutil

    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def _cmd_snapshot(args: argparse.Namespace) -> int:
    from rigmon.cluster.config import DashConfigError, check_url, normalize_url
    from rigmon.cluster.sanitise import clean_text
    from rigmon.snapshot.command import parse_duration, pull_parts, pulled_nothing, summary_lines, write_snapshot
    from rigmon.snapshot.failures import failure_line
    from rigmon.snapshot.progress import counted

    if not args.urls and not args.journal:
        return fail("snapshot: give at least one agent URL or --journal DIR")
    try:
        since_s = parse_duration(args.since)
    except ValueError as exc:
        return fail(f"--since: {exc}")
    from rigmon.agent.server import StartupError, read_token_file

    token = None
    if args.token_file:
        try:
            # The same rule as the agent's: a token other users can read is refused.
            token = read_token_file(args.token_file, "--token-file")
        except StartupError as exc:
            return fail(str(exc))
    if args.ca_file and not Path(args.ca_file).is_file():
        return fail(f"--ca-file {args.ca_file}: no such file")
    # Before pulling for a minute: a bundle that cannot be written, or a URL httpx cannot parse, was a traceback.
    folder = Path(args.output).absolute().parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        return fail(f"-o {args.output}: {folder} is not a directory this user can write to")
    if Path(args.output).is_dir():
        # Said after the whole pull, the pull was lost: the bundle is a file, named by -o.
        return fail(f"-o {args.output}: is a directory: name the bundle file to write "
                    f"(-o {Path(args.output) / 'bug.tar.gz'})")
    urls = [normalize_url(u) for u in args.urls]
    for given, url in zip(args.urls, urls):
        try:
            # The dashboard's rule: httpx took `localhost:99999` (a traceback from the socket) and
            # `ftp://x` or `http://[bad` (an "unreachable" node after the pull, exit 3).
            check_url(given, url)
        except DashConfigError as exc:
            return fail(str(exc))
    parts = pull_parts(urls, args.journal, since_s, token, ca_file=args.ca_file,
                       token_from=f"--token-file {args.token_file}" if args.token_file else None)
    failed = [p for p in parts if p.error]
    for part in failed:
        print(clean_text(f"rigmon: {failure_line(part)}"), file=sys.stderr)
    if all(pulled_nothing(p) for p in parts):
        return fail(f"no node could be pulled; {args.output} not written", 3)
    try:
        path = write_snapshot(parts, since_s, args.output)
    except OSError as exc:
        return fail(f"cannot write {args.output}: {exc.strerror or exc}; no bundle written", 3)
    frames = sum(p.frame_count for p in parts)
    for line in summary_lines(parts):
        # First: a GPU that fell off the bus before the window or a restart is in none of the bundle's frames,
        # and a crash is what a journal is read for.
        print(clean_text(line))
    print(f"{path}: {counted(len(parts), 'node')}, {counted(frames, 'frame')}"
          + (f"; {len(failed)} of them failed (see above)" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
