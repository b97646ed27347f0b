"""A job marking every 30 s does not push a node's hardware trouble out of the dashboard: marks are
kept apart from the other events, and every reader of the store's events gets both, in order."""

from __future__ import annotations

import random

from msgspec.structs import replace

from rigmon.cluster.incident_timeline import timeline
from rigmon.cluster.kept_events import EVENTS_KEPT, MARKS_KEPT, KeptEvents
from rigmon.cluster.replay_checkpoints import node_copy_bytes
from rigmon.cluster.node_store import NodeStore
from rigmon.schema import Event, Frame, encode
from tests.tui.snapshot_apps.fake_agent import START_AT, FakeClock, make_frame

RNG = random.Random(5)
#: The demo's node04 job: a mark every 30 s.
MARK_EVERY_S = 30


def mark(n: int, at: float) -> Event:
    return Event(id=f"r1-mark-{n}", at=at, kind="mark", severity="info", subject="node:node01",
                 message=f"epoch {n} checkpoint", data={"text": f"epoch {n} checkpoint", "by": "train.py"})


def lost(at: float) -> Event:
    return Event(id="r1-lost", at=at, kind="gpu_lost", severity="critical", subject="gpu:2",
                 message="GPU 2 fell off the bus", data={})


def marked_frames(marks: int) -> list[Frame]:
    """A node losing a GPU at its second frame, then a job marking every 30 s ``marks`` times."""
    frames = [make_frame("node01", "r1", 1, RNG)]
    frames.append(replace(make_frame("node01", "r1", 2, RNG), events=(lost(START_AT + 2),)))
    for n in range(marks):
        seq = 3 + n * MARK_EVERY_S
        frames.append(replace(make_frame("node01", "r1", seq, RNG), events=(mark(n, START_AT + seq),)))
    return frames


def test_two_hours_of_marks_leave_the_lost_gpu_in_the_store() -> None:
    # Before: one deque of 200 events; 240 marks (two hours of the demo's node04) evicted the loss.
    store = NodeStore("k", "http://n:1", FakeClock())
    store.add_frames(marked_frames(240))
    events = list(store.events)
    assert [e.kind for e in events if e.kind != "mark"] == ["agent_started", "gpu_lost"]
    # The newest marks are kept (as many as `MARKS_KEPT`), in arrival order after the loss.
    marks = [e for e in events if e.kind == "mark"]
    assert len(marks) == MARKS_KEPT and marks[-1].message == "epoch 239 checkpoint"
    assert [e.at for e in events] == sorted(e.at for e in events)
    # The node screen's incident timeline still begins at the loss.
    steps = timeline(tuple(events))
    assert any(step.level == "bad" and "GPU 2" in step.text for step in steps), steps


def test_marks_and_other_events_are_each_bounded() -> None:
    kept = KeptEvents(kept=3, marks_kept=2)
    others = [replace(lost(START_AT + n), id=f"r1-{n}") for n in range(5)]
    kept.extend([others[0], mark(0, START_AT), others[1], mark(1, START_AT + 1), mark(2, START_AT + 2)])
    kept.extend(others[2:])
    assert [e.id for e in kept] == ["r1-mark-1", "r1-mark-2", "r1-2", "r1-3", "r1-4"]
    assert len(kept) == 5


def test_the_events_keep_their_arrival_order_when_nothing_is_dropped() -> None:
    kept = KeptEvents()
    arrived = [mark(0, START_AT), lost(START_AT + 1), mark(1, START_AT + 2), replace(lost(START_AT + 3), id="r1-x")]
    kept.extend(arrived[:2])
    kept.extend(arrived[2:])
    assert list(kept) == arrived


def test_replay_checkpoints_count_the_marks_kept_apart() -> None:
    # A checkpoint copies both: the estimate counts the newest marks besides the other events kept.
    # The last frame carries no event: only the events kept differ between the two estimates.
    frames = marked_frames(MARKS_KEPT + EVENTS_KEPT)
    frames.append(make_frame("node01", "r1", frames[-1].seq + 1, RNG))
    events = [e for f in frames for e in f.events]
    kept = [e for e in events if e.kind == "mark"][-MARKS_KEPT:] + [e for e in events if e.kind != "mark"]
    bare = [replace(f, events=()) for f in frames]
    assert node_copy_bytes(frames) - node_copy_bytes(bare) == sum(len(encode(e)) for e in kept)
