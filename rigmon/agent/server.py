"""Serving an agent over HTTP with uvicorn: address policy, token file, start and stop."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
import stat
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import uvicorn

from rigmon.agent.agent import Agent
from rigmon.agent.quiet_server import QuietServer
from rigmon.config import split_listen


class StartupError(Exception):
    """The agent must not or cannot start; the message says why."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token_file(path: str) -> str:
    """Read a bearer token from a file that only its owner can read.

    Raises:
        StartupError: unreadable, empty, or readable by other users.
    """
    try:
        mode = os.stat(path).st_mode
        text = Path(path).read_text().strip()
    except OSError as exc:
        raise StartupError(f"token file {path}: {exc.strerror}") from None
    if mode & (stat.S_IRGRP | stat.S_IROTH | stat.S_IWGRP | stat.S_IWOTH):
        raise StartupError(f"token file {path} is readable or writable by other users; chmod 600 it")
    if not text:
        raise StartupError(f"token file {path} is empty")
    return text


def check_listen_policy(listen: str, token: str | None) -> tuple[str, int]:
    """Refuse a non-loopback address without a token; return host and port."""
    host, port = split_listen(listen)
    if not is_loopback(host) and not token:
        raise StartupError(
            f"refusing to listen on {listen} without a token: anyone on the network could read this node. "
            "Give --token-file, or listen on 127.0.0.1."
        )
    return host, port


def make_server(agent: Agent, host: str, port: int) -> uvicorn.Server:
    """A uvicorn server for the agent's app (not started)."""
    config = uvicorn.Config(
        agent.app(),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        # Bounded connection count: uvicorn answers 503 beyond it.
        limit_concurrency=agent.config.agent.max_streams + 32,
        h11_max_incomplete_event_size=agent.config.agent.max_request_bytes,
        timeout_graceful_shutdown=1,
    )
    server = QuietServer(config)
    # Signals are handled by whoever owns the loop (the CLI), not by each server.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    return server


async def serve(agent: Agent, listen: str) -> None:
    """Sample and serve until cancelled."""
    host, port = check_listen_policy(listen, agent.token)
    server = make_server(agent, host, port)
    agent.start()
    try:
        await server.serve()
    finally:
        await agent.stop()


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


def run(agent: Agent, listen: str) -> None:
    """Blocking entry point for ``rigmon agent``."""
    run_until_signalled(serve(agent, listen))
