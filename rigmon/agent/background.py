"""BackgroundAgent: an agent served on loopback from a thread with its own event loop.

``rigmon dash`` with no node uses it to watch the machine it runs on; the dashboard then
talks to it over HTTP like to any other agent. With a state directory it records where it
serves in the directory's lock file, as ``rigmon agent`` does, for ``rigmon check``.
"""

from __future__ import annotations

import asyncio
import threading

import uvicorn

from rigmon.agent.agent import Agent
from rigmon.agent.server import make_server


def bound_port(server: uvicorn.Server) -> int:
    """The port a started uvicorn server listens on."""
    for listener in server.servers:
        for sock in listener.sockets:
            return int(sock.getsockname()[1])
    raise RuntimeError("server has no socket")


class BackgroundAgent:
    """Runs ``agent`` on ``host:port`` (0: a free port) in a daemon thread.

    Use `start` to get its URL and `stop` to end it.
    """

    def __init__(self, agent: Agent, host: str = "127.0.0.1", port: int = 0) -> None:
        self.agent = agent
        self.host = host
        self.port = port
        self.url: str | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="rigmon-local-agent", daemon=True)

    def start(self, timeout_s: float = 10.0) -> str:
        """Start serving and return the agent's URL.

        Raises:
            RuntimeError: the server did not come up within ``timeout_s``.
        """
        self._thread.start()
        if not self._ready.wait(timeout_s) or self.url is None:
            raise RuntimeError(f"local agent did not start: {self._error or 'timed out'}")
        return self.url

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the server and the sampler, and wait for the thread."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = make_server(self.agent, self.host, self.port)
        self.agent.start()
        task = asyncio.create_task(server.serve())
        try:
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("server stopped during start-up")
                await asyncio.sleep(0.01)
            scheme = "https" if self.agent.config.agent.tls_cert_file else "http"
            port = bound_port(server)
            self.url = f"{scheme}://{self.host}:{port}"
            # As `rigmon agent` does: ``rigmon check`` finds the agent of its state directory by the address
            # in its lock file (nothing without a state directory; taken out again at the stop).
            self.agent.record_listening(f"{self.host}:{port}")
            self._ready.set()
            await self._stop.wait()
        finally:
            server.should_exit = True
            await asyncio.gather(task, return_exceptions=True)
            await self.agent.stop()
