"""Incremental parser for server-sent events (the text/event-stream format of /v1/stream)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event.

    ``id`` is the last event id seen on the stream so far (the SSE "last event ID buffer"),
    ``None`` when the server never sent one.
    """

    event: str
    data: str
    id: str | None


class SseParser:
    """Turns the lines of an event stream into `SseEvent`s.

    Feed it lines without their terminators (``httpx.Response.aiter_lines`` splits on
    CR, LF and CRLF as the format requires).
    """

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self.last_id: str | None = None

    def feed(self, line: str) -> SseEvent | None:
        """Take one line; return the event a blank line completes, else ``None``."""
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SseEvent(event=self._event or "message", data="\n".join(self._data), id=self.last_id)
            self._event = ""
            self._data = []
            return event
        if line.startswith(":"):
            # A comment: the agent's keep-alive.
            return None
        # "event: frame" / "data: {...}" / "id: 42"; a line without a colon is a field with no value.
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self.last_id = value
        return None
