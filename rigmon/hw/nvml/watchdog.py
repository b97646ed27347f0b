"""The NVML watchdog, the binding target of the call in progress, and the errors every NVML read raises.

See `rigmon.hw.nvml` for how a binding's *target* selects a simulated machine.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pynvml

T = TypeVar("T")

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
    """An NVML call did not return within the watchdog timeout (or one is still stuck)."""


class Watchdog:
    """Runs calls in one dedicated thread and gives up waiting after a timeout.

    A call that overruns is left running (a thread stuck in the driver cannot be killed);
    until it returns, every further call fails at once with `NvmlHung` instead of
    queueing behind it. When it returns, the next call runs normally: the hang is over.

    Args:
        name: thread name suffix.
        target: value of `current_target` while the calls run.
    """

    def __init__(self, name: str, target: str | None) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rigmon-nvml-{name}")
        self._target = target
        self._stuck: concurrent.futures.Future[Any] | None = None
        self._stuck_since = 0.0
        self._lock = threading.Lock()

    @property
    def stuck(self) -> bool:
        """Whether a call that overran is still running."""
        with self._lock:
            return self._stuck is not None and not self._stuck.done()

    def run(self, fn: Callable[[], T], timeout_s: float) -> T:
        """Run ``fn`` in the watchdog thread and return its result.

        Raises:
            NvmlHung: ``fn`` did not return within ``timeout_s``, or an earlier call is
                still stuck.
            Exception: whatever ``fn`` raised.
        """
        with self._lock:
            if self._stuck is not None:
                if not self._stuck.done():
                    waited_s = time.monotonic() - self._stuck_since
                    raise NvmlHung(f"an NVML call has not returned for {waited_s:.1f} s")
                self._stuck = None
            future = self._executor.submit(self._in_target, fn)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            with self._lock:
                self._stuck = future
                self._stuck_since = time.monotonic() - timeout_s
            raise NvmlHung(f"an NVML call did not return within {timeout_s:g} s") from None

    def _in_target(self, fn: Callable[[], T]) -> T:
        token = _TARGET.set(self._target)
        try:
            return fn()
        finally:
            _TARGET.reset(token)

    def close(self) -> None:
        """Stop the thread (abandoned if stuck)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


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
