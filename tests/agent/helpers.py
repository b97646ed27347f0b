"""Helpers of the agent tests: the port of an agent served by uvicorn on a free port."""

from __future__ import annotations

import asyncio

import uvicorn


async def listening_port(server: uvicorn.Server) -> int:
    """Wait until ``server`` (serving on port 0 in a task) listens, and return the port it was given."""
    while not server.started:
        await asyncio.sleep(0.01)
    return int(server.servers[0].sockets[0].getsockname()[1])
