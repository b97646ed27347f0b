"""QuietServer: uvicorn's housekeeping once a second, an exit seen at once, the Date header kept."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from rigmon.agent import quiet_server
from rigmon.agent.quiet_server import QuietServer


async def hello(scope: dict[str, object], receive: object, send: object) -> None:
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b"hi"})  # type: ignore[operator]


async def test_serves_with_a_date_header_and_exits_without_waiting_for_the_tick(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # With an hour between ticks, only the exit event can end the server in time.
    monkeypatch.setattr(quiet_server, "TICK_S", 3600.0)
    import uvicorn

    server = QuietServer(uvicorn.Config(hello, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done()
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{port}/")
    assert response.text == "hi"
    assert "date" in response.headers
    server.should_exit = True
    await asyncio.wait_for(task, 10)
    assert server.should_exit
