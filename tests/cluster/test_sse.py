"""SSE parsing: the framing /v1/stream uses, and the edge cases of the format."""

from __future__ import annotations

import pytest

from rigmon.cluster.sse import SseEvent, SseParser


def feed_all(lines: list[str]) -> list[SseEvent]:
    parser = SseParser()
    return [e for line in lines if (e := parser.feed(line)) is not None]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["id: 7", "event: frame", "data: {}", ""], [SseEvent("frame", "{}", "7")]),
        ([": keepalive", ""], []),
        (["data: a", "data: b", ""], [SseEvent("message", "a\nb", None)]),
        (["data:no-space", ""], [SseEvent("message", "no-space", None)]),
        (["event: gap", "data: {}", "", "data: x", ""], [SseEvent("gap", "{}", None), SseEvent("message", "x", None)]),
        (["id: 3", "event: frame", "data: 1", "", "event: frame", "data: 2", ""],
         [SseEvent("frame", "1", "3"), SseEvent("frame", "2", "3")]),
        (["event: frame", ""], []),
        (["id: a\0b", "data: x", ""], [SseEvent("message", "x", None)]),
        (["retry: 10", "data: x", ""], [SseEvent("message", "x", None)]),
    ],
    ids=["frame", "comment", "multiline", "no-space", "two-events", "id-persists", "no-data", "nul-id", "retry"],
)
def test_parser(lines: list[str], expected: list[SseEvent]) -> None:
    assert feed_all(lines) == expected
