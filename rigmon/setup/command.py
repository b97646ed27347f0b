"""``rigmon setup agent``: the steps in order, what they did, and the line for the dashboard."""

from __future__ import annotations

import argparse
import grp
import hmac
import os
import pwd
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import Any

from rigmon.config import DEFAULT_PORT, split_listen
from rigmon.lazy_re import lazy_compile
from rigmon.setup import render
from rigmon.setup.client_help import dashboard_help, scrape_help
from rigmon.setup.conffiles import record_written
from rigmon.setup.plan import Installer
from rigmon.setup.service_access import (
    hidden_because,
    hidden_from_service,
    unreadable_by_service,
)
from rigmon.setup.udev_check import has_active_rules, never_matching
from rigmon.setup.uninstall import uninstall

#: Supplementary groups of the agent's user, where the machine has them: the serial ADC, GPU nodes.
WANTED_GROUPS = ("dialout", "video", "render")
#: How to install rigmon where the service can run it (README, "Install"). rigmon is installed from a
#: checkout or a wheel: `pipx install --global rigmon` asked PyPI for a package of that name.
INSTALL_SYSTEM_WIDE = ("`pipx install --global ./rigmon` (a checkout, or the wheel; pipx 1.6 or newer) or "
                       "`PIPX_HOME=/opt/pipx PIPX_BIN_DIR=/usr/local/bin pipx install ./rigmon`, with a Python "
                       "outside /root, /home and /tmp (pipx --python /usr/bin/python3)")


def this_rigmon() -> tuple[str, ...]:
    """The command that runs this installation's rigmon: its console script beside the
    interpreter (a venv's or pipx's bin/), else the interpreter with ``-m rigmon``."""
    script = Path(sys.executable).parent / "rigmon"
    if script.is_file() and os.access(script, os.X_OK):
        return (str(script),)
    return (sys.executable, "-m", "rigmon")


def existing_groups() -> tuple[str, ...]:
    """The wanted supplementary groups this machine has."""
    out = []
    for name in WANTED_GROUPS:
        try:
            grp.getgrnam(name)
        except KeyError:
            continue
        out.append(name)
    return tuple(out)


#: Where a UDP socket is "connected" (no packet is sent) to learn the local address the routes choose.
ROUTE_PROBES = ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1"))


def route_addresses(probes: tuple[tuple[int, str], ...] = ROUTE_PROBES) -> list[str]:
    """This machine's addresses that its routes would send from (its LAN address, one per family).

    Debian and Ubuntu map the host name to 127.0.1.1 in /etc/hosts, so resolving it finds no address
    a dashboard on another machine could use; the kernel's route lookup does.
    """
    out = []
    for family, target in probes:
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as probe:
                probe.connect((target, 9))
                out.append(str(probe.getsockname()[0]))
        except OSError:
            continue  # no route for that family
    return out


def split_names(given: list[str]) -> list[str]:
    """The names of ``--tls-name`` options, each of which may hold several (``rig7.lan,10.0.0.5``)."""
    # `--tls-name rig7,10.0.0.5`: a comma inside one subjectAltName entry made openssl fail the whole step.
    return [name.strip() for names in given for name in names.split(",") if name.strip()]


def certificate_names(node: str, extra: list[str], addresses: list[str] | None = None) -> list[str]:
    """Names the certificate is valid for: the node's, the host's, its addresses, ``extra``.

    Args:
        addresses: this machine's addresses (default: the host name's and `route_addresses`).
    """
    extra = split_names(extra)
    names = [node, socket.gethostname(), socket.getfqdn(), *extra, "localhost", "127.0.0.1", "::1"]
    if addresses is None:
        try:
            infos = socket.getaddrinfo(socket.gethostname(), None)
        except OSError:
            infos = []
        addresses = [str(info[4][0]) for info in infos] + route_addresses()
    names += [a for a in addresses if not a.startswith(("127.", "::1", "fe80:"))]
    return list(dict.fromkeys(n for n in names if n))


#: A node name that can stand as the host in a URL and a certificate name (the lines setup prints use it so).
NODE_NAME = lazy_compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9])?")

#: A user name useradd takes on Debian without --badname (NAME_REGEX), at most 32 characters.
USER_NAME = lazy_compile(r"[a-z_][a-z0-9_-]{0,30}[$]?")


def print_out(text: str) -> None:
    """Print part of setup's report on standard output, flushed.

    A reader that leaves early (``rigmon setup agent --dry-run | head``) ends the output, not the
    setup: the steps are done (or planned) whatever it read, and the exit status still says how they
    went; a traceback there read as a failed step (exit 1).
    """
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # What follows goes nowhere, as does the interpreter's last flush into the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def cmd_setup(args: argparse.Namespace) -> int:
    """``rigmon setup agent``."""
    from rigmon.cli import fail

    installer = Installer(args.root, dry_run=args.dry_run)
    if installer.real and not args.dry_run and os.geteuid() != 0:
        return fail("setup agent needs root (sudo rigmon setup agent); --dry-run shows what it would do")
    if not Path(args.root).is_dir():
        return fail(f"--root {args.root} is not a directory")
    if args.purge and not args.uninstall:
        return fail("--purge goes with --uninstall")
    if not USER_NAME.fullmatch(args.user):
        # An empty name wrote "User=" (systemd then runs the agent as root) and useradd refuses odd ones.
        return fail(f"--user {args.user!r} is not a system user name (letters, digits, _ and -, "
                    "starting with a letter or _, at most 32)")
    if args.uninstall and (args.read_token_file or args.control_token_file):
        return fail("--read-token-file and --control-token-file go without --uninstall")
    if args.uninstall:
        uninstall(installer, args.user, args.purge)
        print_out("\n".join(installer.lines) or "nothing to remove")
        return exit_status(installer, args.strict)
    try:
        _, port = split_listen(args.listen)
    except ValueError as exc:
        return fail(f"--listen: {exc}")
    if not Path(args.hw_root).is_dir():
        # A mistyped tree read as a node without any hardware, and the configuration said so.
        return fail(f"--hw-root {args.hw_root} is not a directory")
    node = args.node or socket.gethostname()
    if not NODE_NAME.fullmatch(node):
        # The printed URLs, token file names and the certificate use it as a host name.
        return fail(f"node name {node!r} (--node, default the host name) is not a host name: letters, digits, "
                    "'.', '-' and '_'; dashboards and Prometheus reach the node by it")
    try:
        tokens = given_tokens(installer, args.read_token_file, args.control_token_file)
    except ValueError as exc:
        return fail(str(exc))
    exec_start = this_rigmon()
    hidden = hidden_from_service(exec_start)
    if hidden is not None:
        message = (f"this rigmon needs {hidden}, which the service cannot reach (the unit's "
                   f"{hidden_because(hidden)}). Install it system-wide first: {INSTALL_SYSTEM_WIDE}, "
                   "then run that rigmon's `setup agent`")
        if installer.real and not args.dry_run:
            return fail(message)
        installer.warn(message)
    unreadable = unreadable_by_service(exec_start, user=args.user) if hidden is None else None
    if unreadable is not None:
        path, mode = unreadable
        message = (f"this rigmon's {path} is mode {mode:o}: the service's user ({args.user}) cannot "
                   f"{'enter' if Path(path).is_dir() else 'read or run'} it, so the service would fail at every start "
                   "(installed under a umask such as 027 or 077?). Make the installation readable by all users "
                   "(`chmod -R o+rX` on it, or install again after `umask 022`), then run setup agent again")
        if installer.real and not args.dry_run:
            return fail(message)
        installer.warn(message)
    from rigmon.setup.detect import detect_hardware

    settings = render.Settings(node=node, listen=args.listen, user=args.user, groups=existing_groups(),
                               exec_start=exec_start, tls=not args.no_tls)
    hardware = detect_hardware(args.hw_root)
    listen_host = split_listen(args.listen)[0]
    # A node that serves on one of its addresses is reached at that address, which its routes may not choose.
    bound = [listen_host] if listen_host not in ("0.0.0.0", "::", "") else []
    install(installer, settings, hardware, certificate_names(node, [*bound, *args.tls_name]), tokens,
            asked_names=split_names([*bound, *args.tls_name]))
    print_out("\n".join(installer.lines))
    for rel, text in installer.previews:
        if not rel.endswith(".pem"):
            print_out(f"\n--- {rel} (would be written) ---\n{text.rstrip()}")
    if not installer.failed:
        served = served_as(installer.path(render.CONFIG_FILE), (node, args.listen, settings.tls))
        if served != (node, args.listen, settings.tls):
            shown_node, shown_listen, shown_tls = served
            installer.warnings += 1
            print_out(f"\nwarning: {render.CONFIG_FILE} is kept as it is, so the agent serves "
                     f"{'https' if shown_tls else 'http'} on {shown_listen} as node {shown_node}, not what "
                     "--node, --listen or --no-tls asked: edit it, or delete it and run this again")
            try:
                node, port, tls = shown_node, split_listen(shown_listen)[1], shown_tls
                listen_host = split_listen(shown_listen)[0]
            except ValueError:
                tls = settings.tls
        else:
            tls = settings.tls
        from rigmon.agent.server import is_loopback

        if is_loopback(listen_host):
            print_out(f"\nnote: the agent listens on {listen_host} only: no other machine can reach it, whatever "
                     "the lines below say (--listen 0.0.0.0:PORT, or listen in the configuration)")
        token_path, cert_path = served_files(installer.path(render.CONFIG_FILE))
        if tokens and token_path != render.READ_TOKEN and args.read_token_file:
            installer.warnings += 1
            print_out(f"\nwarning: {render.CONFIG_FILE} is kept as it is, and its agent reads its read token from "
                     f"{token_path}, not {render.READ_TOKEN} where the given token went: edit token_file there")
        shared = Path(args.read_token_file).name if args.read_token_file and token_path == render.READ_TOKEN \
            else None
        print_out(dashboard_help(node, port, tls, args.dry_run, installer.real, shared, token_path, cert_path))
        print_out(scrape_help(node, port, tls, shared is not None, token_path, cert_path))
    return exit_status(installer, args.strict)


#: The exit status of a setup done with warnings, under ``--strict`` (1 is a step that failed, 2 bad arguments).
EXIT_WARNINGS = 3


def exit_status(installer: Installer, strict: bool) -> int:
    """The exit status of a setup that ran its steps: 1 when one failed; `EXIT_WARNINGS` when it is done with
    warnings and ``strict``; else 0. Warnings are counted on stderr at the end, so a script's log shows them."""
    if installer.failed:
        return 1
    if not installer.warnings:
        return 0
    run = "setup agent's dry run" if installer.dry_run else "setup agent"
    plural = "s" if installer.warnings > 1 else ""
    done = f"{run} is done, with {installer.warnings} warning{plural} (the lines starting with 'warning:')"
    if strict:
        print(f"rigmon: {done}: exit status {EXIT_WARNINGS} (--strict)", file=sys.stderr, flush=True)
        return EXIT_WARNINGS
    print(f"rigmon: {done}; with --strict it exits {EXIT_WARNINGS} for that", file=sys.stderr, flush=True)
    return 0


def served_files(config_file: Path) -> tuple[str, str]:
    """The read token file and TLS certificate the agent configuration in place names (a kept,
    edited file may name others than setup installs), or setup's own when it names none."""
    import tomllib

    try:
        with open(config_file, "rb") as fh:
            agent = tomllib.load(fh).get("agent", {})
    except (OSError, tomllib.TOMLDecodeError):
        agent = {}
    if not isinstance(agent, dict):
        agent = {}
    return str(agent.get("token_file") or render.READ_TOKEN), str(agent.get("tls_cert_file") or render.TLS_CERT)


def given_tokens(installer: Installer, read_file: str | None, control_file: str | None) -> dict[str, str]:
    """The tokens ``--read-token-file`` / ``--control-token-file`` give, by the path they are installed at.

    Each file is checked as the agent checks its token files (a regular file, private to its owner,
    one token), and the read and control tokens that the agent will have (given, or kept in place)
    must differ, or the agent would refuse to start.

    Raises:
        ValueError: one line naming the flag and the file.
    """
    from rigmon.agent.server import StartupError, read_token_file

    given: dict[str, str] = {}
    for rel, flag, path in ((render.READ_TOKEN, "--read-token-file", read_file),
                            (render.CONTROL_TOKEN, "--control-token-file", control_file)):
        if path is None:
            continue
        try:
            token = read_token_file(path, flag)
        except StartupError as exc:
            raise ValueError(str(exc)) from None
        given[rel] = token
    if not given:
        return given
    effective = dict(given)
    for rel in (render.READ_TOKEN, render.CONTROL_TOKEN):
        if rel not in effective:
            try:  # the token in place, which a re-run keeps
                effective[rel] = installer.path(rel).read_text().strip()
            except (OSError, UnicodeDecodeError):
                continue
    read, control = effective.get(render.READ_TOKEN), effective.get(render.CONTROL_TOKEN)
    if read and control and hmac.compare_digest(read.encode(), control.encode()):
        where = " and ".join(f"{flag} {path}" for flag, path in (("--read-token-file", read_file),
                                                                  ("--control-token-file", control_file)) if path)
        kept = "" if read_file and control_file else \
            f" (the {'control' if read_file else 'read'} token in place under {installer.root})"
        raise ValueError(f"{where}: the same token for read and control{kept}: every reader could "
                         "acknowledge alarms; give the control scope a token of its own")
    return given


def served_as(config_file: Path, asked: tuple[str, str, bool]) -> tuple[str, str, bool]:
    """Node name, listen address and TLS of the agent configuration in place (a file that exists is
    kept, whatever the flags ask), or ``asked`` when there is none or it cannot be read."""
    import tomllib

    try:
        with open(config_file, "rb") as fh:
            agent = tomllib.load(fh).get("agent", {})
    except (OSError, tomllib.TOMLDecodeError):
        return asked
    if not isinstance(agent, dict):
        return asked
    # The agent's own defaults for what the file leaves out.
    return (str(agent.get("node") or socket.gethostname()), str(agent.get("listen") or f"127.0.0.1:{DEFAULT_PORT}"),
            bool(agent.get("tls_cert_file")))


def ensure_user(installer: Installer, user: str, groups: tuple[str, ...]) -> None:
    """The agent's system user with its own group and the supplementary ``groups``."""
    try:
        entry = pwd.getpwnam(user) if installer.real else None
    except KeyError:
        entry = None
    if entry is None:
        command = ["useradd", "--system", "--user-group", "--home-dir", render.STATE_DIR, "--no-create-home",
                   "--shell", "/usr/sbin/nologin", "--comment", "rigmon agent"]
        if groups:
            command += ["--groups", ",".join(groups)]
        installer.changed = installer.changed or installer.real
        installer.run([*command, user], "the agent needs its user")
        return
    member_of = {g.gr_name for g in grp.getgrall() if user in g.gr_mem}
    for group in groups:
        if group not in member_of:
            installer.changed = True
            installer.run(["usermod", "--append", "--groups", group, user])


def names_lacking(cert: Path, asked: list[str]) -> list[str]:
    """Which of the ``asked`` names the certificate ``cert`` is not valid for (none when it cannot be read)."""
    from rigmon.setup.tls import certificate_names_of, normal_name

    held = certificate_names_of(cert) if asked else None
    if held is None:
        return []
    return [name for name in dict.fromkeys(asked) if normal_name(name) not in held]


def install(installer: Installer, settings: render.Settings, hardware: Any, tls_names: list[str],
            tokens: dict[str, str] | None = None, asked_names: list[str] | None = None) -> None:
    """Every step of the installation, in order; each says what it did.

    Args:
        tokens: tokens to install, by path (`given_tokens`), replacing those in place; a token not
            given is generated, or kept when one is in place.
        asked_names: names the operator asked the certificate to hold (``--tls-name``, the
            ``--listen`` address): a kept certificate without one of them is said to lack it.
    """
    tokens = tokens or {}
    user = settings.user
    ensure_user(installer, user, settings.groups)
    if installer.failed:
        return
    owner = user if installer.real and not installer.dry_run else None
    installer.mkdir(render.CONFIG_DIR)
    for rel, what in ((render.READ_TOKEN, "read token"), (render.CONTROL_TOKEN, "control token")):
        if rel in tokens:
            installer.write(rel, (tokens[rel] + "\n").encode(), 0o600, owner, what=f"{what}, as given")
        else:
            installer.write(rel, (secrets.token_urlsafe(32) + "\n").encode(), 0o600, owner, keep=True, what=what)
        installer.keep_private(rel, owner)
    if settings.tls:
        from rigmon.setup.tls import TlsError, make_self_signed

        if installer.dry_run and not installer.exists(render.TLS_CERT):
            installer.say(f"would create {render.TLS_KEY} (TLS key), mode 600 and {render.TLS_CERT} "
                          f"(self-signed certificate for {', '.join(tls_names)}), mode 644")
        elif not installer.exists(render.TLS_CERT) or not installer.exists(render.TLS_KEY):
            try:
                cert, key = make_self_signed(tls_names)
            except TlsError as exc:
                installer.say(f"FAILED: TLS certificate: {exc}")
                installer.failed = True
                return
            installer.write(render.TLS_KEY, key, 0o600, owner, what="TLS key")
            installer.write(render.TLS_CERT, cert, 0o644, what=f"TLS certificate for {', '.join(tls_names)}")
        else:
            installer.say(f"kept {render.TLS_CERT} and {render.TLS_KEY}")
            installer.keep_private(render.TLS_KEY, owner)
            lacking = names_lacking(installer.path(render.TLS_CERT), asked_names or [])
            if lacking:
                installer.warn(f"the kept certificate {render.TLS_CERT} is not valid for {', '.join(lacking)} "
                              f"(--tls-name, --listen): clients reaching the agent by that name refuse it. Delete "
                              f"{render.TLS_CERT} and {render.TLS_KEY} and run this again to make one that is, then "
                              "give every client (dashboards' ca_file, Prometheus' CA file) the new certificate")
    config = render.agent_toml(settings, hardware).encode()
    installer.write(render.CONFIG_FILE, config, 0o644, keep=True, what="agent configuration")
    unit = render.systemd_unit(settings)
    unit_before = read_text_or_none(installer.path(render.UNIT_FILE))
    unit_changed = installer.write(render.UNIT_FILE, unit.encode(), 0o644, what="systemd unit")
    lost = replaced_settings(unit_before, unit) if unit_changed else []
    if lost:
        # An operator's edit of the unit (MemoryMax=, an Environment=) went without a word on the next run.
        installer.say(f"  {'would replace' if installer.dry_run else 'replaced'} in {render.UNIT_FILE}: "
                      f"{'; '.join(lost)} (setup writes this file: keep your changes in a drop-in, "
                      f"`systemctl edit {render.UNIT_NAME.removesuffix('.service')}`, which it never touches)")
    # The operator gives the ADC its name by uncommenting a line of this file (README); rewritten, a
    # re-run (--read-token-file on every node of a lab) took the name away and the agent lost its ADC.
    edited = has_active_rules(installer.path(render.UDEV_FILE))
    rules = render.udev_rules(hardware).encode()
    udev_changed = installer.write(render.UDEV_FILE, rules, 0o644, keep=edited,
                                   what="udev rule for the ADC, with your uncommented lines" if edited else
                                   "udev rule for the ADC")
    # What an uninstall removes without --purge: these files as setup wrote them, not as the operator edited them.
    record_written(installer, {render.CONFIG_FILE: config, render.UDEV_FILE: rules})
    for line in never_matching(read_text_or_none(installer.path(render.UDEV_FILE)) or "") if edited else ():
        installer.warn(f"{render.UDEV_FILE}: this line never matches (its KERNELS is a USB interface, its ATTRS "
                       f"are the USB device's; udev wants both on one device): {line}; write the device's KERNELS "
                       "(`udevadm info -a` shows it beside ATTRS{idVendor}, e.g. 1-2.3 for 1-2.3:1.0)")
    if unit_changed:
        installer.run(["systemctl", "daemon-reload"])
    if udev_changed:
        installer.run(["udevadm", "control", "--reload"], check=False)
        installer.run(["udevadm", "trigger", "--subsystem-match=tty"], check=False)
    installer.run(["systemctl", "enable", render.UNIT_NAME])
    if installer.real:
        from rigmon.setup.listen_check import listen_problem, unit_active

        listen = served_as(installer.path(render.CONFIG_FILE), (settings.node, settings.listen, settings.tls))[1]
        problem = listen_problem(listen, lambda: unit_active(render.UNIT_NAME))
        if problem and installer.dry_run:
            installer.warn(f"the start below would fail: {problem}")
        elif problem:
            installer.say(f"FAILED: not started: {problem}")
            installer.failed = True
            return
    # A changed file takes effect only on a restart; an unchanged, running agent is left alone.
    asked_at = time.time()
    started = installer.run(["systemctl", "restart" if installer.changed else "start", render.UNIT_NAME],
                            "see `journalctl -u rigmon-agent`")
    if not installer.changed:
        # The unit names rigmon's version, so a new version restarts the agent; a reinstall of the same
        # one (a checkout) changes no file, and the agent that was running went on with the old code.
        installer.say(f"note: nothing changed, so an agent already running was left running; after reinstalling "
                      f"rigmon at the same version, `systemctl restart {render.UNIT_NAME.removesuffix('.service')}` "
                      "runs the new code")
    if not started and installer.real and not installer.dry_run:
        # The unit waits for the agent to listen (Type=notify): a port taken since the check above
        # fails the start, and the agent's own line says which address and setting.
        from rigmon.setup.listen_check import last_error

        said = last_error(render.UNIT_NAME, asked_at)
        if said:
            installer.say(f"the agent said: {said}")


def read_text_or_none(path: Path) -> str | None:
    """The text of a file in place, ``None`` when there is none or this user cannot read it."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def replaced_settings(before: str | None, after: str) -> list[str]:
    """The setting lines of ``before`` (a unit in place) that ``after`` does not have: an operator's edits,
    or what an upgrade changed. Comments and blank lines are left out."""
    if before is None:
        return []
    kept = set(after.splitlines())
    return [line.strip() for line in before.splitlines()
            if line.strip() and not line.lstrip().startswith(("#", ";")) and line not in kept]
