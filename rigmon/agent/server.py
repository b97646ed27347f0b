"""Serving an agent over HTTP with uvicorn: address policy, token file, start and stop."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import os
import pwd
import signal
import socket
import stat
from collections.abc import Callable, Coroutine
from typing import Any

import uvicorn

from rigmon.agent.agent import Agent
from rigmon.agent.connections import ConnectionLimits, guarded_protocol, h11_buffer_limit
from rigmon.agent.listen_errors import bind_refusal
from rigmon.agent.quiet_server import QuietServer
from rigmon.agent.state_lock import StateDirError
from rigmon.config import split_listen
from rigmon.config.common import bearer_token_fault

#: Longest wait, before dropping privileges, for the collectors' first run and the journal's open.
SETTLE_TIMEOUT_S = 10.0


class StartupError(Exception):
    """The agent must not or cannot start; the message says why."""


class ListenError(StartupError):
    """The agent cannot listen on ``listen`` (``HOST:PORT``): ``reason`` (see `bind_refusal`)."""

    def __init__(self, listen: str, reason: str) -> None:
        super().__init__(f"cannot serve on {listen}: {reason}")
        self.listen = listen
        self.reason = reason


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_private_file(path: str, what: str = "token file", must_be: str = "a token file") -> None:
    """Refuse a secret (token, TLS key) that other users can read or write, or that is no regular file
    (``must_be``: what it must be, for the message, as `read_small_file` words it).

    Raises:
        StartupError: absent, unreadable, or open to group or others.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise StartupError(f"{what} {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        # Before its mode: "chmod 600" would be no advice for a directory (755 as made), and harmful for
        # a device: `--token-file /dev/null` was told to "chmod 600 it", which as root breaks /dev/null.
        raise StartupError(f"{what} {path} is {_file_kind(mode)}; {must_be} must be a regular file")
    if mode & (stat.S_IRGRP | stat.S_IROTH | stat.S_IWGRP | stat.S_IWOTH):
        raise StartupError(f"{what} {path} is readable or writable by other users; chmod 600 it")


def _file_kind(mode: int) -> str:
    """What a file that is not a regular one is, for a message (``a directory``, ``a character device``)."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


#: Largest token file read (a token is a line; anything longer is not a token file).
MAX_TOKEN_FILE_BYTES = 4096


def read_small_file(path: str, origin: str, max_bytes: int, what: str) -> bytes:
    """The bytes of a small regular file the agent reads at start (a token, a certificate, a key).

    The file is opened non-blocking and checked on the open descriptor: a FIFO (or a device)
    there would otherwise hang the agent's start for good, waiting for a writer.

    Args:
        path: the file.
        origin: what named it, as the operator gave it (``--token-file``, ``environment
            RIGMON_AGENT_TOKEN_FILE``, ``/etc/rigmon/agent.toml: agent.token_file``: see
            `rigmon.config.setting_origin`), for the error message.
        max_bytes: the most such a file holds.
        what: what the file must be, for the error message (``a token file``).

    Raises:
        StartupError: not found, unreadable, not a regular file, or over ``max_bytes``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except PermissionError as exc:
        raise StartupError(f"{origin} {path}: {exc.strerror} (the agent runs as uid {os.getuid()})") from None
    except OSError as exc:
        raise StartupError(f"{origin} {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else "not a file"
            raise StartupError(f"{origin} {path} is {kind}; {what} must be a regular file")
        raw = os.read(fd, max_bytes + 1)
    except OSError as exc:
        raise StartupError(f"{origin} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        raise StartupError(f"{origin} {path} is over {max_bytes} bytes; it is not {what}")
    return raw


def read_token_file(path: str, origin: str = "token_file", bearer: bool = True) -> str:
    """Read a bearer token from a regular file that only its owner can read (see `read_small_file`).

    Leading and trailing whitespace (the newline of ``openssl rand -hex 24 > FILE``) is not part
    of the token.

    Args:
        path: the file.
        origin: what named it, as the operator gave it (see `read_small_file`).
        bearer: the secret is sent as ``Authorization: Bearer TOKEN``, so it must be one word:
            spaces, line breaks or control characters inside it are refused. ``False`` for a
            secret that never leaves the node (the probes' key).

    Raises:
        StartupError: not a regular file, unreadable, empty, too long, readable by other users, or
            (``bearer``) more than one word.
    """
    check_private_file(path, origin)
    raw = read_small_file(path, origin, MAX_TOKEN_FILE_BYTES, "a token file")
    try:
        text = raw.decode().strip()
    except UnicodeDecodeError:
        raise StartupError(f"{origin} {path} is not text") from None
    if not text:
        raise StartupError(f"{origin} {path} is empty")
    fault = bearer_token_fault(text) if bearer else None
    if fault:
        raise StartupError(f"{origin} {path} {fault}")
    return text


def check_distinct_tokens(token: str | None, control_token: str | None,
                          origins: tuple[str, str] = ("token_file", "control_token_file")) -> None:
    """Refuse one token for both scopes: every reader could then acknowledge alarms.

    Args:
        origins: what named the read token's file and the control token's (see `read_token_file`).

    Raises:
        StartupError: naming both settings.
    """
    if token and control_token and hmac.compare_digest(token.encode(), control_token.encode()):
        raise StartupError(f"{origins[1]} holds the same token as {origins[0]}: every reader could "
                           "acknowledge alarms; give the control scope a token of its own")


def check_user(user: str, origin: str = "--user") -> pwd.struct_passwd:
    """The account of ``user``, which this process can switch to: checked before the agent binds its port.

    Args:
        origin: what named the user, as the operator gave it (``--user``, ``agent.toml: agent.user``).

    Raises:
        StartupError: no such user, or another user than this process's without root.
    """
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise StartupError(f"{origin} {user}: no such user") from None
    if os.getuid() not in (0, entry.pw_uid):
        raise StartupError(f"{origin} {user}: switching users needs root (running as uid {os.getuid()})")
    return entry


def drop_privileges(user: str, keep_dirs: tuple[str, ...] = ()) -> None:
    """Switch this process (every thread) to ``user``, with that user's groups.

    Call after the port is bound and devices are open: what is already open stays usable.
    ``keep_dirs`` (the state directory: journal, alarm state) are handed to the user first, so it can
    keep writing there and open them again after a restart. Without root, naming the user
    one already is is accepted and changes nothing.

    Raises:
        StartupError: unknown user, no root, or the switch did not stick.
    """
    entry = check_user(user)
    if os.getuid() != 0:
        return
    for top in keep_dirs:
        for base, dirs, files in os.walk(top):
            for name in [base, *(os.path.join(base, n) for n in (*dirs, *files))]:
                os.lchown(name, entry.pw_uid, entry.pw_gid)
    # Supplementary groups first (dialout for the serial ADC), then gid, then uid: after
    # setuid there is no way back, which is the point.
    os.initgroups(user, entry.pw_gid)
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise StartupError(f"--user {user}: privileges could not be dropped")


def check_listen_policy(listen: str, token: str | None) -> tuple[str, int]:
    """Refuse a non-loopback address without a token; return host and port."""
    host, port = split_listen(listen)
    if not is_loopback(host) and not token:
        raise StartupError(
            f"refusing to listen on {listen} without a token: anyone on the network could read this node. "
            "Give --token-file, or listen on 127.0.0.1."
        )
    return host, port


def max_connections(max_streams: int) -> int:
    """Connections the server holds at once: every event stream and 32 more."""
    return max_streams + 32


def make_server(agent: Agent, host: str, port: int) -> uvicorn.Server:
    """A uvicorn server for the agent's app (not started)."""
    section = agent.config.agent
    limits = ConnectionLimits(
        head_timeout_s=section.head_timeout_s,
        max_per_client=section.max_connections_per_client,
        max_total=max_connections(section.max_streams),
        max_head_bytes=section.max_request_bytes,
        tokens=tuple(t for t in (agent.token, agent.control_token) if t),
    )
    config = uvicorn.Config(
        agent.app(),
        host=host,
        port=port,
        log_level="warning",
        # uvicorn's records go through the root logger: `rigmon.logs` formats them (journald priorities).
        log_config=None,
        access_log=False,
        lifespan="off",
        # Clients are who their connection says (the rate limit's key): uvicorn's default trusts
        # X-Forwarded-For from 127.0.0.1, so any local client could pick a new bucket per request.
        # It also spares each request a pass through that middleware.
        proxy_headers=False,
        # Connections are bounded by `limits` as they are accepted (rigmon/agent/connections.py):
        # uvicorn's own limit let idle sockets turn every new request away.
        # httptools (C parser) when installed, else h11; both guarded alike.
        http=guarded_protocol(limits),
        ws="none",
        # Only h11 reads it (the fallback): its own bound, above the guard's count of head bytes.
        h11_max_incomplete_event_size=h11_buffer_limit(section.max_request_bytes),
        timeout_graceful_shutdown=1,
        ssl_certfile=agent.config.agent.tls_cert_file or None,
        ssl_keyfile=agent.config.agent.tls_key_file or None,
    )
    server = QuietServer(config)
    server.ssl_handshake_timeout_s = section.head_timeout_s
    # A plain HTTP request to the TLS port counts where a TLS handshake to the plain port does.
    server.client_faults = limits
    if section.tls_cert_file:
        # Deferred: rigmon.agent.tls_files imports this module.
        from rigmon.agent.tls_files import HandshakeFaults

        server.handshake_faults = HandshakeFaults(section.tls_cert_file)
    # Signals are handled by whoever owns the loop (the CLI), not by each server.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    return server


async def serve(agent: Agent, listen: str, user: str = "",
                on_bound: Callable[[str], None] | None = None) -> None:
    """Sample and serve until cancelled.

    With ``user``, privileges are dropped to that user once the port is bound, the TLS key
    read and the collectors started (devices opened). ``on_bound`` is called with the
    ``host:port`` actually bound (``--listen 127.0.0.1:0`` picks a free port) before the
    agent starts.
    """
    host, port = check_listen_policy(listen, agent.token)
    server = make_server(agent, host, port)
    # Load (reads the TLS key) and bind now, while still privileged; serve() then uses both.
    held = _HeldRecords()
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addFilter(held)
    binding = False
    try:
        server.config.load()
        binding = True
        sock = server.config.bind_socket()
    except (OSError, SystemExit) as exc:
        # uvicorn logs a bind failure ("[Errno 98] Address already in use") and exits in the handler
        # of the OSError: its record is held back, and the OSError is the reason in the one line
        # that says which address (and, for the operator, which setting: see `ListenError`).
        cause = exc if isinstance(exc, OSError) else exc.__context__
        if binding and isinstance(cause, OSError):
            raise ListenError(listen, bind_refusal(host, port, cause)) from None
        said = "; ".join(r.getMessage() for r in held.records if r.levelno >= logging.ERROR)
        detail = f": {exc}" if isinstance(exc, OSError) else f": {said}" if said else ""
        raise StartupError(f"cannot serve on {listen}{detail}") from None
    finally:
        uvicorn_log.removeFilter(held)
    for record in held.records:  # anything uvicorn said while loading, when it did start
        uvicorn_log.handle(record)
    # Listening before saying so: uvicorn's bind leaves listen() to the server's start, and a
    # script that connected on the line below was refused. Connections now wait in the backlog
    # until the server accepts (after the collectors start, and the privileges are dropped).
    sock.listen(server.config.backlog)
    if on_bound is not None:
        on_bound(bound_address(sock))
    try:
        agent.start()
    except StateDirError as exc:
        sock.close()
        raise StartupError(str(exc)) from None
    agent.record_listening(bound_address(sock))
    try:
        if user:
            await _settled(agent)
            state_dir = agent.config.agent.state_dir
            keep: tuple[str, ...] = ()
            if state_dir and (agent.journal is not None or agent.alarm_state is not None):
                # The journal and the alarm state write there as the user: create it while root can.
                os.makedirs(state_dir, mode=0o700, exist_ok=True)
                keep = (state_dir,)
            drop_privileges(user, keep)
        await server.serve(sockets=[sock])
    finally:
        await agent.stop()


async def _settled(agent: Agent, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Wait until every collector ran once (devices opened) and the journal opened its files."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        sampled = agent.buffer is not None and agent.buffer.latest is not None
        journal = agent.journal is None or agent.journal.status.state != "pending"
        if sampled and journal:
            return
        await asyncio.sleep(0.05)


class _HeldRecords(logging.Filter):
    """Keeps the records of the logger it filters instead of letting them out."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.records.append(record)
        return False


def run_until_signalled(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on a new event loop until it ends or SIGINT/SIGTERM arrives.

    A signal cancels ``main`` so that its cleanup (stopping collectors, closing the
    journal) runs: a ``systemctl stop`` is a clean shutdown, not a crash.
    """

    async def guarded() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await main
        except asyncio.CancelledError:
            pass

    asyncio.run(guarded())


def bound_address(sock: socket.socket) -> str:
    """``host:port`` a listening socket is bound to (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def run(agent: Agent, listen: str, user: str = "", on_bound: Callable[[str], None] | None = None) -> None:
    """Blocking entry point for ``rigmon agent``."""
    run_until_signalled(serve(agent, listen, user, on_bound))
