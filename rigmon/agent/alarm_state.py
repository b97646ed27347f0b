"""The agent's alarm state file: rule-engine memory and path-resistance trends kept across restarts.

``<state_dir>/alarm-state.json`` (next to the journal, a file of its own) holds what an agent
restart must not lose (see `rigmon.alarms.memory`): trend buckets, first-seen link speeds,
alarms that had fired with their acknowledgements, recently resolved alarms, and the daily
path-resistance fits of collectors that estimate one. It is written atomically (temporary
file, fsync, rename, fsync of the directory) every ``[alarms] save_interval_s``, soon after an
alarm fires, resolves or is acknowledged (at most once every `MIN_SAVE_GAP_S`), and at a clean
stop. A crash never leaves a torn file and loses no alarm that fired before it: the power cut
that follows a rail sag by seconds must not take the sag's alarms with it. Trends and
first-seen speeds that changed without an alarm lose at most one interval. A file that
cannot be read, is not JSON, is of another format version or of another node is set aside
(``alarm-state.json.bad``) and reported as an event; the agent starts without it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.lifecycle import Transition
from rigmon.alarms.memory import EngineMemory
from rigmon.clock import Clock
from rigmon.path_resistance import EstimatorState, PathStateHolder
from rigmon.schema import Event, EventValue, Severity
from rigmon.typed import TypedDataError, from_data, to_data

log = logging.getLogger(__name__)

STATE_FILE_NAME = "alarm-state.json"
#: Least time between two saves made because alarms changed (a burst of an incident's alarms is one write).
MIN_SAVE_GAP_S = 1.0
#: Alarm changes that a restart must find in the file.
_SAVED_CHANGES = frozenset({"firing", "resolved", "acknowledged", "repeated"})
STATE_FORMAT = "rigmon-alarm-state"
#: Bumped when a field changes meaning or is removed; a file of another version is set aside.
STATE_VERSION = 1

EmitFn = Callable[[str, Severity, str, str, dict[str, EventValue] | None], Event]


class StateFileError(ValueError):
    """The state file is unreadable, not JSON, or not a state file this agent understands."""


# A frozen msgspec Struct, not a dataclass (cheaper to define at the agent's start); gc=False:
# frozen, holding only plain values and frozen records, it cannot be part of a reference cycle.
class AlarmStateFile(msgspec.Struct, frozen=True, gc=False):
    """The content of ``alarm-state.json``.

    Attributes:
        format: always `STATE_FORMAT`.
        version: `STATE_VERSION` of the writer.
        node: node name of the agent that wrote it (a copied state directory is not taken over).
        run_id: agent run that wrote it.
        saved_at: Unix seconds of the write.
        engine: the rule engine's memory.
        path_resistance: daily fits of path-resistance estimators, by collector name.
    """

    format: str
    version: int
    node: str
    run_id: str
    saved_at: float
    engine: EngineMemory = msgspec.field(default_factory=EngineMemory)
    path_resistance: dict[str, tuple[EstimatorState, ...]] = msgspec.field(default_factory=dict)


def state_file_path(state_dir: str | Path) -> Path:
    """The alarm state file of a state directory."""
    return Path(state_dir) / STATE_FILE_NAME


def encode_state_file(state: AlarmStateFile) -> bytes:
    """The file's bytes (compact JSON; non-finite numbers are refused rather than written as NaN)."""
    return json.dumps(to_data(state), separators=(",", ":"), allow_nan=False).encode()


def decode_state_file(raw: bytes) -> AlarmStateFile:
    """Parse and check a state file.

    Raises:
        StateFileError: not JSON, not a state file, another version, or a field that does not fit.
    """
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateFileError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
        raise StateFileError(f"not a {STATE_FORMAT} file")
    if data.get("version") != STATE_VERSION:
        raise StateFileError(f"format version {data.get('version')!r}, this agent reads version {STATE_VERSION}")
    try:
        return from_data(AlarmStateFile, data)
    except TypedDataError as exc:
        raise StateFileError(str(exc)) from None


def read_state_file(path: Path) -> AlarmStateFile | None:
    """The saved state, or ``None`` when there is no file.

    Raises:
        StateFileError: the file exists but cannot be used.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"cannot read: {exc.strerror}") from None
    return decode_state_file(raw)


def write_state_file(path: Path, state: AlarmStateFile) -> None:
    """Replace the state file atomically: a reader (or a crash) sees the old file or the new one.

    Raises:
        OSError: the directory or file cannot be written.
    """
    data = encode_state_file(state)
    # Not even the state directory (the agent makes it as it starts, `state_lock`): one gone since
    # was removed by its owner (an agent stopped under it, a test's temporary directory), and a save
    # must not make it again; the save fails and says so, as the journal does.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    # The rename is durable only once the directory entry is on disk.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class AlarmStateKeeper:
    """Restores the alarm state at start, saves it periodically and at a clean stop.

    `restore`, `snapshot` and `run` belong to the agent's event loop (the thread the rule
    engine runs on); the file is written on a worker thread.

    Args:
        path: the state file.
        engine: the node rule engine.
        holders: collectors whose path-resistance fits are kept, by name.
        node: this agent's node name.
        run_id: this agent run.
        clock: wall time for ``saved_at`` and the restore.
        emit: the sampler's ``emit_event``.
    """

    def __init__(self, path: Path, engine: AlarmEngine, holders: Mapping[str, PathStateHolder], node: str,
                 run_id: str, clock: Clock, emit: EmitFn) -> None:
        self.path = path
        self.engine = engine
        self.holders = dict(holders)
        self.node = node
        self.run_id = run_id
        self.clock = clock
        self.emit = emit
        self.saves = 0
        self._save_failing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # A periodic write cancelled at stop may still be running on its thread.
        self._write_lock = threading.Lock()
        #: Set on the event loop when an alarm changed since the last save (see `note_transition`).
        self._changed: asyncio.Event | None = None

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop whose sampler gets the events reported from the writer thread."""
        self._loop = loop

    def restore(self) -> AlarmStateFile | None:
        """Take over the saved state, if there is a usable one; report what happened as an event."""
        try:
            state = read_state_file(self.path)
        except StateFileError as exc:
            self._set_aside(str(exc))
            return None
        if state is None:
            return None
        if state.node != self.node:
            self._set_aside(f"written by node {state.node!r}, this is {self.node!r}")
            return None
        now = self.clock.time()
        summary = self.engine.restore_memory(state.engine, now)
        paths = 0
        for name, holder in self.holders.items():
            saved = state.path_resistance.get(name, ())
            if saved:
                paths += holder.restore_path_state(saved)
        age_s = max(0.0, now - state.saved_at)
        self.emit("alarm_state_restored", "info", f"node:{self.node}",
                  f"alarm state restored from {self.path} (saved {age_s:.0f} s ago): {summary.describe()}, "
                  f"{paths} path-resistance estimators", {
                      "path": str(self.path), "saved_at": state.saved_at, "saved_by_run": state.run_id,
                      "trend_series": summary.trend_series, "first_seen": summary.first_seen,
                      "alarms": summary.alarms, "recent": summary.recent, "path_resistance": paths,
                      "dropped": len(summary.dropped),
                  })
        return state

    def snapshot(self) -> AlarmStateFile:
        """The state as it is now (on the event loop: the engine is not thread-safe)."""
        return AlarmStateFile(
            format=STATE_FORMAT, version=STATE_VERSION, node=self.node, run_id=self.run_id,
            saved_at=self.clock.time(), engine=self.engine.export_memory(),
            path_resistance={name: h.export_path_state() for name, h in self.holders.items()},
        )

    def save(self, state: AlarmStateFile) -> bool:
        """Write a snapshot (blocking: call from a worker thread); report the first failure of a run of them."""
        try:
            with self._write_lock:
                write_state_file(self.path, state)
        except (OSError, ValueError) as exc:
            if not self._save_failing:
                log.warning("cannot write %s: %s", self.path, exc)
                self._report("alarm_state_save_failed", "warning", f"cannot write {self.path}: {exc}")
            self._save_failing = True
            return False
        self._save_failing = False
        self.saves += 1
        return True

    def note_transition(self, transition: Transition) -> None:
        """An alarm hook (on the event loop): save soon after an alarm fires, resolves, is acknowledged or
        counts a further event (`Transition`: ``repeated``, so that a restart takes over its count)."""
        # A restored alarm confirmed as firing changes nothing in the file; one that resolved does.
        if transition.restored and transition.change == "firing":
            return
        if transition.change in _SAVED_CHANGES and self._changed is not None:
            self._changed.set()

    async def run(self, interval_s: float, min_gap_s: float = MIN_SAVE_GAP_S) -> None:
        """Save every ``interval_s`` seconds, and within ``min_gap_s`` of an alarm change, until cancelled."""
        loop = asyncio.get_running_loop()
        changed = self._changed = asyncio.Event()
        last = loop.time()
        while True:
            try:
                # Not asyncio.wait_for: on Python 3.11 it swallows a cancel that comes as ``changed`` is set
                # (an alarm changing at the agent's stop), and this loop, cancelled to stop, ran on forever.
                async with asyncio.timeout(interval_s):
                    await changed.wait()
                # An incident's alarms come in a burst over a few frames: one write for them.
                await asyncio.sleep(max(0.0, min_gap_s - (loop.time() - last)))
            except TimeoutError:
                pass
            changed.clear()
            await asyncio.to_thread(self.save, self.snapshot())
            last = loop.time()

    def _set_aside(self, reason: str) -> None:
        aside = self.path.with_name(self.path.name + ".bad")
        try:
            os.replace(self.path, aside)
            where = f"; moved to {aside}"
        except OSError:
            where = ""
        log.warning("ignoring %s: %s", self.path, reason)
        self._report("alarm_state_ignored", "warning",
                     f"alarm state {self.path} ignored ({reason}){where}: trends, first-seen speeds and "
                     "acknowledgements start afresh")

    def _report(self, kind: str, severity: Severity, message: str) -> None:
        # save() runs on a worker thread; the sampler's event queue belongs to the loop.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.emit, kind, severity, f"node:{self.node}", message, None)
        else:
            self.emit(kind, severity, f"node:{self.node}", message, None)
