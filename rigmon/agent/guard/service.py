"""The undervolt guard in the agent: runs the policy on every frame and carries its decisions out.

`GuardService` is a frame listener placed after the alarms, so an alarm that starts firing in
a frame is seen in the same frame. Deciding is pure and quick (`rigmon.agent.guard.policy`);
acting goes to one worker thread that talks to the GPUs through `rigmon.hw.nvml_control`,
every call behind its own watchdog, so a hung driver call never stalls sampling. Every action
is an event (``guard_engaged``, ``guard_step``, ``guard_restored``, ``guard_failed``) with the
trigger, the GPUs and the settings before and after; in dry-run the same events say what it
would have done. The current state is in every frame (`rigmon.agent.guard.collector`,
``readings.guard``); the NVML writes themselves are in `rigmon.agent.guard.actuation`.

Reversible: the GPUs' original settings go to ``<state_dir>/guard-state.json``
(`rigmon.agent.guard.state_file`) before the first write and the file is removed once they
are restored. A stopped agent restores them; an agent that was killed finds the file on its
next start, reports the settings left behind and restores them after the rail has been
healthy for ``restore_after_s``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Literal

from rigmon.agent.guard.actuation import (
    CALL_ERRORS,
    GuardActuator,
    apply_step,
    describe,
    from_control,
    from_frame,
    put_back,
)
from rigmon.agent.guard.policy import (
    HOUR_S,
    Decision,
    GuardState,
    decide,
    derive_app_clocks,
    hold,
    observe,
    plan_settings,
    release,
    steps_of,
)
from rigmon.agent.guard.state_file import (
    STATE_FILE_ERRORS,
    EmitFn,
    SavedSettings,
    read_state,
    state_file_path,
    write_state,
)
from rigmon.clock import Clock
from rigmon.config import GuardSection
from rigmon.hw.nvml_control import ControlDenied, NvmlHung
from rigmon.schema import EventValue, Frame, GuardGpuSettings, GuardReading, Severity

log = logging.getLogger(__name__)

GuardCommand = Literal["hold", "release"]


class GuardService:
    """Runs the guard for one agent.

    Args:
        config: the ``[guard]`` section.
        control: NVML writes (``None``: no NVIDIA driver; the guard can only report).
        emit: the sampler's ``emit_event``.
        clock: the agent's clock.
        state_dir: where ``guard-state.json`` lives (empty: nowhere; nothing survives a kill).
        node: node name, for the state file.
    """

    def __init__(self, config: GuardSection, control: GuardActuator | None, emit: EmitFn, clock: Clock,
                 state_dir: str = "", node: str = "") -> None:
        self.config = config
        self.control = control
        self._emit = emit
        self.clock = clock
        self.node = node
        self.path = state_file_path(state_dir) if state_dir else None
        self._lock = threading.Lock()
        self.state = GuardState()
        self.acting = False
        self.reason: str | None = "not started" if config.mode == "enforce" else "dry-run"
        self.left_behind = False
        self.failures_total = 0
        self.in_force: dict[int, GuardGpuSettings] = {}
        self.original: dict[int, GuardGpuSettings] = {}
        self._original_persistence: dict[int, bool | None] = {}
        self._app_clocks: dict[int, tuple[int, int] | None] = {}
        self._last_frame: Frame | None = None
        self._last_action_at: float | None = None
        self._denied_reported = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rigmon-guard")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[Future[None]] = []

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Bind to the running loop, find settings a previous run left behind, check permission."""
        self._loop = asyncio.get_running_loop()
        self._load_left_behind()
        self._submit(self._probe)

    def _probe(self) -> None:
        if self.config.mode != "enforce":
            return
        if self.control is None:
            self._cannot_act("no NVIDIA driver or GPU (NVML is not available)")
            return
        reason = self.control.probe()
        if reason is None:
            with self._lock:
                self.acting, self.reason = True, None
            log.info("guard: enforcing; it may cap GPU clocks when the rail sags")
            # Work out the clocks now, so engaging costs only the writes: the drop it
            # prevents comes a few seconds after the first sag.
            try:
                count = self.control.device_count()
            except (ControlDenied, *CALL_ERRORS):
                count = 0
            for index in self.config.gpus or range(count):
                self._pair(index)
        else:
            self._cannot_act(reason)

    def _cannot_act(self, reason: str) -> None:
        with self._lock:
            self.acting, self.reason = False, f"cannot act: {reason}; staying in dry-run"
            report = not self._denied_reported
            self._denied_reported = True
        if report:
            log.warning("guard: %s", self.reason)
            self._event("guard_failed", "warning", f"guard cannot act on this node: {reason}; it stays in dry-run "
                        "and reports what it would do", {"reason": reason, "mode": self.config.mode})

    def close(self) -> None:
        """Restore what this run changed (blocking: call from a thread), then stop the worker."""
        with self._lock:
            state, acting = self.state, self.acting
        if state.step > 0 and acting:
            _, decisions = release(state, self.clock.time(), "agent stopping")
            with self._lock:
                self.state = GuardState()
            future = self._executor.submit(self._carry_out_all, decisions)
            try:
                future.result(timeout=self.config.call_timeout_s * (2 + 4 * len(state.gpus)))
            except Exception:  # noqa: BLE001 - a stop must finish; the state file stays for the next run
                log.exception("guard: restoring at stop failed; the next start will find the settings")
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self.control is not None:
            self.control.close()

    # -- the operator ---------------------------------------------------------------------

    def command(self, action: GuardCommand, by: str) -> GuardReading:
        """``hold``: keep the caps in force (no automatic restore); ``release``: restore now and
        do not engage again for ``restore_after_s``."""
        now = self.clock.time()
        with self._lock:
            if action == "hold":
                self.state = hold(self.state)
                decisions: list[Decision] = []
            else:
                self.state, decisions = release(self.state, now, f"released by {by}", self.config.restore_after_s)
        if action == "hold":
            self._event("guard_step", "info", f"guard held by {by}: settings stay until released",
                        {"by": by, "command": "hold", "step": self.state.step})
        elif not decisions:
            self._event("guard_restored", "info", f"guard released by {by}: nothing was in force; it does not "
                        f"engage for {self.config.restore_after_s:g} s", {"by": by, "command": "release", "step": 0})
        for d in decisions:
            self._submit(functools.partial(self._carry_out, d))
        return self.reading()

    # -- frames -----------------------------------------------------------------------------

    def on_frame(self, frame: Frame) -> None:
        """Run the policy on a frame (on the event loop; acting goes to the worker thread)."""
        obs = observe(frame, self.config)
        with self._lock:
            self._last_frame = frame
            self.state, decisions = decide(self.state, obs, self.config)
        for d in decisions:
            self._submit(functools.partial(self._carry_out, d))

    def reading(self) -> GuardReading:
        """The guard's state as it goes into frames."""
        with self._lock:
            s = self.state
            steps = steps_of(self.config)
            now = self.clock.time()
            return GuardReading(
                mode=self.config.mode,
                acting=self.acting,
                state=("released" if s.released_until is not None and now < s.released_until else "armed")
                if s.step == 0 else ("held" if s.held else "engaged"),
                step=s.step,
                step_name=steps[s.step - 1] if 0 < s.step <= len(steps) else None,
                reason=self.reason,
                trigger=s.trigger,
                engaged_at=s.engaged_at,
                last_action_at=self._last_action_at,
                gpus=s.gpus,
                actions_last_hour=sum(1 for t in s.actions if now - t < HOUR_S),
                max_actions_per_hour=self.config.max_actions_per_hour,
                settings=tuple(self.in_force[i] for i in sorted(self.in_force)),
                original=tuple(self.original[i] for i in sorted(self.original)),
                left_behind=self.left_behind,
                failures_total=self.failures_total,
                released_until=s.released_until if s.released_until is not None and now < s.released_until else None,
            )

    def wait_idle(self, timeout_s: float = 10.0) -> None:
        """Wait for the actions queued so far (tests)."""
        for future in list(self._pending):
            future.result(timeout=timeout_s)

    # -- acting (worker thread) ---------------------------------------------------------------

    def _submit(self, fn: Callable[[], None]) -> None:
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._executor.submit(self._safely, fn))

    @staticmethod
    def _safely(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:  # noqa: BLE001 - the worker must survive anything
            log.exception("guard: action failed")

    def _carry_out_all(self, decisions: list[Decision]) -> None:
        for d in decisions:
            self._carry_out(d)

    def _carry_out(self, d: Decision) -> None:
        if d.kind == "limited":
            self._failed(d, f"ceiling of {self.config.max_actions_per_hour} actions per hour reached: "
                            f"staying at step {d.step} although {d.trigger}", None)
            return
        if d.kind == "restore":
            self._restore(d)
            return
        assert d.step_name is not None
        changes: list[tuple[GuardGpuSettings, GuardGpuSettings]] = []
        errors: list[str] = []
        for index in d.gpus:
            before = planned = GuardGpuSettings(index=index)
            try:
                before = self._current(index)
                planned = plan_settings(d.step_name, before, self._pair(index), self.config.power_limit_w)
                after = apply_step(self._writer(), index, d.step_name, planned, self._original_persistence) \
                    if self.acting else planned
            except ControlDenied as exc:
                self._cannot_act(str(exc))
                before = self._current(index)
                after = plan_settings(d.step_name, before, self._pair(index), self.config.power_limit_w)
            except CALL_ERRORS as exc:
                errors.append(f"GPU {index}: {exc}")
                if isinstance(exc, NvmlHung):
                    # The write may still land when the driver returns: remember what to restore.
                    with self._lock:
                        self.original.setdefault(index, before)
                        self.in_force.setdefault(index, planned)
                continue
            with self._lock:
                self.original.setdefault(index, before)
                self.in_force[index] = after
            changes.append((before, after))
        self._last_action_at = self.clock.time()
        self._save()
        if changes:
            kind = "guard_engaged" if d.kind == "engage" else "guard_step"
            verb = "capped" if self.acting else "would cap"
            what = {"app_clocks": "application clocks", "locked_clocks": "locked clocks",
                    "power_limit": "power limit"}[d.step_name]
            message = (f"guard {verb} GPUs {','.join(str(b.index) for b, _ in changes)} (step {d.step}, {what}) "
                       f"because {d.trigger}: {describe([a for _, a in changes])}")
            if not self.acting:
                message += " [dry-run: nothing was changed]"
            self._event(kind, "warning", message, self._data(d, changes))
        if errors:
            self._failed(d, "; ".join(errors), changes)
        elif not changes:
            self._failed(d, f"{d.trigger}, but there is no GPU to act on", changes)

    def _current(self, index: int) -> GuardGpuSettings:
        with self._lock:
            known = self.in_force.get(index)
            frame = self._last_frame
        if known is not None:
            return known
        if self.control is not None:
            try:
                now = self.control.read(index)
            except (ControlDenied, *CALL_ERRORS):
                pass
            else:
                self._original_persistence.setdefault(index, now.persistence)
                return from_control(now)
        return from_frame(frame, index) if frame is not None else GuardGpuSettings(index=index)

    def _pair(self, index: int) -> tuple[int, int] | None:
        if len(self.config.app_clocks_mhz) == 2:
            return self.config.app_clocks_mhz[0], self.config.app_clocks_mhz[1]
        if index not in self._app_clocks:
            pair = None
            if self.control is not None:
                try:
                    pair = derive_app_clocks(self.control.supported_clocks(index),
                                             self.control.read(index).max_clock_graphics_mhz,
                                             self.config.derive_fraction)
                except (ControlDenied, *CALL_ERRORS):
                    pair = None
            self._app_clocks[index] = pair
        return self._app_clocks[index]

    def _writer(self) -> GuardActuator:
        """NVML, when acting (the probe found it)."""
        control = self.control
        assert control is not None
        return control

    def _restore(self, d: Decision) -> None:
        with self._lock:
            original = dict(self.original)
            in_force = dict(self.in_force)
        changes: list[tuple[GuardGpuSettings, GuardGpuSettings]] = []
        errors: list[str] = []
        for index in sorted(original):
            before, target = in_force.get(index, original[index]), original[index]
            try:
                after = put_back(self._writer(), index, target, before, self._original_persistence) \
                    if self.acting else target
            except ControlDenied as exc:
                self._cannot_act(str(exc))
                after = target
            except CALL_ERRORS as exc:
                errors.append(f"GPU {index}: {exc}")
                continue
            changes.append((before, after))
            with self._lock:
                self.in_force.pop(index, None)
                self.original.pop(index, None)
        self._last_action_at = self.clock.time()
        if errors:
            self._save()
            self._failed(d, "restoring: " + "; ".join(errors), changes)
            return
        if self.acting:
            with self._lock:
                self.left_behind = False
            self._remove_state()
        verb = "restored" if self.acting else "would restore"
        message = f"guard {verb} GPUs {','.join(str(i) for i in sorted(original)) or '-'} ({d.trigger})"
        if changes:
            message += f": {describe([a for _, a in changes])}"
        self._event("guard_restored", "info", message, self._data(d, changes))

    def _failed(self, d: Decision, why: str, changes: list[tuple[GuardGpuSettings, GuardGpuSettings]] | None) -> None:
        with self._lock:
            self.failures_total += 1
        log.warning("guard: %s", why)
        self._event("guard_failed", "warning", f"guard: {why}", self._data(d, changes or []))

    def _data(self, d: Decision, changes: list[tuple[GuardGpuSettings, GuardGpuSettings]]) -> dict[str, EventValue]:
        return {
            "mode": self.config.mode,
            "dry_run": not self.acting,
            "trigger": d.trigger,
            "step": d.step,
            "step_name": d.step_name,
            "gpus": ",".join(str(i) for i in d.gpus),
            "before": describe([b for b, _ in changes]),
            "after": describe([a for _, a in changes]),
        }

    def _event(self, kind: str, severity: Severity, message: str, data: dict[str, EventValue]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._emit, kind, severity, "guard", message, data)

    # -- the state file ---------------------------------------------------------------------

    def _save(self) -> None:
        if self.path is None:
            return
        with self._lock:
            if not self.acting or not self.original:
                return
            s = self.state
            saved = SavedSettings(
                node=self.node, saved_at=self.clock.time(), step=s.step, trigger=s.trigger, engaged_at=s.engaged_at,
                gpus=tuple(s.gpus), original=tuple(self.original[i] for i in sorted(self.original)),
                in_force=tuple(self.in_force[i] for i in sorted(self.in_force)),
                original_persistence=dict(self._original_persistence),
            )
        try:
            write_state(self.path, saved)
        except OSError as exc:
            log.warning("guard: cannot write %s: %s", self.path, exc)

    def _remove_state(self) -> None:
        if self.path is not None:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("guard: cannot remove %s: %s", self.path, exc)

    def _load_left_behind(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            saved = read_state(self.path)
        except STATE_FILE_ERRORS as exc:
            log.warning("guard: unreadable %s (%s): settings a previous run changed are unknown", self.path, exc)
            self._event("guard_failed", "warning", f"guard: unreadable {self.path.name}: {exc}", {})
            return
        original, in_force, step, gpus = saved.original, saved.in_force, saved.step, saved.gpus
        now = self.clock.time()
        with self._lock:
            self.original = {o.index: o for o in original}
            self.in_force = {o.index: o for o in in_force}
            self._original_persistence = dict(saved.original_persistence)
            self.left_behind = True
            self.state = GuardState(step=max(1, step), trigger=f"left behind by a previous run: {saved.trigger}",
                                    engaged_at=saved.engaged_at, last_step_at=now, last_trigger_at=now,
                                    gpus=gpus)
        message = (f"guard found settings a previous agent run left in place on GPUs "
                   f"{','.join(map(str, gpus))}: {describe(in_force)} (originals {describe(original)}); "
                   f"they are restored after the rail is healthy for {self.config.restore_after_s:g} s")
        log.warning("guard: %s", message)
        self._event("guard_engaged", "warning", message, {
            "left_behind": True, "step": step, "gpus": ",".join(map(str, gpus)),
            "before": describe(original), "after": describe(in_force), "mode": self.config.mode,
            "trigger": str(saved.trigger),
        })
