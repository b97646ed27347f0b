"""The undervolt guard in the agent: runs the policy on every frame and carries its decisions out.

`GuardService` is a frame listener placed after the alarms, so an alarm that starts firing in
a frame is seen in the same frame. Deciding is pure and quick (`rigmon.agent.guard.policy`);
acting goes to one worker thread that talks to the GPUs through `rigmon.hw.nvml_control`,
every call behind its own watchdog, so a hung driver call never stalls sampling. Every action
is an event (``guard_engaged``, ``guard_step``, ``guard_restored``, ``guard_failed``) with the
trigger, the GPUs and the settings before and after; in dry-run the same events say what it
would have done. The current state is in every frame (`GuardCollector`, ``readings.guard``).

Reversible: the GPUs' original settings go to ``<state_dir>/guard-state.json`` before the
first write and the file is removed once they are restored. A stopped agent restores them;
an agent that was killed finds the file on its next start, reports the settings left behind
and restores them after the rail has been healthy for ``restore_after_s``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Literal, Protocol

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
from rigmon.clock import Clock
from rigmon.collectors.base import NoData, PolledCollector
from rigmon.config import GuardSection
from rigmon.hw.nvml_control import (
    ControlDenied,
    ControlFailed,
    ControlUnsupported,
    GpuControlSettings,
    NvmlHung,
    NvmlUnavailable,
)
from rigmon.schema import EventValue, Frame, GuardGpuSettings, GuardReading, GuardStepName, Severity
from rigmon.typed import TypedDataError, from_data, to_data

log = logging.getLogger(__name__)

STATE_FILE = "guard-state.json"
#: Lowest clock of a locked range: the GPU may still idle down.
LOCKED_MIN_MHZ = 135
#: Errors of one NVML write that leave the guard working (the next trigger tries again).
_CALL_ERRORS = (ControlFailed, ControlUnsupported, NvmlHung, NvmlUnavailable)

EmitFn = Callable[[str, Severity, str, str, dict[str, EventValue] | None], object]
GuardCommand = Literal["hold", "release"]


class GuardActuator(Protocol):
    """What the guard needs from `rigmon.hw.nvml_control.NvmlControl`."""

    def device_count(self) -> int: ...
    def read(self, index: int) -> GpuControlSettings: ...
    def supported_clocks(self, index: int) -> dict[int, tuple[int, ...]]: ...
    def set_app_clocks(self, index: int, mem_mhz: int, graphics_mhz: int) -> GpuControlSettings: ...
    def reset_app_clocks(self, index: int) -> GpuControlSettings: ...
    def set_locked_clocks(self, index: int, min_mhz: int, max_mhz: int) -> None: ...
    def reset_locked_clocks(self, index: int) -> None: ...
    def set_power_limit(self, index: int, limit_mw: int) -> GpuControlSettings: ...
    def set_persistence(self, index: int, enabled: bool) -> None: ...
    def probe(self) -> str | None: ...
    def close(self) -> None: ...


def state_file_path(state_dir: str | os.PathLike[str]) -> Path:
    """Where the guard keeps the settings it changed (and the originals to restore)."""
    return Path(state_dir) / STATE_FILE


def describe(settings: Sequence[GuardGpuSettings]) -> str:
    """One line for events and logs: ``gpu0 877/1005 MHz lock<=1005 200 W; gpu1 ...``."""
    parts = []
    for s in settings:
        bits = [f"gpu{s.index}"]
        if s.app_clock_mem_mhz is not None or s.app_clock_graphics_mhz is not None:
            bits.append(f"{s.app_clock_mem_mhz}/{s.app_clock_graphics_mhz} MHz")
        if s.locked_clock_max_mhz is not None:
            bits.append(f"lock<={s.locked_clock_max_mhz}")
        if s.power_limit_w is not None:
            bits.append(f"{s.power_limit_w:g} W")
        parts.append(" ".join(bits))
    return "; ".join(parts)


def _from_control(s: GpuControlSettings, locked: int | None = None) -> GuardGpuSettings:
    return GuardGpuSettings(
        index=s.index, app_clock_mem_mhz=s.app_clock_mem_mhz, app_clock_graphics_mhz=s.app_clock_graphics_mhz,
        locked_clock_max_mhz=locked,
        power_limit_w=None if s.power_limit_mw is None else s.power_limit_mw / 1000.0,
    )


def _from_frame(frame: Frame, index: int) -> GuardGpuSettings:
    for g in frame.readings.gpus:
        if g.index == index:
            return GuardGpuSettings(index=index, app_clock_mem_mhz=g.clock_app_mem_mhz,
                                    app_clock_graphics_mhz=g.clock_app_graphics_mhz, power_limit_w=g.power_limit_w)
    return GuardGpuSettings(index=index)


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
            except (ControlDenied, *_CALL_ERRORS):
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
                after = self._apply(index, d.step_name, planned) if self.acting else planned
            except ControlDenied as exc:
                self._cannot_act(str(exc))
                before = self._current(index)
                after = plan_settings(d.step_name, before, self._pair(index), self.config.power_limit_w)
            except _CALL_ERRORS as exc:
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
            except (ControlDenied, *_CALL_ERRORS):
                pass
            else:
                self._original_persistence.setdefault(index, now.persistence)
                return _from_control(now)
        return _from_frame(frame, index) if frame is not None else GuardGpuSettings(index=index)

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
                except (ControlDenied, *_CALL_ERRORS):
                    pair = None
            self._app_clocks[index] = pair
        return self._app_clocks[index]

    def _apply(self, index: int, step: GuardStepName, planned: GuardGpuSettings) -> GuardGpuSettings:
        control = self.control
        assert control is not None
        if step == "app_clocks":
            if planned.app_clock_mem_mhz is None or planned.app_clock_graphics_mhz is None:
                raise ControlFailed(f"GPU {index}: no application-clock pair (configure app_clocks_mhz)")
            if index not in self._original_persistence:
                self._original_persistence[index] = control.read(index).persistence
            if self._original_persistence[index] is False:
                # Without persistence mode the driver may unload between jobs and drop the clocks.
                try:
                    control.set_persistence(index, True)
                except (ControlUnsupported, ControlFailed):
                    pass
            got = control.set_app_clocks(index, planned.app_clock_mem_mhz, planned.app_clock_graphics_mhz)
            return replace(planned, app_clock_mem_mhz=got.app_clock_mem_mhz,
                           app_clock_graphics_mhz=got.app_clock_graphics_mhz)
        if step == "locked_clocks":
            if planned.locked_clock_max_mhz is None:
                raise ControlFailed(f"GPU {index}: no clock to lock to")
            control.set_locked_clocks(index, LOCKED_MIN_MHZ, planned.locked_clock_max_mhz)
            return planned
        assert planned.power_limit_w is not None
        got = control.set_power_limit(index, int(planned.power_limit_w * 1000))
        return replace(planned, power_limit_w=None if got.power_limit_mw is None else got.power_limit_mw / 1000.0)

    def _restore(self, d: Decision) -> None:
        with self._lock:
            original = dict(self.original)
            in_force = dict(self.in_force)
        changes: list[tuple[GuardGpuSettings, GuardGpuSettings]] = []
        errors: list[str] = []
        for index in sorted(original):
            before, target = in_force.get(index, original[index]), original[index]
            try:
                after = self._put_back(index, target, before) if self.acting else target
            except ControlDenied as exc:
                self._cannot_act(str(exc))
                after = target
            except _CALL_ERRORS as exc:
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

    def _put_back(self, index: int, target: GuardGpuSettings, before: GuardGpuSettings) -> GuardGpuSettings:
        control = self.control
        assert control is not None
        if before.locked_clock_max_mhz is not None:
            try:
                control.reset_locked_clocks(index)
            except ControlUnsupported:
                pass
        if target.app_clock_mem_mhz is not None and target.app_clock_graphics_mhz is not None:
            got = control.set_app_clocks(index, target.app_clock_mem_mhz, target.app_clock_graphics_mhz)
        else:
            got = control.reset_app_clocks(index)
        if target.power_limit_w is not None and before.power_limit_w != target.power_limit_w:
            got = control.set_power_limit(index, int(target.power_limit_w * 1000))
        if self._original_persistence.get(index) is False:
            try:
                control.set_persistence(index, False)
            except (ControlUnsupported, ControlFailed):
                pass
        return _from_control(got)

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
            data = {
                "node": self.node, "saved_at": self.clock.time(), "step": s.step, "trigger": s.trigger,
                "engaged_at": s.engaged_at, "gpus": list(s.gpus),
                "original": [to_data(self.original[i]) for i in sorted(self.original)],
                "in_force": [to_data(self.in_force[i]) for i in sorted(self.in_force)],
                "original_persistence": {str(k): v for k, v in self._original_persistence.items()},
            }
        tmp = self.path.with_suffix(".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, self.path)
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
            data = json.loads(self.path.read_text())
            original = [from_data(GuardGpuSettings, o) for o in data["original"]]
            in_force = [from_data(GuardGpuSettings, o) for o in data["in_force"]]
            step = int(data["step"])
            gpus = tuple(int(i) for i in data["gpus"])
            persistence = {int(k): v for k, v in dict(data.get("original_persistence", {})).items()}
        except (OSError, ValueError, KeyError, TypeError, TypedDataError) as exc:
            log.warning("guard: unreadable %s (%s): settings a previous run changed are unknown", self.path, exc)
            self._event("guard_failed", "warning", f"guard: unreadable {self.path.name}: {exc}", {})
            return
        now = self.clock.time()
        with self._lock:
            self.original = {o.index: o for o in original}
            self.in_force = {o.index: o for o in in_force}
            self._original_persistence = persistence
            self.left_behind = True
            self.state = GuardState(step=max(1, step), trigger=f"left behind by a previous run: {data.get('trigger')}",
                                    engaged_at=data.get("engaged_at"), last_step_at=now, last_trigger_at=now,
                                    gpus=gpus)
        message = (f"guard found settings a previous agent run left in place on GPUs "
                   f"{','.join(map(str, gpus))}: {describe(in_force)} (originals {describe(original)}); "
                   f"they are restored after the rail is healthy for {self.config.restore_after_s:g} s")
        log.warning("guard: %s", message)
        self._event("guard_engaged", "warning", message, {
            "left_behind": True, "step": step, "gpus": ",".join(map(str, gpus)),
            "before": describe(original), "after": describe(in_force), "mode": self.config.mode,
            "trigger": str(data.get("trigger")),
        })


def report_left_behind_when_disabled(state_dir: str, emit: EmitFn) -> bool:
    """With the guard switched off: say so if a previous run left GPU settings in place.

    Nothing restores them then (the guard that knows the originals is off); the event says
    how to put them back. Returns whether the state file was there.
    """
    if not state_dir:
        return False
    path = state_file_path(state_dir)
    if not path.exists():
        return False
    message = (f"a previous agent run's undervolt guard left GPU settings in place ({path}), and the guard "
               "is now off: enable [guard] to restore them, or reset them by hand (nvidia-smi -rac; -rgc; "
               "-pl with the default limit) and remove the file")
    log.warning("guard: %s", message)
    emit("guard_failed", "warning", "guard", message, {"left_behind": True, "state_file": str(path)})
    return True


class GuardCollector(PolledCollector):
    """Puts the guard's state into every frame (``readings.guard``)."""

    name = "guard"

    def __init__(self, service: GuardService) -> None:
        self._service = service

    def collect(self) -> Sequence[object]:
        if not self._service.config.enabled:
            raise NoData("guard disabled")
        return [self._service.reading()]
