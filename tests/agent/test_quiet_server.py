"""QuietServer: no wake-ups while idle, an exit seen at once (from any thread), the Date header exact."""

from __future__ import annotations

import asyncio
import threading
from email.utils import formatdate

import httpx
import uvicorn

from rigmon.agent.quiet_server import DatedServerState, QuietServer


async def hello(scope: dict[str, object], receive: object, send: object) -> None:
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b"hi"})  # type: ignore[operator]


def make() -> QuietServer:
    return QuietServer(uvicorn.Config(hello, host="127.0.0.1", port=0, log_level="warning", lifespan="off",
                                      headers=[("x-node", "n1")]))


async def started(server: QuietServer) -> asyncio.Task[None]:
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done()
        await asyncio.sleep(0.01)
    return task


async def test_serves_with_a_date_header_and_exits_when_told() -> None:
    server = make()
    task = await started(server)
    port = server.servers[0].sockets[0].getsockname()[1]
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{port}/")
    assert response.text == "hi"
    assert "date" in response.headers and response.headers["x-node"] == "n1"
    server.should_exit = True
    await asyncio.wait_for(task, 10)
    assert server.should_exit


async def test_an_idle_server_runs_no_task_of_its_own() -> None:
    # uvicorn's loop sleeps 0.1 s at a time; a once-a-second `wait_for` started and cancelled a
    # task every second. Idle, the server waits on its exit and nothing else.
    server = make()
    task = await started(server)
    await asyncio.sleep(0.05)
    assert asyncio.all_tasks() == {task, asyncio.current_task()}
    server.should_exit = True
    await asyncio.wait_for(task, 10)


async def test_an_exit_set_from_another_thread_ends_the_server() -> None:
    server = make()
    task = await started(server)
    setter = threading.Thread(target=setattr, args=(server, "should_exit", True))
    setter.start()
    setter.join()
    await asyncio.wait_for(task, 10)


def test_the_date_header_is_made_for_the_second_a_response_reads_it() -> None:
    now = [1_700_000_000.2]
    state = DatedServerState(True, [(b"x-node", b"n1")], clock=lambda: now[0])
    first = state.default_headers
    assert first == [(b"date", formatdate(1_700_000_000.2, usegmt=True).encode()), (b"x-node", b"n1")]
    now[0] = 1_700_000_000.9
    assert state.default_headers is first
    now[0] = 1_700_000_001.0
    assert state.default_headers[0] == (b"date", formatdate(1_700_000_001.0, usegmt=True).encode())
    assert DatedServerState(False, [(b"x-node", b"n1")]).default_headers == [(b"x-node", b"n1")]
