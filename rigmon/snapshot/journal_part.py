"""A node's part of a bundle from its journal on disk alone (no agent running, e.g. after a crash)."""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from rigmon.agent.journal import JournalError, JournalReader, journal_path
from rigmon.agent.journal.layout import FORMAT_VERSION, read_error
from rigmon.agent.journal.read_only import check_journal_file
from rigmon.agent.journal.salvage import salvage
from rigmon.agent.state_lock import agent_holds
from rigmon.redact import redact
from rigmon.schema import Info, SchemaError, decode_data
from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.failures import pull_failed
from rigmon.snapshot.gpus_gone_read import gone_from_journal
from rigmon.snapshot.progress import STEPS_PER_NODE, Progress, counted
from rigmon.snapshot.run_end import run_end
from rigmon.snapshot.saved_alarms import add_saved_alarms
from rigmon.snapshot.window_events import add_carried_events


def read_journal(path: str | Path, since_s: float, progress: Progress | None = None) -> NodePart:
    """A node's part from its journal alone (no agent running, e.g. after a crash).

    The window ends at the journal's last frame, not now: after a crash the last seconds
    before it are what matters. Info and configuration are those the last run recorded
    at its start; there are no live captures. A damaged journal (cut short, bad pages) gives
    what can still be read of it (`salvage`), and ``error`` says what could not be.
    """
    part = NodePart(node=str(path), source=f"journal:{Path(path).resolve()}")
    ticked = 0

    def tick(what: str) -> None:
        nonlocal ticked
        ticked += 1
        if progress is not None:
            progress.step(part.node, what)

    try:
        with JournalReader(path) as reader:
            _read_part(part, reader, since_s, tick, journal_path(path))
            if reader.unreadable:
                part.error = (f"the journal is damaged: {len(reader.unreadable)} stored parts of the window left out: "
                              + "; ".join(reader.unreadable[:5]))
        return part
    except (JournalError, SchemaError, ValueError, OSError, sqlite3.DatabaseError, zlib.error) as exc:
        first = read_error(journal_path(path), exc)
    try:
        # Nothing to salvage where there is no file, or none this user may read (the error says which).
        check_journal_file(journal_path(path))
    except JournalError:
        return pull_failed(part, first + _state_dirs_below(Path(path)), progress, STEPS_PER_NODE - ticked)
    done = ticked
    part = NodePart(node=part.node, source=part.source)

    def tick_again(what: str) -> None:
        # The steps the first reading announced are not announced twice.
        nonlocal done
        if done:
            done -= 1
        else:
            tick(what)

    try:
        with salvage(path) as saved:
            _read_part(part, saved.reader, since_s, tick_again, journal_path(path))
            unread = "; ".join(saved.problems + saved.reader.unreadable[:5]) or "nothing more"
            part.error = (f"the journal is damaged ({first}); this bundle holds what could still be read of it "
                          f"({saved.frames} frames, {saved.events} events); could not be read: {unread}")
    except (JournalError, SchemaError, ValueError, OSError, sqlite3.DatabaseError, zlib.error) as exc:
        part = NodePart(node=part.node, source=part.source)
        return pull_failed(part, f"{first}; and nothing of it could be salvaged ({read_error(journal_path(path), exc)})",
                           progress, STEPS_PER_NODE - ticked)
    return part


def _read_part(part: NodePart, reader: JournalReader, since_s: float, tick: Callable[[str], None],
               source: Path) -> None:
    """Fill ``part`` from ``reader``: the journal file ``source`` (or its salvaged copy)."""
    runs = reader.runs()
    last_run = runs[-1] if runs else None
    if last_run is not None:
        part.node = last_run.node
        part.info = _decode_info(last_run.info)
        part.config = redact(json.loads(last_run.config)) if last_run.config else None
        # A run still marked running: killed, or still going (its agent holds the directory's lock now).
        running = last_run.clean is None and agent_holds(source.parent)
        part.run_end = run_end(reader, last_run, source, running=running)
        # A run killed or found dead: not a clean stop; one still going has not stopped at all (nothing said).
        part.run_clean = None if running else last_run.clean is True
    tick(counted(len(runs), "run"))
    span = reader.time_range()
    last_at = span[1] if span else None
    stopped_at = last_run.stopped_at if last_run is not None and last_run.clean else None
    # The window is ``since_s`` before the last frame, and runs on to the clean stop when the last run has
    # one: the events of the stop (the journal's own trouble then) are recorded with it, after the last frame.
    end = last_at if last_at is not None else stopped_at if stopped_at is not None else time.time()
    part.from_at = end - since_s
    part.to_at = end if stopped_at is None else max(end, stopped_at)
    interval_s = part.info.interval_s if part.info else 1.0
    part.capture_errors = ["no live capture: bundle made from the journal alone"]
    # The journal's own directory, not its salvaged copy's.
    directory = source.parent
    kept = sorted(p.name for p in directory.glob("journal.sqlite3.damaged-*")
                  if not p.name.endswith(("-wal", "-shm")) and p.name != source.name)
    if kept:
        # An incident before the agent set its journal aside is in those files, not in this one.
        part.capture_errors.append(f"{directory} also holds journals the agent set aside: {', '.join(kept)}; "
                                   "give them to rigmon snapshot --journal")
    written_as = reader.conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    if written_as is not None and str(written_as[0]) not in {str(v) for v in range(2, FORMAT_VERSION + 1)}:
        part.capture_errors.append(f"the journal is of format {written_as[0]}, newer than this rigmon reads "
                                   f"({FORMAT_VERSION}): read as far as that format allows; a newer rigmon "
                                   "reads it whole")
    add_saved_alarms(part, source)
    tick("no capture")
    part.history = reader.history(part.node, part.from_at, part.to_at, interval_s)
    tick(f"{counted(len(part.history.series), 'series')}, {counted(len(part.history.events), 'event')}")
    frames = reader.frames_gzip(part.from_at, part.to_at)
    part.frames_gz, part.frame_count = frames.body, frames.count
    # Those its last frames carry can be stamped after the window's end: a crash's last Xid among them.
    add_carried_events(part)
    if frames.count and last_at is not None:
        part.latest = reader.frames(last_at, last_at, 1)[0]
    # The GPUs of the journal's earlier runs that the last frame lacks (lost before the window, or before
    # the last restart or reboot): in no frame of the window.
    part.gpus_gone, part.gpus_gone_from_at = gone_from_journal(reader, part.latest, interval_s)
    tick(counted(frames.count, "frame"))


#: State directories named when a directory given holds them instead of a journal of its own.
STATE_DIRS_NAMED = 8


def _state_dirs_below(path: Path) -> str:
    """What to give instead when ``path`` holds no journal but its subdirectories do (``rigmon sim``'s
    ``state/``, or ``/var/lib`` for ``/var/lib/rigmon``): ``""`` when none does."""
    try:
        found = sorted(d for d in path.iterdir() if d.is_dir() and journal_path(d).is_file())
    except OSError:
        return ""
    if not found:
        return ""
    named = ", ".join(str(d) for d in found[:STATE_DIRS_NAMED]) + (", ..." if len(found) > STATE_DIRS_NAMED else "")
    return f" (it holds the state directories {named}: give each as --journal DIR)"


def _decode_info(text: str | None) -> Info | None:
    if not text:
        return None
    try:
        return decode_data(Info, json.loads(text))
    except (SchemaError, ValueError):
        return None
