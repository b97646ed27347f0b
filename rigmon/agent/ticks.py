"""Tick scheduling: when each collector is called, on which worker thread, and when a tick ends.

`TickScheduler` owns the loop's timers, the collectors' due times, the runners that call them
(`rigmon.agent.collector_threads`) and hung detection. What a tick makes is the sampler's
(`rigmon.agent.sampler.Sampler`): the scheduler calls it back to file each outcome, to report a
collector hung, and to publish the frame.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import msgspec

from rigmon.agent.collector_threads import Outcome, Runner, Runners, run_batch, wake
from rigmon.collectors.base import Collector

#: Files the calls finished since the last look, in the order they finished: each as the
#: collector's name, its outcome, the call's duration in seconds.
FileOutcomes = Callable[[list[tuple[str, Outcome, float]]], None]
#: Reports a call running past the timeout: the collector's name, seconds it has run.
FileHung = Callable[[str, float], None]
#: Reports that the whole agent did not run (stopped, paused): at least how many seconds.
FileStall = Callable[[float], None]

# Part of each interval the sampler waits for collectors before it sends the frame
# anyway; a slower collector's result lands in a later frame.
_WAIT_FRACTION = 0.6
#: Seconds (or one interval when longer) our callback may run after its timer was due before
#: the agent counts as not having run (see `TickScheduler._awake`).
STALL_MIN_S = 1.0


class _Slot(msgspec.Struct):
    """Scheduling state of one collector."""

    interval_s: float
    #: The collector's own runner once one of its calls overran a tick; ``None``: the shared one.
    runner: Runner | None = None
    next_due: float = 0.0
    #: Monotonic time its call counts as running from (``None``: none is): its batch's start, then
    #: the call's own once its runner is pinned to it (`TickScheduler._pin`), later after a stall.
    running_since: float | None = None


class TickScheduler:
    """Calls the collectors due at each tick off the event loop, and says when the tick's frame is due.

    Collectors are called one after another on a shared worker thread. A call still running
    when the next tick comes (hung in a driver) keeps that thread and the others move to a fresh
    one: it blocks only its own collector, is reported hung after ``timeout_s`` and is not called
    again until it returns; then the collector rejoins the shared thread and its own one ends.

    Args:
        collectors: collectors by name (the order they are called in).
        intervals: seconds between calls, per collector (every name of ``collectors``).
        interval_s: seconds between ticks (frames).
        timeout_s: a call running longer than this is reported hung.
        file_outcomes: files the calls finished since the last look (on the loop, from `take_results`;
            once a look that found any, so that the sampler reads its clock once for them).
        file_hung: reports a call running longer than ``timeout_s`` (on the loop, each tick it still runs).
        publish: makes and publishes the frame; called on the loop when a tick ends or a pushed
            reading arrives (during a tick too). It calls `take_results` first.
        file_stall: reports that the agent as a whole did not run for at least that many seconds
            (SIGSTOP, a paused VM); the calls then in flight were not hung (`_awake`).
    """

    def __init__(self, collectors: dict[str, Collector], intervals: dict[str, float], interval_s: float,
                 timeout_s: float, file_outcomes: FileOutcomes, file_hung: FileHung,
                 publish: Callable[[], object], file_stall: FileStall | None = None) -> None:
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._slots = {name: _Slot(interval_s=intervals[name]) for name in collectors}
        #: Called by the runners' threads for each name of a batch (a C call, not a method of ours).
        self._collector_of = collectors.__getitem__
        self._file_outcomes = file_outcomes
        self._file_hung = file_hung
        self._publish = publish
        self._runners = Runners("rigmon-collectors")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False
        #: What `run` awaits: done when sampling has stopped (with the exception that stopped it).
        self._finished: asyncio.Future[None] | None = None
        #: Monotonic time the next tick is due.
        self._next_tick = 0.0
        #: The one timer armed: the next tick, or the end of a tick's wait for its collectors.
        self._timer: asyncio.TimerHandle | None = None
        #: A tick has started collectors and waits for them (a pushed reading is published at once all the same).
        self._ticking = False
        #: The next tick's batch is handed to the collectors' thread, which starts it at
        #: ``_next_tick`` by itself (`_prestart`); from then on the tick is in progress.
        self._prestarted = False
        #: Runners started by the current tick that have not finished their batch.
        self._awaited: set[Runner] = set()
        self._file_stall = file_stall
        #: Monotonic time and process CPU time when the loop last ran one of our callbacks.
        self._awake_at = 0.0
        self._cpu_at = 0.0
        #: Monotonic time the armed timer is due (``None``: none is armed): the loop wakes by then.
        self._wake_by: float | None = None
        #: Collectors whose call was in flight through the last stall, until its outcome is filed.
        self._spanned_stall: set[str] = set()

    async def run(self) -> None:
        """Tick until cancelled or `stop` is called; raise what stopped it if a tick failed.

        Ticks are loop callbacks, not this coroutine: the collectors' thread reports its batch's
        end with one ``call_soon_threadsafe``, whose callback publishes the frame and hands the
        next batch to that thread, which starts it on time by itself (`_prestart`): one turn of
        the loop a tick. While a call still runs (hung or overrunning), a timer starts the next.
        """
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._finished = loop.create_future()
        self._next_tick = self._awake_at = time.monotonic()
        self._cpu_at = time.process_time()
        try:
            if self._stopped:
                return  # `stop` came before this coroutine's first step: nothing to wait for
            self._begin_tick()
            await self._finished
        finally:
            self._stopped = True
            self._ticking = self._prestarted = False
            self._cancel_timer()

    def stop(self) -> None:
        """Ask `run` to return after the current tick (at once between ticks)."""
        self._stopped = True
        if self._prestarted and not self._cancel_prestarted():
            # The handed-over batch has begun: the tick is in progress and ends as any other.
            self._enter_tick()
        if not self._ticking:
            self._cancel_timer()
            self._end_run(None)

    def close(self) -> None:
        """End the runners' threads (a hung one is abandoned); call after the collectors are closed."""
        self._runners.close()

    def pushed(self) -> None:
        """A pushed reading was filed: publish it now, in a frame of its own, also while a tick is in
        progress. Held for the tick's frame, it was lost when the pushing collector's own poll of that
        tick answered after it (a rail sag the ADC reader pushed, replaced by the rail collector's
        reading of the windows since: no frame, alarm, guard or journal saw the sag)."""
        self._awake()
        finished = self._finished
        if self._prestarted and time.monotonic() >= self._next_tick:
            self._enter_tick()
        if self._stopped or finished is None or finished.done():
            return
        try:
            self._publish()
        except Exception as exc:  # noqa: BLE001 - ends `run` with it
            self._fail(exc)

    def take_results(self) -> None:
        """File the results the runners have finished since the last look."""
        slots = self._slots
        finished: list[tuple[str, Outcome, float]] = []
        for runner in self._runners.all:
            while runner.done:
                result = runner.done.popleft()
                name, outcome, _ = result
                slots[name].running_since = None
                if self._spanned_stall and name in self._spanned_stall:
                    self._spanned_stall.discard(name)
                    if outcome[0] == "hung":
                        # Its own watchdog (NVML's) timed the call through the stall: no verdict;
                        # the collector is asked again next time.
                        continue
                finished.append(result)
        if finished:
            self._file_outcomes(finished)
        if len(self._runners.all) > 1:
            # Only a collector that overran has a runner of its own, which is then one more in ``all``.
            self._release_runners()

    def _awake(self) -> None:
        """On the loop, first thing in each of our callbacks: notice that the agent did not run.

        A timer of ours is always armed while sampling (the next tick, or the end of a tick's
        wait). Our callback running more than `STALL_MIN_S` (or one interval) after that timer was
        due, while the process used little CPU since our last callback, means the process was not
        running at all: stopped (SIGSTOP, ^Z), its VM paused, or the machine starved. The collectors'
        calls in flight then stood still with everything else and did not hang: their time is
        counted from now, and the stall is reported once. (A system suspend stops CLOCK_MONOTONIC
        itself, so it needs no excuse; CLOCK_BOOTTIME against it would see a suspend only, not a
        stop or a paused VM, and the calls' own threads' CPU clocks stand still in a driver that
        hangs as well.) A call in flight then that its collector's own watchdog calls hung
        (`CollectorHung`: NVML's watchdog timed it through the stall) gives no verdict (`take_results`).
        """
        now = time.monotonic()
        cpu = time.process_time()
        gap_s, cpu_s = now - self._awake_at, cpu - self._cpu_at
        self._awake_at, self._cpu_at = now, cpu
        due = self._wake_by
        if due is None or self._stopped:
            return
        late_s = now - due
        if late_s <= max(STALL_MIN_S, self.interval_s) or cpu_s > gap_s / 2:
            return
        self._wake_by = None  # reported: the callbacks of this same wake are not late again
        for name, slot in self._slots.items():
            if slot.running_since is not None and slot.running_since < now:
                slot.running_since = now
                self._spanned_stall.add(name)
        if self._file_stall is not None:
            self._file_stall(late_s)

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
        self._ticking = self._prestarted = False
        self._cancel_timer()
        self._end_run(error)

    def _cancel_timer(self) -> None:
        self._wake_by = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, delay: float, callback: Callable[[], None]) -> None:
        """Arm the one timer: ``callback`` in ``delay`` seconds (the loop's next wake for us, `_awake`)."""
        assert self._loop is not None
        self._wake_by = time.monotonic() + delay
        self._timer = self._loop.call_later(delay, callback)

    def _begin_tick(self) -> None:
        """Timer callback: start the collectors due now, then wait a part of the interval for them."""
        self._timer = None
        if self._stopped:
            return
        self._awake()
        try:
            started = self._start_due(self._next_tick)
        except Exception as exc:  # noqa: BLE001 - ends `run` with it, as a failing await in it would
            self._fail(exc)
            return
        if not started:
            self._close_tick()
            return
        self._ticking = True
        self._awaited = set(started)
        assert self._loop is not None
        self._arm(min(self.timeout_s, self.interval_s * _WAIT_FRACTION), self._end_tick)

    def _batch_finished(self, runner: Runner) -> None:
        """A runner's thread: its batch is over; tell the loop (`_batch_done`)."""
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._batch_done, runner)
            except RuntimeError:
                pass  # the loop is closed: the agent has stopped

    def _batch_done(self, runner: Runner) -> None:
        """Loop callback, from a runner's thread: its batch is over (a late one's is ignored).

        Late: of a tick already over, such as an overrunning collector's own thread, whose report
        can come after the tick that filed its result handed the next batch over. It must not put
        that tick in progress before its batch begins (`stop` then waited for it instead of taking
        it back), nor count as the end of a newer batch handed to the same runner.
        """
        self._awake()
        if not (self._ticking or self._prestarted) or runner not in self._awaited:
            return
        with runner.lock:
            if runner.queued or runner.current is not None:
                return  # an earlier batch of this runner ended; the awaited one has not
        if self._prestarted:
            self._enter_tick()
        self._awaited.discard(runner)
        if not self._awaited:
            self._close_tick()  # `_awake` has run for this callback

    def _end_tick(self) -> None:
        """Timer callback: the tick's wait for its collectors ran out (`_close_tick`)."""
        self._awake()
        self._close_tick()

    def _close_tick(self) -> None:
        """Every collector of the tick answered, or its wait ran out: publish, start the next tick."""
        self._ticking = self._prestarted = False
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
            self._arm(delay, self._begin_tick)

    def _prestart(self, delay: float) -> bool:
        """Hand the next tick's batch to the collectors' thread, to start at ``_next_tick`` (in ``delay``
        s) without the loop waking for it, and arm the end of its wait; whether it was handed over.
        Only when no call is running (else the loop starts the tick: it files hung collectors and
        moves the others to a fresh thread first)."""
        if any(slot.running_since is not None for slot in self._slots.values()):
            return False
        started = self._start_due(self._next_tick, start_at=self._next_tick)
        if not started:
            return False
        self._prestarted = True
        self._awaited = set(started)
        assert self._loop is not None
        self._arm(delay + min(self.timeout_s, self.interval_s * _WAIT_FRACTION), self._end_tick)
        return True

    def _start_due(self, tick_at: float, start_at: float | None = None) -> list[Runner]:
        """Start the collectors due at ``tick_at`` (the scheduled monotonic time); return the runners started.

        With ``start_at``, their runners wait until then (`_prestart`) and the calls count as running from then.
        """
        if self._runners.shared.busy:
            self._pin()
        # After the look at the shared runner: a batch that ended between a look at the finished
        # calls and that one left its last call's result unfiled, and the collector would be
        # skipped by this tick as if the call still ran (or called hung past the timeout).
        self.take_results()
        now = time.monotonic() if start_at is None else start_at
        batches: dict[int, tuple[Runner, list[str]]] = {}
        for name, slot in self._slots.items():
            if slot.running_since is not None:
                if now - slot.running_since > self.timeout_s:
                    self._file_hung(name, now - slot.running_since)
                continue
            # Due by the tick's schedule, not by the time it started: a tick woken a little
            # late must not make the next one find the collectors not yet due.
            if tick_at < slot.next_due:
                continue
            slot.next_due = tick_at + slot.interval_s
            slot.running_since = now
            runner = slot.runner or self._runners.shared
            batches.setdefault(id(runner), (runner, []))[1].append(name)
        started: list[Runner] = []
        for runner, names in batches.values():
            with runner.lock:
                runner.queued.extend(names)
            runner.future = runner.executor.submit(run_batch, runner, self._collector_of, self._batch_finished,
                                                   start_at)
            started.append(runner)
        return started

    def _pin(self) -> None:
        """Give the shared runner, whose batch overran the tick, to the collector it is running;
        the others move to a new shared runner (those not started yet are due again).

        The running call is timed from its own start from now on: the time it waited in the batch
        behind the calls ahead of it is not its own (it counted from the tick so far). A stall
        `_awake` saw since it started has moved ``running_since`` past that start: it stays.
        """
        runner = self._runners.shared
        pinned = self._runners.pin_shared()
        if pinned is None:
            return  # the batch is ending: the thread is free
        stuck, started_at, skipped = pinned
        for name in skipped:
            self._slots[name].running_since = None
            self._slots[name].next_due = 0.0
        slot = self._slots[stuck]
        slot.runner = runner
        if slot.running_since is not None and started_at > slot.running_since:
            slot.running_since = started_at

    def _release_runners(self) -> None:
        """A collector whose overrunning call has returned goes back to the shared runner and
        its own thread ends: a loaded machine that makes calls overrun now and then must not
        gather one idle thread per collector that ever overran."""
        for slot in self._slots.values():
            runner = slot.runner
            if runner is not None and not runner.busy and not runner.done and slot.running_since is None:
                slot.runner = None
                self._runners.release(runner)
