"""A node whose pull fails is said to have failed once: naming the agent and its address, why, and what the
bundle lacks of it; the steps it could not take are one progress line, not one line each with the reason."""

from __future__ import annotations

import io
from pathlib import Path

import httpx

from rigmon.http_errors import describe_http_error
from rigmon.snapshot.command import pull_parts
from rigmon.snapshot.failures import failure_line
from rigmon.snapshot.progress import Progress
from rigmon.snapshot.pull import pull_agent
from tests.snapshot.test_pull_retry import journaled_agent
from tests.test_cli import free_port, rigmon


class HistoryUnreachable(httpx.AsyncBaseTransport):
    """The agent's own answers until the pull asks for its history: then the network goes away."""

    def __init__(self, app: httpx.ASGITransport) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/history":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return await self.app.handle_async_request(request)


def test_an_unreachable_agent_is_one_progress_line_and_its_reason_once(tmp_path: Path) -> None:
    """Before: the connection error four times on the progress stream (once per step) and once more at the end."""
    url = f"http://127.0.0.1:{free_port()}"
    stream = io.StringIO()
    (part,) = pull_parts([url], [], 60.0, stream=stream)
    lines = stream.getvalue().splitlines()
    assert lines == [f"[4/4] {url}: failed (the reason follows at the end)"]
    assert part.error == (f"connection refused: no agent is listening at {url} (is it running? `systemctl status "
                          "rigmon-agent` on the node; is the port right?); nothing of it is in the bundle")
    assert failure_line(part) == f"{url}: {part.error}"


async def test_a_pull_that_fails_midway_names_the_agent_its_address_and_what_the_bundle_lacks(
        tmp_path: Path) -> None:
    agent, _ = journaled_agent(tmp_path)
    out = io.StringIO()
    transport = HistoryUnreachable(httpx.ASGITransport(app=agent.app()))
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        part = await pull_agent(client, "http://agent", 1001.0, Progress(4, out))
    said = out.getvalue().splitlines()
    assert said[0] == "[1/4] t1: info" and said[1].startswith("[2/4] t1: ") and said[1].endswith("files captured")
    assert said[2:] == ["[4/4] t1: failed (the reason follows at the end)"]
    assert part.info is not None and part.config is not None and part.history is None and part.frame_count == 0
    why = describe_http_error(httpx.ConnectError("refused", request=httpx.Request("GET", "http://agent/v1/history")))
    assert part.error == f"{why}; the bundle lacks its history (series and events) and its frames"
    assert failure_line(part) == f"t1 (http://agent): {part.error}"


def test_the_command_says_an_unreachable_agents_failure_once_and_exits_3(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    out = rigmon("snapshot", dead, "-o", str(tmp_path / "none.tar.gz"), timeout=60)
    assert out.returncode == 3 and not (tmp_path / "none.tar.gz").exists()
    assert out.stderr.count("connection refused") == 1, out.stderr
    assert (f"rigmon: http://{dead}: connection refused: no agent is listening at http://{dead} (is it running? "
            "`systemctl status rigmon-agent` on the node; is the port right?); nothing of it is in the bundle\n"
            in out.stderr), out.stderr
    assert out.stderr.endswith(f"rigmon: no node could be pulled; {tmp_path / 'none.tar.gz'} not written\n")
