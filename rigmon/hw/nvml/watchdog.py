"""The NVML watchdog, the binding target of the call in progress, and the errors every NVML read raises.

See `rigmon.hw.nvml` for how a binding's *target* selects a simulated machine.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import pynvml

T = TypeVar("T")

#: Seconds the caller waits for a call at a time: each wait that ends much later than asked (by more
#: than `WAIT_SLACK_S`) means the process did not run meanwhile, and only the slice and slack count.
WAIT_SLICE_S = 0.25
WAIT_SLACK_S = 0.25

_TARGET: contextvars.ContextVar[str | None] = contextvars.ContextVar("rigmon_nvml_target", default=None)


def current_target() -> str | None:
    """The root whose GPUs the NVML call in progress is for (see `rigmon.hw.nvml`).

    ``None`` outside a `PynvmlNvml` call (a test calling pynvml directly).
    """
    return _TARGET.get()


def set_target(target: str | None) -> contextvars.Token[str | None]:
    """Make ``target`` the `current_target` of this thread's calls; returns the token for `reset_target`."""
    return _TARGET.set(target)


def reset_target(token: contextvars.Token[str | None]) -> None:
    """Undo a `set_target`."""
    _TARGET.reset(token)


class NvmlUnavailable(Exception):
    """No NVIDIA driver, library or GPU: the quiet "not present" state."""


class NvmlHung(Exception):
    """An NVML call did not return within the watchdog timeout (or one is still stuck).

    Args:
        message: what did not return, for how long.
        call: the function of the call that did not return (``None``: not known), whether it has
            returned since or not.
    """

    def __init__(self, message: str, call: Callable[[], object] | None = None) -> None:
        super().__init__(message)
        self.call = call


class NvmlStarting(Exception):
    """``nvmlInit`` has not returned yet, within its own budget: without persistence mode the driver
    brings every GPU up first, which takes seconds on a V100 box. Not a hang (yet)."""


class _Job:
    """One call handed to the watchdog thread: its function, outcome, and a lock released when done."""

    __slots__ = ("fn", "result", "error", "finished", "done")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None
        self.finished = False
        self.done = threading.Lock()
        self.done.acquire()


class Watchdog:
    """Runs calls in one dedicated thread and gives up waiting after a timeout.

    A call that overruns is left running (a thread stuck in the driver cannot be killed);
    until it returns, every further call fails at once with `NvmlHung` instead of
    queueing behind it. When it returns, the next call runs normally: the hang is over.

    The hand-off is two plain locks (one wakes the thread, one tells the caller the call is
    done), not an executor's future, queue and conditions: the thread runs one call a poll, and
    the executor's bookkeeping around it cost more than many of the calls. The thread
    (``rigmon-nvml-NAME_0``) starts with the first call, runs with `current_target` set for
    good, and is a daemon: a call stuck in the driver never holds up the interpreter's exit.

    Args:
        name: thread name suffix.
        target: value of `current_target` while the calls run.
    """

    def __init__(self, name: str, target: str | None) -> None:
        self._name = f"rigmon-nvml-{name}_0"
        self._target = target
        self._lock = threading.Lock()
        #: Serialises callers: one call at a time is handed over (a second caller waits its turn
        #: within its own timeout, as behind an executor's queue).
        self._turn = threading.Lock()
        #: Released to wake the thread for `_job` (``None``: exit).
        self._wake = threading.Lock()
        self._wake.acquire()
        self._job: _Job | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._stuck: _Job | None = None
        self._stuck_since = 0.0

    @property
    def stuck(self) -> bool:
        """Whether a call that overran is still running."""
        with self._lock:
            return self._stuck is not None and not self._stuck.finished

    def run(self, fn: Callable[[], T], timeout_s: float) -> T:
        """Run ``fn`` in the watchdog thread and return its result.

        Raises:
            NvmlHung: ``fn`` did not return within ``timeout_s``, or an earlier call is
                still stuck.
            Exception: whatever ``fn`` raised.
        """
        started = time.monotonic()
        if not self._turn.acquire(timeout=max(0.0, timeout_s)):
            raise NvmlHung(f"an NVML call did not return within {timeout_s:g} s")
        # Waited for an earlier caller's call (nothing else before the wait below blocks).
        queued_s = time.monotonic() - started
        try:
            with self._lock:
                if self._stuck is not None:
                    if not self._stuck.finished:
                        waited_s = time.monotonic() - self._stuck_since
                        raise NvmlHung(f"an NVML call has not returned for {waited_s:.1f} s", self._stuck.fn)
                    self._stuck = None
                if self._closed:
                    raise RuntimeError("the NVML watchdog is closed")
                if self._thread is None:
                    self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                    self._thread.start()
                job = self._job = _Job(fn)
            self._wake.release()
            if not wait_running(partial(_done, job), timeout_s - queued_s):
                with self._lock:
                    if not job.finished:
                        self._stuck = job
                        self._stuck_since = started
                        raise NvmlHung(f"an NVML call did not return within {timeout_s:g} s", fn)
            if job.error is not None:
                raise job.error
            result: T = job.result
            return result
        finally:
            self._turn.release()

    def _serve(self) -> None:
        _TARGET.set(self._target)
        while True:
            self._wake.acquire()
            job = self._job
            if job is None:
                return
            self._job = None
            try:
                job.result = job.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                job.error = exc
            with self._lock:
                job.finished = True
            job.done.release()
            if self._closed:
                return

    def close(self) -> None:
        """Stop the thread (abandoned if stuck: it ends when the stuck call returns)."""
        # No hand-off in progress (its caller holds the turn): the thread is idle, or still in a
        # call that overran. A call in progress ends the thread itself when it returns.
        free = self._turn.acquire(timeout=0)
        try:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                idle = (free and self._thread is not None
                        and (self._stuck is None or self._stuck.finished))
            if idle:
                self._job = None
                self._wake.release()
        finally:
            if free:
                self._turn.release()


def _done(job: _Job, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for ``job`` to finish; whether it did."""
    return job.done.acquire(timeout=timeout_s)


def wait_running(wait: Callable[[float], bool], budget_s: float) -> bool:
    """Wait with ``wait(timeout_s)`` (true when done) for ``budget_s`` seconds of the process's running time.

    Time the process did not run does not count: stopped (SIGSTOP, ^Z) or its VM paused, the call
    waited for stood still with everything else (`rigmon check` caught across a stop called every
    GPU hung). The wait goes in slices; a slice that ends later than asked counts as its length and
    `WAIT_SLACK_S` only. (The waited thread's CPU clock cannot tell: it stands still in a driver
    that hangs as well.)

    Returns:
        Whether ``wait`` said done within the budget.
    """
    last = time.monotonic()
    while True:
        if budget_s <= 0:
            return wait(0.0)
        slice_s = min(budget_s, WAIT_SLICE_S)
        if wait(slice_s):
            return True
        now = time.monotonic()
        budget_s -= min(now - last, slice_s + WAIT_SLACK_S)
        last = now


class RunningStopwatch:
    """Seconds of the process's running time since the stopwatch was made: time the process was
    stopped (SIGSTOP, ^Z, a debugger) or its VM paused does not count.

    `wait_running` for a span nobody waits through (the first ``nvmlInit``, which polls only look
    at): from `start` on, the process's one stopwatch thread (``rigmon-stopwatch-clock``, see
    `_Looker`) looks at ``clock`` every `WAIT_SLICE_S` until `stop`. A look that comes later than
    the slice and `WAIT_SLACK_S` after the previous one means the process did not run meanwhile,
    and only the slice and slack count; so does the time since the last look in `elapsed`. (A
    stopped process's CPU clocks stand still, but so do those of a thread stuck in the driver:
    only a thread that should have woken can tell.)

    Args:
        name: what it times (``nvml-init``), in its ``repr``.
        clock: monotonic seconds (``time.monotonic``; tests inject one that jumps over a stop).
    """

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._ran_s = 0.0
        self._last = clock()

    def __repr__(self) -> str:
        return f"RunningStopwatch({self.name!r}, ran {self.elapsed():.2f} s)"

    def start(self) -> RunningStopwatch:
        """Have the stopwatch thread look at the clock from now on; returns the stopwatch."""
        _LOOKER.add(self)
        return self

    def look(self) -> None:
        """Count the time since the previous look (only a slice and its slack when it was a stop)."""
        with self._lock:
            now = self._clock()
            self._ran_s += _ran_s(now - self._last)
            self._last = now

    def elapsed(self) -> float:
        """Seconds the process has run since the stopwatch was made."""
        with self._lock:
            return self._ran_s + _ran_s(self._clock() - self._last)

    def stop(self) -> None:
        """No more looks by the stopwatch thread."""
        _LOOKER.discard(self)


class _Looker:
    """The thread that looks at the clock of every started `RunningStopwatch`, one per process:
    started with the first stopwatch and kept, asleep while none runs. A thread per stopwatch cost
    a thread start (~50 us of CPU, ~200 us waited for) at every ``nvmlInit`` of a rig without the
    driver, where the init fails at once and is tried again at every poll."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running: set[RunningStopwatch] = set()
        self._thread: threading.Thread | None = None

    def add(self, stopwatch: RunningStopwatch) -> None:
        with self._cond:
            self._running.add(stopwatch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._look, name="rigmon-stopwatch-clock", daemon=True)
                self._thread.start()
            self._cond.notify()

    def discard(self, stopwatch: RunningStopwatch) -> None:
        with self._cond:
            self._running.discard(stopwatch)

    def _look(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._running:
                    cond.wait()
                # A slice, or less when another stopwatch starts: a look sooner than a slice counts whole.
                cond.wait(WAIT_SLICE_S)
                running = list(self._running)
            for stopwatch in running:
                stopwatch.look()

    def forget_thread(self) -> None:
        """In a forked child: the thread is the parent's; the child's first stopwatch starts its own."""
        self._cond = threading.Condition()
        self._running = set()
        self._thread = None


_LOOKER = _Looker()
os.register_at_fork(after_in_child=_LOOKER.forget_thread)


def _ran_s(gap_s: float) -> float:
    """The running time in ``gap_s`` seconds between two looks one slice apart: all of it, or a
    slice and its slack when the process did not run meanwhile."""
    return min(max(0.0, gap_s), WAIT_SLICE_S + WAIT_SLACK_S)


def bind_library(library: object | None) -> object | None:
    """Put ``library`` beneath pynvml as its loaded NVML library; return the one it replaces.

    For a library serving simulated machines (``rigmon.sim.nvml``): pynvml then calls its
    symbols instead of loading ``libnvidia-ml.so.1``. The function-pointer cache is
    cleared so no symbol of the previous library survives. ``None`` unloads, so the next
    init loads the real library again.
    """
    with pynvml.libLoadLock:
        previous: object | None = pynvml.nvmlLib
        pynvml.nvmlLib = library
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlLib_refcount = 0
    return previous
