"""The events of a node's window in a bundle: those stamped in it, and every event its frames carry.

A frame is stamped when it is published and carries the events since the one before; an event's own time can
be later than its frame's: a kernel log line's is the kernel's clock (a few tenths of a second later, and later
than the frames a pushed reading publishes right after), an alarm judged on the frame is stamped after it by
milliseconds. The window ends at the latest frame's ``taken_at``; asked for by their own time alone (the
agent's ``/v1/history``, the journal's events), the events of its last frames could be left out: the very Xid
the operator took the snapshot for. Each event belongs to the window of the frame that carries it.
"""

from __future__ import annotations

import gzip
import io
import zlib

from msgspec.structs import replace

from rigmon.schema import Event, Frame, SchemaError, decode
from rigmon.snapshot.bundle import NodePart

#: How a frame without events ends (``events`` is a frame's last key, as the agent encodes it): such a line is
#: not decoded. Any other line is, so a frame encoded otherwise loses nothing, it only costs its decoding.
_NO_EVENTS_END = b'"events":[]}'


def carried_events(frames_gz: bytes) -> list[Event]:
    """The events the frames of ``frames_gz`` carry (gzip members of wire JSON lines, as `NodePart.frames_gz`).

    Returns:
        The events, frame by frame as the frames come (oldest first), each frame's in its order. Only the
        lines of frames that carry events are decoded; a line that is not a frame is skipped, and a
        stream that does not decompress ends there (what came before it is kept).
    """
    events: list[Event] = []
    if not frames_gz:
        return events
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(frames_gz)) as lines:
            for raw in lines:
                line = raw.rstrip()
                if not line or line.endswith(_NO_EVENTS_END):
                    continue
                try:
                    events += decode(Frame, line).events
                except SchemaError:
                    continue
    except (OSError, EOFError, zlib.error):
        pass
    return events


def add_carried_events(part: NodePart) -> None:
    """Add to ``part``'s history the events its frames carry that it does not hold (stamped outside the window).

    Its events stay ordered by their own time. When any is added, ``history_json`` (the agent's answer, which
    lacks them) is dropped, so that the bundle's series.json is written from the history, with them.
    """
    if part.history is None or not part.frames_gz:
        return
    held = {event.id for event in part.history.events}
    added: dict[str, Event] = {}
    for event in carried_events(part.frames_gz):
        if event.id not in held:
            added.setdefault(event.id, event)
    if not added:
        return
    # Stable: events of one time keep the order they were recorded in.
    events = sorted((*part.history.events, *added.values()), key=lambda event: event.at)
    part.history = replace(part.history, events=tuple(events))
    part.history_json = None
