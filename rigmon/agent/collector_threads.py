"""The collectors' worker threads: a runner calls the collectors of a batch one after another.

The tick scheduler (`rigmon.agent.ticks`) decides which collectors are due and on which runner;
a runner's thread calls them, files each outcome in ``done`` and says when its batch is over.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

import msgspec

from rigmon.collectors.base import (
    Collector,
    CollectorError,
    CollectorHung,
    CollectorStarting,
    NoData,
)
from rigmon.hw.root import read_scope

#: What one collector call gave: state (ok, absent, pending, hung, error) and records or an error text
#: (`Failed` for an error that came with records).
Outcome = tuple[str, object]


class Failed(NamedTuple):
    """The payload of an ``error`` outcome whose collector read records nonetheless (`CollectorError.records`)."""

    error: str
    records: list[object]


class Runner(msgspec.Struct, eq=False):
    """A worker thread that runs the collector calls of a batch one after another.

    All collectors share one runner, so a tick costs one hand-off to a thread and one back
    instead of one pair per collector. A call still running when the next tick comes
    (hung in a driver, or slower than the interval) keeps the runner: it becomes that
    collector's own, and the others move to a new shared runner (see `rigmon.agent.ticks.TickScheduler`).
    """

    executor: ThreadPoolExecutor
    #: Guards ``queued`` and ``current`` between the worker and the event loop.
    lock: threading.Lock = msgspec.field(default_factory=threading.Lock)
    #: Names of the batch not started yet.
    queued: list[str] = msgspec.field(default_factory=list)
    #: Name of the collector whose call is running now.
    current: str | None = None
    #: ``time.monotonic()`` the last call started (written with ``current``): a call is timed from
    #: its own start, not from its batch's, which includes the calls ahead of it in the batch.
    started_at: float = 0.0
    #: Finished calls (name, outcome, duration in s), appended by the worker, taken by the loop.
    done: deque[tuple[str, Outcome, float]] = msgspec.field(default_factory=deque)
    #: The batch running on the executor (done once `run_batch` returned).
    future: Future[None] | None = None
    #: Held while a batch may wait for its start time; `wake` releases it to end the wait at
    #: once (its queue is emptied first: the sampler stopped before the batch began). A lock
    #: with a timeout is one wait in C; an `threading.Event`'s timed wait runs a Condition in
    #: Python on the collectors' thread every tick.
    gate: threading.Lock = msgspec.field(default_factory=lambda: _held_lock())

    @property
    def busy(self) -> bool:
        return self.future is not None and not self.future.done()


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


def wake(runner: Runner) -> None:
    """End the runner's wait for its batch's start time now (see `run_batch`)."""
    try:
        runner.gate.release()
    except RuntimeError:
        pass  # released already, and not taken back yet: the wait ends anyway


def new_runner(thread_name: str) -> Runner:
    """A runner with its own worker thread (threads named ``thread_name``)."""
    return Runner(executor=ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name))


class Runners:
    """Every runner that may hold results: the shared one and those collectors kept while a call overran.

    Args:
        thread_name: name of the runners' threads.
    """

    def __init__(self, thread_name: str) -> None:
        self.thread_name = thread_name
        #: The runner the collectors without one of their own share.
        self.shared = new_runner(thread_name)
        self.all: list[Runner] = [self.shared]

    def pin_shared(self) -> tuple[str, float, list[str]] | None:
        """Give the shared runner, whose batch overran the tick, to its running call; start a new shared one.

        Returns:
            The running collector's name, the ``time.monotonic()`` its call started, and the names
            of the batch not started yet (taken off the runner), or ``None`` if the batch is ending
            (the worker saw its queue empty): the thread is free and stays shared.
        """
        runner = self.shared
        with runner.lock:
            stuck = runner.current
            if stuck is None:
                return None
            runner.current = None
            started_at = runner.started_at
            skipped, runner.queued = runner.queued, []
        self.shared = new_runner(self.thread_name)
        self.all.append(self.shared)
        return stuck, started_at, skipped

    def release(self, runner: Runner) -> None:
        """End a collector's own runner (idle, its results taken)."""
        self.all.remove(runner)
        runner.executor.shutdown(wait=False)

    def close(self) -> None:
        """End every runner's thread (a hung one is abandoned)."""
        for runner in self.all:
            # A batch waiting for its start time must not call collectors that are closed now.
            with runner.lock:
                runner.queued = []
            wake(runner)
            runner.executor.shutdown(wait=False, cancel_futures=True)


def run_batch(runner: Runner, collector_of: Callable[[str], Collector], batch_done: Callable[[Runner], None],
              start_at: float | None = None) -> None:
    """Worker thread: call the queued collectors in turn until the batch is empty, then ``batch_done(runner)``.

    With ``start_at`` (``time.monotonic()`` seconds), wait until then first: the sampler hands
    the next tick's batch over when the last one ends, so the event loop need not wake to start it.

    The batch is one read scope (`rigmon.hw.root.read_scope`): a directory or file that one
    collector of the batch already read is not read again by the next (host and psu_hwmon both
    list the hwmon chips); the next batch reads everything afresh.
    """
    if start_at is not None:
        while True:
            left = start_at - time.monotonic()
            if left <= 0 or runner.gate.acquire(timeout=left):
                break
    with read_scope():
        while True:
            with runner.lock:
                if not runner.queued:
                    runner.current = None
                    break
                name = runner.queued.pop(0)
                runner.current = name
                runner.started_at = t0 = time.monotonic()
            outcome = call_collector(collector_of(name))
            runner.done.append((name, outcome, time.monotonic() - t0))
    batch_done(runner)


def call_collector(collector: Collector) -> Outcome:
    """Run one collection (in a runner's thread): its state and records, or its error text (with the records
    a failing collector read nonetheless: `Failed`); nothing escapes."""
    try:
        return ("ok", list(collector.collect()))
    except NoData as exc:
        return ("absent", str(exc) or "not present")
    except CollectorStarting as exc:
        return ("pending", str(exc) or "starting")
    except CollectorHung as exc:
        return ("hung", str(exc) or "no answer")
    except CollectorError as exc:
        # Its message is written for the operator; the class name is for unexpected failures (bugs).
        error = str(exc) or "failed"
        return ("error", Failed(error, list(exc.records)) if exc.records else error)
    except Exception as exc:  # noqa: BLE001 - any failure is reported, none escapes
        return ("error", f"{type(exc).__name__}: {exc}")
