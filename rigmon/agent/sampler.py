"""Sampler: runs every collector on its interval behind a timeout, off the event loop, and assembles frames."""

from __future__ import annotations

import asyncio
import logging
import time
import types
import typing
from collections.abc import Callable, Sequence

import msgspec

from rigmon.agent.collector_threads import Outcome, Runner, new_runner, run_batch, wake
from rigmon.agent.trouble import TroubleMemory
from rigmon.clock import Clock
from rigmon.collectors.base import Collector, EventDraft
from rigmon.schema import (
    SCHEMA_VERSION,
    CollectorStatus,
    Event,
    Frame,
    Readings,
    Severity,
)
from rigmon.typed import field_types

log = logging.getLogger(__name__)

FrameListener = Callable[[Frame], None]

# Part of each interval the sampler waits for collectors before it sends the frame
# anyway; a slower collector's result lands in a later frame.
_WAIT_FRACTION = 0.6


def _readings_routes() -> dict[type, tuple[str, bool]]:
    """Map each record type to its `Readings` field and whether that field holds many."""
    routes: dict[type, tuple[str, bool]] = {}
    for name, tp in field_types(Readings).items():
        origin = typing.get_origin(tp)
        if origin is tuple:
            routes[typing.get_args(tp)[0]] = (name, True)
        elif origin in (typing.Union, types.UnionType):
            inner = [a for a in typing.get_args(tp) if a is not type(None)]
            routes[inner[0]] = (name, False)
    return routes


ROUTES = _readings_routes()


class _Slot(msgspec.Struct):
    """Sampler-side state of one collector."""

    collector: Collector
    interval_s: float
    #: The collector's own runner once one of its calls overran a tick; ``None``: the shared one.
    runner: Runner | None = None
    next_due: float = 0.0
    running_since: float | None = None
    records: dict[type, list[object]] = msgspec.field(default_factory=dict)
    status: CollectorStatus = CollectorStatus(state="pending", ok=False)


class Sampler:
    """Ticks collectors and publishes frames to listeners.

    Collectors are called off the event loop, one after another on a shared worker thread.
    A call that is still running when the next tick comes (hung in a driver) keeps that
    thread for itself and the other collectors move to a fresh one, so a hung call blocks
    only its own collector (the others for at most the part of one interval the tick waits):
    it is reported ``hung`` after ``timeout_s`` and is not called again until it returns.
    Once it has returned, the collector rejoins the shared thread and its own one ends.

    Args:
        node: node name put in every frame.
        run_id: identity of this agent run.
        collectors: collectors by name.
        intervals: per-collector interval in seconds (default ``interval_s``).
        interval_s: seconds between frames.
        timeout_s: a call running longer than this is reported hung.
        clock: wall time for frame and event timestamps.
    """

    def __init__(
        self,
        node: str,
        run_id: str,
        collectors: dict[str, Collector],
        interval_s: float,
        timeout_s: float,
        clock: Clock,
        intervals: dict[str, float] | None = None,
    ) -> None:
        self.node = node
        self.run_id = run_id
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.clock = clock
        self.agent_start = clock.time()
        self._slots = {
            name: _Slot(collector=c, interval_s=(intervals or {}).get(name, interval_s))
            for name, c in collectors.items()
        }
        self._shared = new_runner("rigmon-collectors")
        # Every runner that may still hold results: the shared one and the collectors' own.
        self._runners: list[Runner] = [self._shared]
        self._listeners: list[FrameListener] = []
        self._statuses: dict[str, Callable[[], CollectorStatus]] = {}
        self._seq = 0
        self._event_n = 0
        #: The node's last hardware trouble, noted in the GPU process exits that follow it.
        self.trouble = TroubleMemory()
        self._pending_events: list[Event] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False
        #: What `run` awaits: done when sampling has stopped (with the exception that stopped it).
        self._finished: asyncio.Future[None] | None = None
        #: Monotonic time the next tick is due.
        self._next_tick = 0.0
        #: The one timer armed: the next tick, or the end of a tick's wait for its collectors.
        self._timer: asyncio.TimerHandle | None = None
        #: A tick has started collectors and waits for them (pushed readings go into its frame).
        self._ticking = False
        #: The next tick's batch is handed to the collectors' thread, which starts it at
        #: ``_next_tick`` by itself (`_prestart`); from then on the tick is in progress.
        self._prestarted = False
        #: Runners started by the current tick that have not finished their batch.
        self._awaited: set[Runner] = set()

    @property
    def collector_names(self) -> tuple[str, ...]:
        """Names of the collectors, in registry order."""
        return tuple(self._slots)

    def add_listener(self, listener: FrameListener) -> None:
        """Call ``listener`` with every new frame, on the event loop."""
        self._listeners.append(listener)

    def add_status(self, name: str, status: Callable[[], CollectorStatus]) -> None:
        """Report a part of the agent that is not a collector (the journal) like one in every frame."""
        self._statuses[name] = status

    def emit_event(self, kind: str, severity: Severity, subject: str, message: str,
                   data: dict[str, str | int | float | bool | None] | None = None,
                   at: float | None = None) -> Event:
        """Queue an event for the next frame and return it."""
        self._event_n += 1
        event = Event(
            id=f"{self.run_id}-{self._event_n}",
            at=self.clock.time() if at is None else at,
            kind=kind,
            severity=severity,
            subject=subject,
            message=message,
            data=dict(data or {}),
        )
        event = self.trouble.note(event)
        self._pending_events.append(event)
        return event

    async def run(self) -> None:
        """Sample until cancelled or `stop` is called.

        The ticks are driven by callbacks on the event loop, not by this coroutine: the
        collectors' thread reports the end of its batch with one ``call_soon_threadsafe``,
        whose callback publishes the frame and hands the next tick's batch to that thread,
        which starts it on time by itself (`_prestart`). A tick thus costs one turn of the
        loop; a timer starting each tick cost two, and awaiting ``run_in_executor`` futures
        through ``asyncio.wait`` and a wait for the next tick five, each on cold caches on an
        agent that wakes once a second. While a collector still runs (hung, or slower than
        the tick's wait), the next tick is started by a timer on the loop as before. This
        coroutine waits until sampling stops, and raises what stopped it if a tick failed.
        """
        loop = asyncio.get_running_loop()
        self._loop = loop
        for name, slot in self._slots.items():
            slot.collector.start(self._make_push(name))
        self.emit_event("agent_started", "info", f"node:{self.node}", f"agent started on {self.node}")
        self._finished = loop.create_future()
        self._next_tick = time.monotonic()
        try:
            if not self._stopped:
                self._begin_tick()
            await self._finished
        finally:
            self._stopped = True
            self._ticking = self._prestarted = False
            self._cancel_timer()
            self.close()

    def stop(self) -> None:
        """Ask `run` to return after the current tick."""
        self._stopped = True
        if self._prestarted and not self._cancel_prestarted():
            # The handed-over batch has begun: the tick is in progress and ends as any other.
            self._enter_tick()
        if not self._ticking:
            self._cancel_timer()
            self._end_run(None)

    def _enter_tick(self) -> None:
        """The handed-over batch has begun (its start time has come): the tick is in progress."""
        self._prestarted = False
        self._ticking = True

    def _cancel_prestarted(self) -> bool:
        """Take back the batch handed over for the next tick unless it has begun; whether it was."""
        now = time.monotonic()
        if now >= self._next_tick:
            return False
        for runner in self._awaited:
            with runner.lock:
                if runner.current is not None or runner.done:
                    return False
        for runner in self._awaited:
            with runner.lock:
                names, runner.queued = runner.queued, []
            wake(runner)
            for name in names:
                self._slots[name].running_since = None
        self._prestarted = False
        self._awaited = set()
        return True

    def _end_run(self, error: Exception | None) -> None:
        finished = self._finished
        if finished is not None and not finished.done():
            if error is None:
                finished.set_result(None)
            else:
                finished.set_exception(error)

    def _fail(self, error: Exception) -> None:
        """A tick failed (a bug, not a collector's failure): sampling stops and `run` raises it."""
        self._stopped = True
        self._ticking = False
        self._prestarted = False
        self._cancel_timer()
        self._end_run(error)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        """Stop background readers and worker threads (a hung thread is abandoned)."""
        for slot in self._slots.values():
            try:
                slot.collector.close()
            except Exception:  # noqa: BLE001 - closing must reach every collector
                log.exception("closing collector %s", slot.collector.name)
        for runner in self._runners:
            # A batch waiting for its start time must not call collectors that are closed now.
            with runner.lock:
                runner.queued = []
            wake(runner)
            runner.executor.shutdown(wait=False, cancel_futures=True)

    def _begin_tick(self) -> None:
        """Timer callback: start the collectors due now, then wait a part of the interval for them."""
        self._timer = None
        if self._stopped:
            return
        try:
            started = self._start_due(self._next_tick)
        except Exception as exc:  # noqa: BLE001 - ends `run` with it, as a failing await in it would
            self._fail(exc)
            return
        if not started:
            self._end_tick()
            return
        self._ticking = True
        self._awaited = set(started)
        assert self._loop is not None
        self._timer = self._loop.call_later(min(self.timeout_s, self.interval_s * _WAIT_FRACTION), self._end_tick)

    def _collector_of(self, name: str) -> Collector:
        return self._slots[name].collector

    def _batch_finished(self, runner: Runner) -> None:
        """A runner's thread: its batch is over; tell the loop (`_batch_done`)."""
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._batch_done, runner)
            except RuntimeError:
                pass  # the loop is closed: the agent has stopped

    def _batch_done(self, runner: Runner) -> None:
        """Loop callback, from a runner's thread: its batch is over (a late one's is ignored)."""
        if self._prestarted:
            self._enter_tick()
        if not self._ticking:
            return
        self._awaited.discard(runner)
        if not self._awaited:
            self._end_tick()

    def _end_tick(self) -> None:
        """Every collector of the tick answered, or its wait ran out: publish, start the next tick."""
        self._ticking = False
        self._prestarted = False
        self._awaited = set()
        self._cancel_timer()
        try:
            self._publish()
        except Exception as exc:  # noqa: BLE001 - ends `run` with it
            self._fail(exc)
            return
        if self._stopped:
            self._end_run(None)
            return
        self._next_tick += self.interval_s
        delay = self._next_tick - time.monotonic()
        if delay < 0:
            # Fell behind (suspended process, overloaded host): skip, don't burst.
            self._next_tick -= delay
            delay = 0.0
        assert self._loop is not None
        if not self._prestart(delay):
            self._timer = self._loop.call_later(delay, self._begin_tick)

    def _prestart(self, delay: float) -> bool:
        """Hand the next tick's batch to the collectors' thread, to start at ``_next_tick`` (in
        ``delay`` seconds) without the loop waking for it, and arm the end of its wait; whether
        it was handed over. Only when no collector call is running (none hung or overrunning:
        those ticks start from the loop, which files hung collectors and moves the others to
        a fresh thread first)."""
        if any(slot.running_since is not None for slot in self._slots.values()):
            return False
        started = self._start_due(self._next_tick, start_at=self._next_tick)
        if not started:
            return False
        self._prestarted = True
        self._awaited = set(started)
        assert self._loop is not None
        self._timer = self._loop.call_later(delay + min(self.timeout_s, self.interval_s * _WAIT_FRACTION),
                                            self._end_tick)
        return True

    def _start_due(self, tick_at: float, start_at: float | None = None) -> list[Runner]:
        """Start the collectors due at ``tick_at`` (the scheduled monotonic time); return the runners started.

        With ``start_at``, their runners wait until then (`_prestart`) and the calls count as running from then.
        """
        self._take_results()
        if self._shared.busy:
            self._pin(self._shared)
        now = time.monotonic() if start_at is None else start_at
        batches: dict[int, tuple[Runner, list[str]]] = {}
        for name, slot in self._slots.items():
            if slot.running_since is not None:
                if now - slot.running_since > self.timeout_s and slot.status.state != "hung":
                    self._set_status(name, CollectorStatus(
                        state="hung", ok=False,
                        error=f"no answer for {now - slot.running_since:.1f} s",
                        duration_s=None, sampled_at=slot.status.sampled_at,
                    ))
                continue
            # Due by the tick's schedule, not by the time it started: a tick woken a little
            # late must not make the next one find the collectors not yet due.
            if tick_at < slot.next_due:
                continue
            slot.next_due = tick_at + slot.interval_s
            slot.running_since = now
            runner = slot.runner or self._shared
            batches.setdefault(id(runner), (runner, []))[1].append(name)
        started: list[Runner] = []
        for runner, names in batches.values():
            with runner.lock:
                runner.queued.extend(names)
            runner.future = runner.executor.submit(run_batch, runner, self._collector_of, self._batch_finished,
                                                   start_at)
            started.append(runner)
        return started

    def _pin(self, runner: Runner) -> None:
        """Give a runner whose batch overran the tick to the collector it is running, and
        start a new shared runner for the others (those not started yet are due again)."""
        with runner.lock:
            stuck = runner.current
            if stuck is None:
                # The batch is ending (the worker saw its queue empty): the thread is free.
                return
            runner.current = None
            skipped, runner.queued = runner.queued, []
        for name in skipped:
            self._slots[name].running_since = None
            self._slots[name].next_due = 0.0
        self._slots[stuck].runner = runner
        self._shared = new_runner("rigmon-collectors")
        self._runners.append(self._shared)

    def _take_results(self) -> None:
        """File the results the runners have finished since the last look."""
        for runner in self._runners:
            while runner.done:
                name, outcome, duration_s = runner.done.popleft()
                self._finish(name, self._slots[name], outcome, duration_s)
        self._release_runners()

    def _release_runners(self) -> None:
        """A collector whose overrunning call has returned goes back to the shared runner and
        its own thread ends: a loaded machine that makes calls overrun now and then must not
        gather one idle thread per collector that ever overran."""
        for slot in self._slots.values():
            runner = slot.runner
            if runner is not None and not runner.busy and not runner.done and slot.running_since is None:
                slot.runner = None
                self._runners.remove(runner)
                runner.executor.shutdown(wait=False)

    def _finish(self, name: str, slot: _Slot, outcome: Outcome, duration_s: float) -> None:
        slot.running_since = None
        state, payload = outcome
        sampled_at = self.clock.time()
        if state == "ok":
            assert isinstance(payload, list)
            error = self._store(slot, payload, replace_all=True)
            if error:
                state = "error"
            status = CollectorStatus(state="ok" if not error else "error", ok=not error,
                                     error=error, duration_s=round(duration_s, 6), sampled_at=sampled_at)
        else:
            slot.records = {}
            status = CollectorStatus(state=state, ok=state == "absent", error=str(payload),  # type: ignore[arg-type]
                                     duration_s=round(duration_s, 6), sampled_at=sampled_at)
        self._set_status(name, status)

    def _store(self, slot: _Slot, records: Sequence[object], replace_all: bool) -> str | None:
        """File records by type; return an error for record types the schema lacks."""
        grouped: dict[type, list[object]] = {}
        unknown: set[str] = set()
        for record in records:
            if isinstance(record, EventDraft):
                sev = record.severity if record.severity in ("info", "warning", "critical") else "warning"
                self.emit_event(record.kind, typing.cast(Severity, sev), record.subject, record.message,
                                record.data, record.at)
            elif type(record) in ROUTES:
                grouped.setdefault(type(record), []).append(record)
            else:
                unknown.add(type(record).__name__)
        if replace_all:
            slot.records = grouped
        else:
            slot.records.update(grouped)
        return f"records of unknown type: {', '.join(sorted(unknown))}" if unknown else None

    def _set_status(self, name: str, status: CollectorStatus) -> None:
        slot = self._slots[name]
        before = slot.status
        slot.status = status
        if status.state in ("error", "hung") and before.state != status.state:
            self.emit_event("collector_failed", "warning", f"collector:{name}",
                            f"collector {name} {status.state}: {status.error}", {"state": status.state})
        elif status.state in ("ok", "absent") and before.state in ("error", "hung"):
            self.emit_event("collector_recovered", "info", f"collector:{name}",
                            f"collector {name} recovered ({status.state})", {"state": status.state})

    def _make_push(self, name: str) -> Callable[[Sequence[object]], None]:
        def push(records: Sequence[object]) -> None:
            loop = self._loop
            if loop is None or loop.is_closed():
                return
            loop.call_soon_threadsafe(self._on_push, name, list(records))

        return push

    def _on_push(self, name: str, records: list[object]) -> None:
        slot = self._slots.get(name)
        if slot is None:
            return
        self._store(slot, records, replace_all=False)
        finished = self._finished
        if self._prestarted and time.monotonic() >= self._next_tick:
            self._enter_tick()
        if self._ticking or self._stopped or finished is None or finished.done():
            # A tick in progress publishes it with the collectors' readings.
            return
        try:
            self._publish()
        except Exception as exc:  # noqa: BLE001 - ends `run` with it
            self._fail(exc)

    def _publish(self) -> Frame:
        self._take_results()
        self._seq += 1
        fields: dict[str, object] = {}
        for slot in self._slots.values():
            for tp, recs in slot.records.items():
                field_name, many = ROUTES[tp]
                if many:
                    fields[field_name] = typing.cast(tuple[object, ...], fields.get(field_name, ())) + tuple(recs)
                else:
                    fields[field_name] = recs[-1]
        frame = Frame(
            schema=SCHEMA_VERSION,
            node=self.node,
            run_id=self.run_id,
            seq=self._seq,
            taken_at=self.clock.time(),
            agent_start=self.agent_start,
            collectors={**{name: slot.status for name, slot in self._slots.items()},
                        **{name: status() for name, status in self._statuses.items()}},
            readings=Readings(**fields),  # type: ignore[arg-type]
            events=tuple(self._pending_events),
        )
        self._pending_events = []
        for listener in self._listeners:
            try:
                listener(frame)
            except Exception:  # noqa: BLE001 - a broken listener must not stop sampling
                log.exception("frame listener failed")
        return frame
