"""The ``rigmon setup`` argument parser, apart from the command so that every ``rigmon`` start does not import it."""

from __future__ import annotations

from typing import Any

from rigmon.config import DEFAULT_PORT


def add_setup_parser(sub: Any, epilog: str) -> None:
    """The ``setup`` subcommand and its ``agent`` target."""
    setup = sub.add_parser("setup", help="install rigmon on this machine (root)")
    targets = setup.add_subparsers(dest="setup_target", metavar="TARGET", required=True)
    agent = targets.add_parser(
        "agent", epilog=epilog,
        help="the agent as a systemd service: user, /etc/rigmon/agent.toml, tokens, TLS, unit, udev rule")
    agent.add_argument("--listen", default=f"0.0.0.0:{DEFAULT_PORT}", metavar="HOST:PORT",
                       help=f"address the agent serves on (default 0.0.0.0:{DEFAULT_PORT}, with a token)")
    agent.add_argument("--node", metavar="NAME", help="node name on dashboards (default: the host name)")
    agent.add_argument("--user", default="rigmon", metavar="NAME", help="system user the agent runs as (default rigmon)")
    agent.add_argument("--no-tls", action="store_true",
                       help="serve plain HTTP (the token then crosses the network in clear text)")
    agent.add_argument("--tls-name", action="append", default=[], metavar="NAME",
                       help="another host name or address the certificate is valid for; repeatable, or comma-separated "
                            "(default: none beyond the node and host names, localhost and this machine's addresses)")
    agent.add_argument("--read-token-file", metavar="FILE",
                       help="install this read token (mode 600, yours only), replacing the one in place (default: "
                            "a new random one): the same token on every node lets one Prometheus job or dashboard "
                            "config reach them all")
    agent.add_argument("--control-token-file", metavar="FILE",
                       help="likewise for the control token (it must differ from the read token; default: a new "
                            "random one)")
    agent.add_argument("--dry-run", action="store_true", help="print what would be done; change nothing")
    agent.add_argument("--strict", action="store_true",
                       help="exit 3 when done with warnings (a kept certificate lacking a name asked for, a kept "
                            "agent.toml that differs from the flags, ...), not 0: for scripts and Ansible")
    agent.add_argument("--uninstall", action="store_true",
                       help="stop and remove the service, the unit, and the configuration and udev rule as "
                            "setup wrote them (ones you changed, the tokens and certificate, the journal and "
                            "the user stay unless --purge)")
    agent.add_argument("--purge", action="store_true",
                       help="with --uninstall: also what it keeps (changed files, tokens, certificate, "
                            "journal, user)")
    agent.add_argument("--root", default="/", metavar="DIR",
                       help="install below DIR (default /; packaging, tests: no user is created, nothing is started)")
    agent.add_argument("--hw-root", default="/", metavar="DIR",
                       help="read the hardware below DIR (a simulated node's tree; default /)")
