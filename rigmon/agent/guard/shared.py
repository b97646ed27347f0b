"""The guard's shared state: what its service, its worker and its state store all read and change.

`GuardShared` is one object held by `rigmon.agent.guard.service.GuardService` (the event loop:
frames, operator commands, readings), `rigmon.agent.guard.worker.GuardWorker` (the worker thread
that talks to the GPUs) and `rigmon.agent.guard.state_store.GuardStateStore` (the state file).
Fields that both threads touch are read and changed under ``lock``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

from rigmon.agent.guard.actuation import GuardActuator
from rigmon.agent.guard.policy import GuardState
from rigmon.agent.guard.state_file import EmitFn
from rigmon.clock import Clock
from rigmon.config import GuardSection
from rigmon.schema import EventValue, Frame, GuardGpuSettings, Severity

log = logging.getLogger(__name__)


class GuardShared:
    """The state of one agent's guard.

    Args:
        config: the ``[guard]`` section.
        control: NVML writes (``None``: no NVIDIA driver; the guard can only report).
        emit: the sampler's ``emit_event``.
        clock: the agent's clock.
        path: the state file (``None``: nowhere; nothing survives a kill).
        node: node name, for the state file.
    """

    def __init__(self, config: GuardSection, control: GuardActuator | None, emit: EmitFn, clock: Clock,
                 path: Path | None, node: str) -> None:
        self.config = config
        self.control = control
        self.emit = emit
        self.clock = clock
        self.path = path
        self.node = node
        #: Guards every field below that the event loop and the worker thread both touch.
        self.lock = threading.Lock()
        #: The policy's state (step, trigger, rate limit, hold, release).
        self.state = GuardState()
        #: Whether the guard writes to the GPUs (enforce mode, and the probe found it may).
        self.acting = False
        #: Why it does not act (``None`` while acting).
        self.reason: str | None = "not started" if config.mode == "enforce" else "dry-run"
        #: Whether the settings in force were found in a previous run's state file.
        self.left_behind = False
        #: Actions that failed since the start.
        self.failures_total = 0
        #: Settings the guard put in force, by GPU index.
        self.in_force: dict[int, GuardGpuSettings] = {}
        #: GPUs whose settings the guard really wrote (this run or, in enforce mode, a previous run
        #: that left them behind) and has not put back: restored even after the guard lost the
        #: right to act (``nvidia-smi -acp UNRESTRICTED`` opens application clocks, not the rest).
        self.changed: set[int] = set()
        #: The GPUs' settings before the guard's first change, by GPU index (what a restore writes).
        self.original: dict[int, GuardGpuSettings] = {}
        #: Persistence mode of each GPU before the guard switched it on (``None``: unknown).
        self.original_persistence: dict[int, bool | None] = {}
        #: Application-clock pair of each GPU, worked out once (``None``: NVML offers none that fits).
        self.app_clocks: dict[int, tuple[int, int] | None] = {}
        #: Why a GPU's pair could not be worked out yet (NVML did not answer; asked again next step).
        self.pair_errors: dict[int, str] = {}
        #: Power-limit range (min, max mW, ``None`` where NVML does not say) of each GPU, read once.
        self.limit_ranges: dict[int, tuple[int | None, int | None] | None] = {}
        #: The latest frame (settings from it when NVML cannot be read).
        self.last_frame: Frame | None = None
        #: When the worker last carried out a decision (Unix seconds).
        self.last_action_at: float | None = None
        #: When the worker took each action on the GPUs within the last hour (or, in dry-run, would have):
        #: each engage, step and restore once, each GPU an extend capped again once.
        self.actions_at: list[float] = []
        #: When the guard last asked whether it may write, and whether asking again may help
        #: (the driver was not loaded yet, a call hung): then it asks again now and then.
        self.probed_at: float | None = None
        self.probe_again = False
        #: Steps the driver refused while application clocks could be written (``nvidia-smi -acp
        #: UNRESTRICTED`` opens those to every user; locked clocks and power limits stay root's).
        self.denied_steps: set[str] = set()
        #: Set when the agent stops: the restore is under way and frames no longer engage.
        self.closing = False
        #: Whether "cannot act" was reported already (once per run).
        self.denied_reported = False
        #: The agent's event loop, bound at start; events hop to it from the worker thread.
        self.loop: asyncio.AbstractEventLoop | None = None

    def event(self, kind: str, severity: Severity, message: str, data: dict[str, EventValue]) -> None:
        """Emit an event on the agent's loop (from any thread; dropped before start and after the loop closed)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self.emit, kind, severity, "guard", message, data)

    def cannot_act(self, reason: str) -> None:
        """Fall back to dry-run because the guard may not write to the GPUs (reported once per run)."""
        with self.lock:
            self.acting, self.reason = False, f"cannot act: {reason}; staying in dry-run"
            report = not self.denied_reported
            self.denied_reported = True
        if report:
            log.warning("guard: %s", self.reason)
            self.event("guard_failed", "warning", f"guard cannot act on this node: {reason}; it stays in dry-run "
                       "and reports what it would do", {"reason": reason, "mode": self.config.mode})
