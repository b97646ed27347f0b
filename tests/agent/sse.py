"""A minimal server-sent-events reader for tests (the dashboard has its own client)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx


@dataclass
class SseEvent:
    event: str
    data: str
    id: str | None


async def read_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    event, data, event_id = "message", [], None
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SseEvent(event, "\n".join(data), event_id)
            event, data, event_id = "message", [], None
        elif line.startswith(":"):
            continue
        else:
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "event":
                event = value
            elif key == "data":
                data.append(value)
            elif key == "id":
                event_id = value
