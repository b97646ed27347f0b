"""EventList: a node's recent events, newest first, a run of the job's marks folded into one line."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.cluster.kept_events import MARK_KIND
from rigmon.schema import Event
from rigmon.tui.text import plain

#: Events drawn at most; older ones stay in the node's store.
SHOWN = 30
#: Below this many cells of content the time column leaves out the date when every shown
#: event is of one UTC day (an 80-column terminal), giving the messages room.
NARROW_WIDTH = 100


def stamp_format(times: Sequence[float], width: int) -> str:
    """``strftime`` format of the time column (Unix s ``times`` shown): the full UTC date and time,
    or on a narrow box only the time (all of one day) or month, day and minute (several days)."""
    if not 0 < width < NARROW_WIDTH:
        return "%Y-%m-%d %H:%M:%S"
    days = {time.strftime("%Y-%m-%d", time.gmtime(at)) for at in times}
    return "%H:%M:%S" if len(days) <= 1 else "%m-%d %H:%M"


@dataclass(frozen=True, slots=True)
class EventLine:
    """One line of the list: an event, or a run of marks with no other event between them.

    Attributes:
        event: the event, or the run's newest mark.
        marks: marks the line stands for (0: ``event`` is not a mark).
        first_at: when the run's oldest mark was posted (Unix s, the agent's clock).
    """

    event: Event
    marks: int = 0
    first_at: float = 0.0


def event_lines(events: Sequence[Event], limit: int = SHOWN) -> list[EventLine]:
    """Up to ``limit`` lines of ``events`` (oldest first), newest first, each run of consecutive
    marks one line: a job that marks every checkpoint does not push the hardware's trouble out of
    the box, and the line beside an incident still says what the job was doing then."""
    lines: list[EventLine] = []
    for event in reversed(events):
        last = lines[-1] if lines else None
        if event.kind == MARK_KIND and last is not None and last.marks:
            lines[-1] = EventLine(last.event, last.marks + 1, event.at)
            continue
        if len(lines) == limit:
            break
        lines.append(EventLine(event, 1, event.at) if event.kind == MARK_KIND else EventLine(event))
    return lines


def mark_text(line: EventLine, stamp_as: str) -> str:
    """``epoch 40 checkpoint``, or for a run ``12 marks since 08:10:00, last: epoch 40 checkpoint``
    (the time as the time column writes it)."""
    if line.marks <= 1:
        return line.event.message
    since = time.strftime(stamp_as, time.gmtime(line.first_at))
    return f"{line.marks} marks since {since}, last: {line.event.message}"


class EventList(Widget):
    """Time (UTC, from the agent's clock), severity, subject and message of recent events.

    A job's marks (``rigmon mark "epoch 3"``) read ``mark`` in the severity column, in the
    ``event-list--mark`` style, so they stand out among the hardware's events; marks with no other
    event between them are one line (`event_lines`)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "event-list--label",
        "event-list--info",
        "event-list--warning",
        "event-list--critical",
        "event-list--mark",
        "event-list--empty",
    }
    DEFAULT_CSS = """
    EventList {
        height: auto;
    }
    """

    events: reactive[tuple[Event, ...]] = reactive(tuple, layout=True)
    """The node's recent events, oldest first."""

    def on_mount(self) -> None:
        self.border_title = "Events"

    def render(self) -> RenderableType:
        events: Sequence[Event] = self.events
        if not events:
            return Text("no events", style=self.get_component_rich_style("event-list--empty", partial=True))
        table = Table(box=None, padding=(0, 1), show_edge=False,
                      header_style=self.get_component_rich_style("event-list--label", partial=True))
        table.add_column("at (UTC)", no_wrap=True)
        table.add_column("severity", no_wrap=True)
        table.add_column("subject", no_wrap=True)
        table.add_column("message", overflow="fold")
        shown = event_lines(events)
        # A run's first mark is written like the times: with its date when the lines span days.
        times = [at for line in shown for at in (line.event.at, line.first_at or line.event.at)]
        stamp_as = stamp_format(times, self.content_size.width)
        for line in shown:
            event = line.event
            kind = MARK_KIND if line.marks else event.severity
            style = self.get_component_rich_style(f"event-list--{kind}", partial=True)
            # The agent's own timestamp, in UTC so every node reads the same.
            stamp = time.strftime(stamp_as, time.gmtime(event.at))
            message = mark_text(line, stamp_as) if line.marks else event.message
            table.add_row(stamp, Text(kind, style=style), plain(event.subject), plain(message))
        return table
