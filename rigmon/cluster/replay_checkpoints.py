"""How many checkpoints of its state a replay keeps: as many as an estimate of their bytes allows.

A checkpoint copies every node's store (`rigmon.cluster.node_store.NodeStore`) and alarm tracker. A
store's bytes are mostly its history rings: one float (8 bytes) a frame for each series, up to
`HISTORY_POINTS` frames; a node with 8 GPUs, arrays and links keeps nearly three times the series of a
host-only one, so a count of node copies says little of the memory they take. The estimate is
taken from the bundle before playing (`node_copy_bytes`), as a node stands at the end of its
recording (a checkpoint earlier on holds less), and checked against copies measured in
``tests/cluster/test_replay_checkpoint_bytes.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain, islice

from rigmon.cluster.history import HISTORY_POINTS, MAX_DETAIL_SERIES, MAX_TEMPERATURE_SERIES, SERIES
from rigmon.cluster.kept_events import EVENTS_KEPT, MARK_KIND, MARKS_KEPT
from rigmon.cluster.temperature_charts import held_temperatures
from rigmon.schema import Event, Frame, encode
from rigmon.summary import detail_values

#: Checkpoints kept at most (spread evenly over the recording), and the frames (all nodes
#: together) between two at least: a seek back starts from the nearest one before the new cursor
#: instead of from the start.
CHECKPOINTS = 8
CHECKPOINT_MIN_FRAMES = 1000
#: Bytes all checkpoints together may take, by `node_copy_bytes` (about what the earlier cap of 128
#: node copies allowed): 16 host-only nodes with an hour of history (~0.22 MB a node) keep 8, 64 of
#: them 3, 256 none (8 copies of those would be ~0.5 GB); 16 nodes of 8 GPUs (~0.63 MB) keep 4, 256
#: host-only nodes of a ten-minute recording 3.
CHECKPOINT_BUDGET_BYTES = 50_000_000
#: A store's parts besides its rings, latest frame and events (summary, worst window, rail memory,
#: alarms, tracker): measured at 8-14 kB.
NODE_COPY_BASE_BYTES = 16_000
#: Bytes of one history point of one series (`rigmon.cluster.history.Ring`: an array of doubles).
POINT_BYTES = 8
#: Bytes of one history point of one temperature series (4-byte floats: `rigmon.cluster.history`).
TEMPERATURE_POINT_BYTES = 4
#: History series every node keeps besides `SERIES`: seqs and times.
RING_SERIES = len(SERIES) + 2


def node_copy_bytes(frames: Sequence[Frame]) -> int:
    """Estimated bytes of one copy of a node's store after ``frames`` (its recording, oldest first).

    The history rings exactly: points (frames, at most `HISTORY_POINTS`) times series times 8
    bytes, the per-device series being those its first and last frames name (at most
    `MAX_DETAIL_SERIES`), and the temperature series its charts draw at 4 bytes a point (those the first
    and last frames name, at most `MAX_TEMPERATURE_SERIES`); the latest frame and the events kept (the newest `EVENTS_KEPT` that are not
    marks and the newest `MARKS_KEPT` marks, `rigmon.cluster.kept_events`) at their wire JSON's size
    (their copies measure within a third of it); the rest `NODE_COPY_BASE_BYTES`.
    """
    if not frames:
        return NODE_COPY_BASE_BYTES
    details = set(detail_values(frames[0].readings)) | set(detail_values(frames[-1].readings))
    series = RING_SERIES + min(MAX_DETAIL_SERIES, len(details))
    def newest(marks: bool) -> Iterator[Event]:
        return (e for frame in reversed(frames) for e in reversed(frame.events) if (e.kind == MARK_KIND) == marks)

    kept = chain(islice(newest(False), EVENTS_KEPT), islice(newest(True), MARKS_KEPT))
    events = sum(len(encode(e)) for e in kept)
    points = min(HISTORY_POINTS, len(frames))
    temperatures = min(MAX_TEMPERATURE_SERIES, len(set(held_temperatures(frames[0].readings))
                                                   | set(held_temperatures(frames[-1].readings))))
    return (NODE_COPY_BASE_BYTES + (series * POINT_BYTES + temperatures * TEMPERATURE_POINT_BYTES) * points
            + len(encode(frames[-1])) + events)


def checkpoint_spacing(frames: int, copy_bytes: int) -> int:
    """Frames between two checkpoints of a recording of ``frames`` frames (all nodes together)
    whose every checkpoint takes ``copy_bytes`` (its nodes' `node_copy_bytes` added up):
    `CHECKPOINTS` at most, fewer as `CHECKPOINT_BUDGET_BYTES` allows, none (more than ``frames``)
    when one alone would exceed it (a seek back then starts from the first frame)."""
    kept = min(CHECKPOINTS, CHECKPOINT_BUDGET_BYTES // max(1, copy_bytes))
    # ``kept`` checkpoints and a stretch after the last (one at the very end would serve no seek back).
    return max(CHECKPOINT_MIN_FRAMES, frames // (kept + 1) + 1) if kept else frames + 1
