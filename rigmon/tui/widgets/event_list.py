"""EventList: a node's recent events, newest first."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.schema import Event
from rigmon.tui.text import plain

#: Events drawn at most; older ones stay in the node's store.
SHOWN = 30
#: Below this many cells of content the time column leaves out the date when every shown
#: event is of one UTC day (an 80-column terminal), giving the messages room.
NARROW_WIDTH = 100


def stamp_format(events: Sequence[Event], width: int) -> str:
    """``strftime`` format of the time column: the full UTC date and time, or on a narrow box
    only the time (all events of one day) or month, day and minute (several days)."""
    if not 0 < width < NARROW_WIDTH:
        return "%Y-%m-%d %H:%M:%S"
    days = {time.strftime("%Y-%m-%d", time.gmtime(e.at)) for e in events}
    return "%H:%M:%S" if len(days) <= 1 else "%m-%d %H:%M"


#: The event kind of a job's own mark (POST /v1/marks, ``rigmon mark``).
MARK_KIND = "mark"


class EventList(Widget):
    """Time (UTC, from the agent's clock), severity, subject and message of recent events.

    A job's marks (``rigmon mark "epoch 3"``) read ``mark`` in the severity column, in the
    ``event-list--mark`` style, so they stand out among the hardware's events."""

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
        shown = list(events)[::-1][:SHOWN]
        stamp_as = stamp_format(shown, self.content_size.width)
        for event in shown:
            kind = MARK_KIND if event.kind == MARK_KIND else event.severity
            style = self.get_component_rich_style(f"event-list--{kind}", partial=True)
            # The agent's own timestamp, in UTC so every node reads the same.
            stamp = time.strftime(stamp_as, time.gmtime(event.at))
            table.add_row(stamp, Text(kind, style=style), plain(event.subject), plain(event.message))
        return table
