"""The node screen's Events box: a job's marks do not push the hardware's trouble out of it."""

from __future__ import annotations

from textual.app import App, ComposeResult

from rigmon.schema import Event
from rigmon.tui.widgets.event_list import SHOWN, EventList, event_lines
from tests.tui.snapshot_apps.fake_agent import START_AT
from tests.tui.test_sources import text


def mark(n: int, at: float) -> Event:
    return Event(id=f"m{n}", at=at, kind="mark", severity="info", subject="node:node04",
                 message=f"epoch {n} checkpoint", data={"text": f"epoch {n} checkpoint"})


def trouble(n: int, at: float, message: str) -> Event:
    return Event(id=f"t{n}", at=at, kind="xid", severity="critical", subject="gpu:2", message=message)


def demo_events() -> tuple[Event, ...]:
    """node04 in the demo after a while: an Xid and a rail sag between marks every 30 s, then 40 more marks."""
    events = [mark(n, START_AT + 30 * n) for n in range(1, 6)]
    events += [trouble(1, START_AT + 170, "Xid 79: GPU has fallen off the bus"),
               trouble(2, START_AT + 171, "12 V rail minimum 11.38 V")]
    events += [mark(n, START_AT + 30 * n) for n in range(6, 46)]
    return tuple(events)


class ListApp(App[None]):
    def compose(self) -> ComposeResult:
        yield EventList()


async def test_trouble_stays_in_the_box_under_a_run_of_marks() -> None:
    # Before: the box drew the newest 30 events, at 80 columns all of them "epoch N checkpoint":
    # the Xid and the rail sag of node04 were gone from the node screen after ~15 minutes.
    app = ListApp()
    async with app.run_test(size=(80, 24)) as pilot:
        box = app.query_one(EventList)
        box.events = demo_events()
        await pilot.pause()
        # Words as read, the message column wrapping at 80 columns.
        words = " ".join(text(box.render(), box.content_size.width).split())
        assert words.startswith("at (UTC) severity subject message 00:22:30 mark node:node04 "
                                "40 marks since 00:03:00, last: epoch 45 checkpoint 00:02:51 critical gpu:2 "
                                "12 V rail minimum 11.38 V 00:02:50 critical gpu:2 Xid 79: GPU has fallen off the bus "
                                "00:02:30 mark node:node04 5 marks since 00:00:30, last: epoch 5 checkpoint")


def test_a_lone_mark_is_its_own_line_and_the_limit_counts_lines() -> None:
    events = []
    for n in range(SHOWN + 5):
        events += [trouble(n, START_AT + 60 * n, f"trouble {n}"), mark(n, START_AT + 60 * n + 30)]
    lines = event_lines(events)
    assert len(lines) == SHOWN
    assert [(line.marks, line.event.message) for line in lines[:2]] == [
        (1, f"epoch {SHOWN + 4} checkpoint"), (0, f"trouble {SHOWN + 4}")]
