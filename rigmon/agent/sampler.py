"""Sampler: what each tick makes. Files collectors' outcomes and pushed readings, assembles and publishes frames.

When each collector is called, on which thread, and when a tick ends is `rigmon.agent.ticks.TickScheduler`'s.
"""

from __future__ import annotations

import asyncio
import logging
import types
import typing
from collections.abc import Callable, Iterable, Sequence

import msgspec

from rigmon.agent.collector_threads import Failed, Outcome
from rigmon.agent.frame_json import valid_text
from rigmon.agent.ticks import TickScheduler
from rigmon.agent.trouble import TroubleMemory
from rigmon.clock import Clock
from rigmon.collectors.base import Collector, EventDraft, status_note
from rigmon.schema import (
    SCHEMA_VERSION,
    CollectorStatus,
    Event,
    EventValue,
    Frame,
    Readings,
    Severity,
    encode,
)
from rigmon.typed import field_types

log = logging.getLogger(__name__)

FrameListener = Callable[[Frame], None]


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


def _unencodable(groups: Iterable[list[object]]) -> str | None:
    """Why the first of these records that does not encode does not (``None``: all encode)."""
    for records in groups:
        for record in records:
            try:
                encode(record)
            except (ValueError, OverflowError) as exc:
                return f"{type(record).__name__}: {exc}"
    return None


def _encodable_event(event: Event) -> Event:
    """``event``, with each value of its data that does not encode as ``None``."""
    try:
        encode(event)
        return event
    except (ValueError, OverflowError):
        pass
    data: dict[str, EventValue] = {}
    for key, value in event.data.items():
        try:
            encode(value)
            data[key] = value
        except (ValueError, OverflowError):
            data[key] = None
    return msgspec.structs.replace(event, data=data)


class _Slot(msgspec.Struct):
    """What the sampler holds of one collector: its latest records and status."""

    collector: Collector
    records: dict[type, list[object]] = msgspec.field(default_factory=dict)
    status: CollectorStatus = CollectorStatus(state="pending", ok=False)
    #: The failing state (error, hung) a ``collector_failed`` event announced and no
    #: ``collector_recovered`` has ended yet: a collector starting between the two (an nvmlInit
    #: that outlasted its budget, then returned) still recovers once it reads.
    failing: str | None = None


class Sampler:
    """Ticks collectors and publishes frames to listeners.

    Collectors are called off the event loop on worker threads, each tick's due ones in one
    batch (`rigmon.agent.ticks.TickScheduler`); a call still running after ``timeout_s`` is
    reported ``hung`` and blocks only its own collector until it returns.

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
        self._slots = {name: _Slot(collector=c) for name, c in collectors.items()}
        self._ticks = TickScheduler(
            dict(collectors), {name: (intervals or {}).get(name, interval_s) for name in collectors},
            interval_s, timeout_s, self._file_outcomes, self._file_hung, self._publish, self._file_stall,
        )
        self._listeners: list[FrameListener] = []
        self._judges: list[FrameListener] = []
        self._statuses: dict[str, Callable[[], CollectorStatus]] = {}
        self._seq = 0
        self._event_n = 0
        #: The node's last hardware trouble, noted in the GPU process exits that follow it.
        self.trouble = TroubleMemory()
        self._pending_events: list[Event] = []
        #: Collectors whose records did not encode in the last frame that had any such (see `_encodable`).
        self._unencodable: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def collector_names(self) -> tuple[str, ...]:
        """Names of the collectors, in registry order."""
        return tuple(self._slots)

    def add_listener(self, listener: FrameListener) -> None:
        """Call ``listener`` with every new frame, on the event loop."""
        self._listeners.append(listener)

    def add_judge(self, judge: FrameListener) -> None:
        """Call ``judge`` with every new frame before the listeners; the events it emits while
        it judges travel in that frame (an alarm's transition with the reading that caused it),
        and the judges added after it see them in the frame they judge."""
        self._judges.append(judge)

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

    def take_events(self) -> tuple[Event, ...]:
        """The events emitted since the last frame, taken: at the stop no frame follows to carry them
        (the agent hands them to the journal's clean stop)."""
        events, self._pending_events = tuple(self._pending_events), []
        return events

    async def run(self) -> None:
        """Sample until cancelled or `stop` is called; raise what stopped it if a tick failed.

        Starts the collectors' pushed sources, then ticks (`rigmon.agent.ticks.TickScheduler.run`:
        a tick is one turn of the event loop, driven by callbacks, not by this coroutine).
        """
        loop = asyncio.get_running_loop()
        self._loop = loop
        for name, slot in self._slots.items():
            slot.collector.start(self._make_push(name))
        self.emit_event("agent_started", "info", f"node:{self.node}", f"agent started on {self.node}")
        try:
            await self._ticks.run()
        finally:
            self.close()

    def stop(self) -> None:
        """Ask `run` to return after the current tick."""
        self._ticks.stop()

    def close(self) -> None:
        """Stop background readers and worker threads (a hung thread is abandoned)."""
        for slot in self._slots.values():
            try:
                slot.collector.close()
            except Exception:  # noqa: BLE001 - closing must reach every collector
                log.exception("closing collector %s", slot.collector.name)
        self._ticks.close()

    def _file_outcomes(self, results: list[tuple[str, Outcome, float]]) -> None:
        """File the calls finished since the scheduler last looked (its ``file_outcomes``): one
        clock reading for all of them, which were filed at once (their ``sampled_at``)."""
        sampled_at = self.clock.time()
        for name, outcome, duration_s in results:
            self._finish(name, outcome, duration_s, sampled_at)

    def _finish(self, name: str, outcome: Outcome, duration_s: float, sampled_at: float) -> None:
        """File one finished call, filed at ``sampled_at`` (Unix seconds)."""
        slot = self._slots[name]
        state, payload = outcome
        if state == "ok":
            assert isinstance(payload, list)
            error = self._store(slot, payload, replace_all=True)
            if error:
                state = "error"
            # An ok call may still say what does not work beside its readings (`status_note`).
            status = CollectorStatus(state="ok" if not error else "error", ok=not error,
                                     error=error or status_note(slot.collector), duration_s=round(duration_s, 6),
                                     sampled_at=sampled_at)
        else:
            slot.records = {}
            if isinstance(payload, Failed):
                # A failure that still says what it reads (an unplugged ADC: ``connected`` false, its counters).
                self._store(slot, payload.records, replace_all=True)
                payload = payload.error
            status = CollectorStatus(state=state, ok=state == "absent", error=str(payload),  # type: ignore[arg-type]
                                     duration_s=round(duration_s, 6), sampled_at=sampled_at)
        self._set_status(name, status)

    def _file_hung(self, name: str, running_s: float) -> None:
        """A call has run ``running_s`` seconds, past the timeout: the collector is hung (once)."""
        slot = self._slots[name]
        if slot.status.state != "hung":
            self._set_status(name, CollectorStatus(
                state="hung", ok=False,
                error=f"no answer for {running_s:.1f} s",
                duration_s=None, sampled_at=slot.status.sampled_at,
            ))

    def _file_stall(self, stalled_s: float) -> None:
        """The agent as a whole did not run for at least ``stalled_s`` seconds (the scheduler's
        ``file_stall``): said once, as an event (the agent's log shows it); no collector is blamed."""
        self.emit_event("agent_stalled", "warning", f"node:{self.node}",
                        f"agent was not running for at least {stalled_s:.1f} s (the process was stopped, its VM paused "
                        "or the machine starved): no readings then, and no collector is blamed for it",
                        {"stalled_s": round(stalled_s, 3)})

    def _store(self, slot: _Slot, records: Sequence[object], replace_all: bool) -> str | None:
        """File records by type; return an error for record types the schema lacks."""
        grouped: dict[type, list[object]] = {}
        unknown: set[str] = set()
        for record in records:
            tp = type(record)
            if tp in ROUTES:  # most records: a GPU collector's are a hundred a call
                group = grouped.get(tp)
                if group is None:
                    grouped[tp] = [record]
                else:
                    group.append(record)
            elif isinstance(record, EventDraft):
                sev = record.severity if record.severity in ("info", "warning", "critical") else "warning"
                self.emit_event(record.kind, typing.cast(Severity, sev), record.subject, record.message,
                                record.data, record.at)
            else:
                unknown.add(tp.__name__)
        if replace_all:
            slot.records = grouped
        else:
            slot.records.update(grouped)
        return f"records of unknown type: {', '.join(sorted(unknown))}" if unknown else None

    def _set_status(self, name: str, status: CollectorStatus) -> None:
        slot = self._slots[name]
        slot.status = status
        # ``pending`` (starting) is not yet known: neither a failure nor a recovery.
        if status.state in ("error", "hung") and slot.failing != status.state:
            slot.failing = status.state
            self.emit_event("collector_failed", "warning", f"collector:{name}",
                            f"collector {name} {status.state}: {status.error}", {"state": status.state})
        elif status.state in ("ok", "absent") and slot.failing is not None:
            slot.failing = None
            self.emit_event("collector_recovered", "info", f"collector:{name}",
                            f"collector {name} recovered ({status.state})", {"state": status.state})

    def _frame(self, taken_at: float, events: tuple[Event, ...]) -> Frame:
        """The frame of the slots' records and statuses, with ``events`` and the pending ones (taken)."""
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
            taken_at=taken_at,
            agent_start=self.agent_start,
            collectors={**{name: slot.status for name, slot in self._slots.items()},
                        **{name: status() for name, status in self._statuses.items()}},
            readings=Readings(**fields),  # type: ignore[arg-type]
            events=events + tuple(self._pending_events),
        )
        self._pending_events = []
        return frame

    def _encodable(self, frame: Frame) -> Frame:
        """``frame`` as `valid_text` makes it, or, when it does not encode (an integer past 64 bits, a
        NaN a collector let through), the frame again without what caused it: each collector whose
        records do not encode fails with the reason, its records left out; an event's value that does
        not encode becomes ``null``. One bad value costs its collector, never the frame: raised here,
        it ended the sampler (no frame, no journal, for every collector, until a restart)."""
        try:
            frame = valid_text(frame)
        except (ValueError, OverflowError) as exc:
            failure = str(exc)
        else:
            self._unencodable = []
            return frame
        failed = []
        for name, slot in self._slots.items():
            why = _unencodable(slot.records.values())
            if why is not None:
                failed.append(name)
                slot.records = {}
                self._set_status(name, msgspec.structs.replace(
                    slot.status, state="error", ok=False, error=f"reported a value that cannot be sent: {why}"))
        if failed != self._unencodable:
            # Once while the same collectors send such values, not every tick.
            log.error("frame %d cannot be encoded (%s): left out the records of %s", frame.seq, failure,
                      ", ".join(failed) or "no collector (an event's value)")
            self._unencodable = failed
        events = tuple(_encodable_event(event) for event in frame.events)
        return valid_text(self._frame(frame.taken_at, events))

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
        self._ticks.pushed()

    def _publish(self) -> Frame:
        self._ticks.take_results()
        self._seq += 1
        frame = self._frame(self.clock.time(), ())
        # Encoded once here for every reader (the cache is shared); text that is not UTF-8 is mended first.
        frame = self._encodable(frame)
        judged = frame
        for judge in self._judges:
            if len(judged.events) != len(frame.events) + len(self._pending_events):
                # A judge judges the frame with what the judges before it said of it (the guard
                # after the alarms: a trigger alarm that starts firing in this frame).
                judged = msgspec.structs.replace(frame, events=frame.events + tuple(self._pending_events))
            try:
                judge(judged)
            except Exception:  # noqa: BLE001 - a broken judge must not stop sampling
                log.exception("frame judge failed")
        if self._pending_events:
            # What the judges said of this frame goes out with it (encoded again: only frames
            # that carry a transition).
            events = frame.events + tuple(self._pending_events)
            self._pending_events = []
            frame = self._encodable(msgspec.structs.replace(frame, events=events))
        for listener in self._listeners:
            try:
                listener(frame)
            except Exception:  # noqa: BLE001 - a broken listener must not stop sampling
                log.exception("frame listener failed")
        return frame
