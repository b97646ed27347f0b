"""Read side of a journal for what a node had across its runs: each run's first and last frame, and the events
of chosen kinds over the whole journal (a snapshot's GPUs gone since, `rigmon.snapshot.gpus_gone`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rigmon.agent.journal.reader import JournalReader
from rigmon.schema import Event, Frame, decode

#: Seconds after a run's first visible frame time searched for it: a block's first frames may be past
#: retention (hidden), so the first shown can come a little later; an hour of blocks at most is read.
FIRST_FRAME_SEARCH_S = 3600.0


def run_spans(reader: JournalReader) -> list[tuple[str, float, float]]:
    """Each run's first and last frame time held (``(run_id, first_at, last_at)``), oldest first; runs whose
    frames are all past retention are left out. Frames and blocks are read by their times alone."""
    spans: dict[str, tuple[float, float]] = {}
    rows = reader.conn.execute(
        "SELECT run_id, MIN(taken_at), MAX(taken_at) FROM frames GROUP BY run_id "
        "UNION ALL SELECT run_id, MIN(min_at), MAX(max_at) FROM blocks GROUP BY run_id").fetchall()
    for run_id, lo, hi in rows:
        if lo is None or hi is None:
            continue
        old = spans.get(run_id)
        spans[run_id] = (float(lo), float(hi)) if old is None else (min(old[0], lo), max(old[1], hi))
    since = reader.expired_before()
    out = [(run_id, max(lo, since) if since is not None else lo, hi) for run_id, (lo, hi) in spans.items()
           if since is None or hi >= since]
    return sorted(out, key=lambda r: r[1])


def run_edge_frames(reader: JournalReader, runs: Sequence[tuple[str, float, float]]) -> list[Frame]:
    """The first and the last frame of each run of ``runs`` (`run_spans`), oldest first; a run's frame that cannot
    be read (noted in ``reader.unreadable``) is left out."""
    out: list[Frame] = []
    for run_id, first_at, last_at in runs:
        # Through the run's own frames only: another run's may share a second with it.
        firsts = reader._frames_in(first_at, min(last_at, first_at + FIRST_FRAME_SEARCH_S), run_id=run_id, limit=1)
        lasts = reader._frames_in(last_at, math.nextafter(last_at, math.inf), run_id=run_id)
        found = [raw for _, raw in firsts] + [raw for _, raw in lasts][-1:]
        out += [decode(Frame, raw) for raw in dict.fromkeys(found)]
    return out


def events_of_kinds(reader: JournalReader, kinds: Sequence[str], from_at: float = -math.inf,
                    to_at: float = math.inf) -> list[Event]:
    """The events of ``kinds`` with ``from_at <= at <= to_at``, oldest first (by the journal's kind column, so
    a long journal's other events are not decoded)."""
    marks = ", ".join("?" for _ in kinds)
    rows = reader.conn.execute(f"SELECT body FROM events WHERE kind IN ({marks}) AND at >= ? AND at <= ? "
                               "ORDER BY at, rowid", (*kinds, from_at, to_at))
    return [decode(Event, body) for (body,) in rows]
