"""The guard's worker thread: carries the policy's decisions out on the GPUs and reports each as an event.

`GuardWorker` runs every NVML call on one thread (each behind `rigmon.hw.nvml_control`'s own
watchdog), so a hung driver call never stalls sampling. It engages a step (`apply_step`), restores
the originals (`put_back`), or, in dry-run, says what it would have done; it records what it
changed in `rigmon.agent.guard.shared.GuardShared` and saves it through
`rigmon.agent.guard.state_store.GuardStateStore` before the next decision.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from rigmon.agent.guard.actuation import (
    CALL_ERRORS,
    GuardActuator,
    apply_step,
    describe,
    from_control,
    from_frame,
    put_back,
)
from rigmon.agent.guard.policy import HOUR_S, Decision, plan_settings, steps_of
from rigmon.agent.guard.shared import GuardShared
from rigmon.agent.guard.state_store import GuardStateStore
from rigmon.agent.guard.targets import check_fit, limit_of, no_pair_text, pair_of
from rigmon.hw.nvml_control import ControlDenied, NvmlHung
from rigmon.schema import EventValue, GuardGpuSettings, GuardStepName

log = logging.getLogger(__name__)

Changes = list[tuple[GuardGpuSettings, GuardGpuSettings]]
#: What went wrong, per GPU: ``(index, "GPU 3: ...")``.
GpuErrors = list[tuple[int, str]]
#: What each step caps, in events.
STEP_TEXT: dict[GuardStepName, str] = {"app_clocks": "application clocks", "locked_clocks": "locked clocks",
                                       "power_limit": "power limit"}


def _gpu_error(index: int, exc: Exception) -> tuple[int, str]:
    """``GPU 3: ...`` once (NVML control's own messages name the GPU already), with the GPU's index."""
    text = str(exc)
    return index, (text if text.startswith(f"GPU {index}:") else f"GPU {index}: {text}")


def _indices(errors: GpuErrors) -> list[int]:
    """The GPUs ``errors`` name, each once, in order."""
    return list(dict.fromkeys(i for i, _ in errors))


def _listed(gpus: Iterable[int]) -> str:
    """``0,2,3``: GPU indices as events carry them."""
    return ",".join(map(str, gpus))


class GuardWorker:
    """The one thread that talks to the GPUs for the guard.

    Args:
        shared: the guard's state, read and changed under its lock.
        store: where what was changed is kept.
    """

    def __init__(self, shared: GuardShared, store: GuardStateStore) -> None:
        self.shared = shared
        self.store = store
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rigmon-guard")
        self._pending: list[Future[None]] = []

    # -- the queue (called on the event loop) --------------------------------------------------

    def submit(self, fn: Callable[[], None]) -> None:
        """Queue ``fn`` on the worker thread; an exception it raises is logged, never raised."""
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._executor.submit(self._safely, fn))

    def submit_decisions(self, decisions: list[Decision]) -> None:
        """Queue each decision, one after the other."""
        for d in decisions:
            self.submit(functools.partial(self.carry_out, d))

    def run_now(self, decisions: list[Decision], timeout_s: float) -> None:
        """Carry ``decisions`` out after what is queued and wait for them (blocking: call from a thread).

        Raises:
            Exception: whatever carrying them out raised, or `TimeoutError`.
        """
        self._executor.submit(self._carry_out_all, decisions).result(timeout=timeout_s)

    def idle(self) -> bool:
        """Whether nothing queued is still waiting or running."""
        return all(f.done() for f in self._pending)

    def wait_idle(self, timeout_s: float) -> None:
        """Wait for the actions queued so far."""
        for future in list(self._pending):
            future.result(timeout=timeout_s)

    def shutdown(self) -> None:
        """Stop the thread, dropping what is still queued."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    @staticmethod
    def _safely(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:  # noqa: BLE001 - the worker must survive anything
            log.exception("guard: action failed")

    def _carry_out_all(self, decisions: list[Decision]) -> None:
        for d in decisions:
            self.carry_out(d)

    # -- on the worker thread ------------------------------------------------------------------

    def probe(self) -> None:
        """In enforce mode: find whether the guard may write, and work out the clock pairs now."""
        sh = self.shared
        if sh.config.mode != "enforce":
            return
        if sh.control is None:
            sh.cannot_act("no NVIDIA driver or GPU (NVML is not available)")
            return
        reason = sh.control.probe()
        with sh.lock:
            sh.probed_at, sh.probe_again = sh.clock.time(), reason is not None and sh.control.probe_transient
        if reason is None:
            with sh.lock:
                sh.acting, sh.reason = True, None
            log.info("guard: enforcing; it may cap GPU clocks when the rail sags")
            # Work out the clocks now, so engaging costs only the writes: the drop it
            # prevents comes a few seconds after the first sag.
            try:
                count = sh.control.device_count()
            except (ControlDenied, *CALL_ERRORS):
                count = 0
            for index in sh.config.gpus or range(count):
                pair_of(sh, index)
            check_fit(sh, count)
        else:
            sh.cannot_act(reason)

    def carry_out(self, d: Decision) -> None:
        """Engage, step, restore or report the rate limit, as ``d`` says, with its event."""
        sh = self.shared
        if d.kind == "limited":
            self._failed(d, f"ceiling of {sh.config.max_actions_per_hour} actions per hour reached: "
                            f"staying at step {d.step} although {d.trigger}", None, d.gpus)
            return
        if d.kind == "restore":
            self._restore(d)
            return
        if d.kind == "holding":
            self._holding(d)
            return
        assert d.step_name is not None
        # An extend takes every step in force on GPUs that (re)appeared while engaged; the others one.
        extend = d.kind in ("extend", "extend_limited")
        taking = list(enumerate(steps_of(sh.config)[:d.step], 1)) if extend else [(d.step, d.step_name)]
        changes: Changes = []
        errors: GpuErrors = []
        saved_ahead = False
        taken: set[GuardStepName] = set()
        for index in d.gpus:
            first: GuardGpuSettings | None = None
            last = first
            for number, name in taking:
                if name == "app_clocks" and pair_of(sh, index) is None:
                    # Writing its own clocks back would be no cap: said so, and not counted as
                    # capped for this step; the later steps (locked clocks, power limit) still cap it.
                    errors.append((index, f"GPU {index}: application clocks not capped: {no_pair_text(sh, index)}"))
                    continue
                # A GPU that (re)appeared runs with what it has now (a reset put the board's
                # defaults back), not with what the guard set before it went: read it first.
                change, ahead = self._take(index, number, name, errors, fresh=extend and first is None)
                saved_ahead = saved_ahead or ahead
                if change is None:
                    break
                first, last = change[0] if first is None else first, change[1]
                taken.add(name)
            if first is not None and last is not None:
                changes.append((first, last))
        sh.last_action_at = sh.clock.time()
        with sh.lock:
            nothing_written = not sh.changed
        if saved_ahead and nothing_written:
            self.store.remove()  # saved ahead of writes that were all refused
        else:
            self.store.save()
        if changes:
            # Every GPU an extend capped again is an action of its own (each has its own ceiling of events).
            self._acted(len(changes) if extend else 1)
        if changes and not d.quiet:
            self._capped(d, [name for _, name in taking if name in taken], changes, errors)
        if errors:
            self._failed(d, "; ".join(text for _, text in errors), changes, _indices(errors))
        elif not changes:
            self._failed(d, f"{d.trigger}, but there is no GPU to act on", changes, d.gpus)

    def _acted(self, count: int = 1) -> None:
        """Count ``count`` actions taken on the GPUs now (or, in dry-run, that would have been) for
        ``readings.guard.actions_last_hour``."""
        sh = self.shared
        now = sh.clock.time()
        with sh.lock:
            sh.actions_at = [t for t in sh.actions_at if now - t < HOUR_S] + [now] * count
        self.store.remember()

    def _capped(self, d: Decision, names: list[GuardStepName], changes: Changes, errors: GpuErrors) -> None:
        """Say what an engage, step or extend put in force (``guard_engaged``, ``guard_step``, ``guard_extended``).

        ``data.gpus`` are the GPUs it changed, as the message names them; ``gpus_skipped`` those of the
        decision it did not change, and ``skipped`` why (their part of ``errors``, which the
        ``guard_failed`` that follows says in full).
        """
        sh = self.shared
        changed = [b.index for b, _ in changes]
        skipped = [i for i in d.gpus if i not in changed]
        why = [text for i, text in errors if i in skipped]
        extend = d.kind in ("extend", "extend_limited")
        kind = "guard_engaged" if d.kind == "engage" else "guard_extended" if extend else "guard_step"
        verb = "capped" if sh.acting else "would cap"
        what = ", ".join(STEP_TEXT[name] for name in names)
        gpus = _listed(changed)
        if extend:
            message = (f"guard {verb} GPUs {gpus} as the others (step {d.step}, {what}): they (re)appeared while "
                       f"it is engaged because {d.trigger}: {describe([a for _, a in changes])}")
            if d.kind == "extend_limited":
                message += (f"; back onto the bus {sh.config.max_actions_per_hour} times within the hour "
                            "(max_actions_per_hour): a GPU that keeps dropping off the bus needs looking at (its "
                            "slot, riser, power leads); further returns within the hour are capped without an event")
        else:
            message = (f"guard {verb} GPUs {gpus} (step {d.step}, {what}) because {d.trigger}: "
                       f"{describe([a for _, a in changes])}")
        if not sh.acting:
            message += " [dry-run: nothing was changed]"
        sh.event(kind, "warning", message, {**self._data(d, changed, changes), "gpus_skipped": _listed(skipped),
                                            "skipped": "; ".join(why) or None})

    def _take(self, index: int, number: int, step_name: GuardStepName, errors: GpuErrors,
              fresh: bool = False) -> tuple[tuple[GuardGpuSettings, GuardGpuSettings] | None, bool]:
        """Take step ``number`` (``step_name``) on GPU ``index``: write it (record first, on disk
        before the write), or in dry-run say what it would set. ``fresh``: start from the GPU's
        settings as NVML reads them now, not from those the guard has in force on it.

        Returns:
            The GPU's settings before and after (``None``: not taken; why is added to ``errors``),
            and whether the state file was saved ahead of a write.
        """
        sh = self.shared
        before = planned = GuardGpuSettings(index=index)
        saved_ahead = False
        with sh.lock:
            written = index in sh.changed
            prior, known = sh.in_force.get(index), index in sh.original
            denied = sh.acting and step_name in sh.denied_steps
        if denied:
            errors.append((index, f"GPU {index}: step {number} not taken (refused on this node: needs root)"))
            return None, saved_ahead
        try:
            before = self._current(index, fresh)
            if fresh and prior is not None:
                # A refused write leaves what the GPU runs with now recorded, not the caps it lost.
                prior = before
            planned = plan_settings(step_name, before, pair_of(sh, index), limit_of(sh, index))
            if sh.acting:
                with sh.lock:
                    sh.original.setdefault(index, before)
                    sh.in_force[index] = planned
                    sh.changed.add(index)
                # On disk before the write: an agent killed from here on finds what to put back.
                self.store.save()
                saved_ahead = True
                try:
                    after = apply_step(self._writer(), index, step_name, planned, sh.original_persistence)
                except Exception as exc:
                    if not isinstance(exc, NvmlHung):  # a hung write may still land: keep it recorded
                        self._unrecord(index, written, known, prior)
                    raise
            elif written:
                # Settings the guard really wrote are in force here: "would cap" on top of
                # them would misstate what the GPU runs with.
                errors.append((index, f"GPU {index}: step {number} not taken (the guard cannot act)"))
                return None, saved_ahead
            else:
                after = planned
        except ControlDenied as exc:
            if sh.acting and step_name != "app_clocks":
                # Application clocks were written (the probe did): only this step is root's.
                # The guard goes on capping application clocks and restores what it capped.
                with sh.lock:
                    sh.denied_steps.add(step_name)
                errors.append(_gpu_error(index, exc))
                return None, saved_ahead
            sh.cannot_act(str(exc))
            if written:
                errors.append(_gpu_error(index, exc))
                return None, saved_ahead
            before = self._current(index)
            after = plan_settings(step_name, before, pair_of(sh, index), limit_of(sh, index))
        except CALL_ERRORS as exc:
            errors.append(_gpu_error(index, exc))
            if isinstance(exc, NvmlHung):
                # The write may still land when the driver returns: remember what to restore.
                with sh.lock:
                    sh.original.setdefault(index, before)
                    sh.in_force.setdefault(index, planned)
                    sh.changed.add(index)
            return None, saved_ahead
        with sh.lock:
            sh.original.setdefault(index, before)
            sh.in_force[index] = after
        return (before, after), saved_ahead

    def _holding(self, d: Decision) -> None:
        """Say that the caps stay in force while what the guard watches cannot be read."""
        sh = self.shared
        with sh.lock:
            # The GPUs with caps in force, not every one the guard set out to cap (a GPU with no
            # application-clock pair, or whose writes failed, has none to hold).
            capped = _listed(sorted(sh.in_force)) or "-"
        message = (f"guard {d.trigger}: the caps on GPUs {capped} (step {d.step}) stay in force "
                   f"until it reads healthy for {sh.config.restore_after_s:g} s, or an operator releases them")
        log.warning("%s", message)
        sh.event("guard_holding", "warning", message, {
            "mode": sh.config.mode, "dry_run": not sh.acting, "step": d.step, "step_name": d.step_name,
            "gpus": capped, "unread_since": d.unread_since,
        })

    def _unrecord(self, index: int, written: bool, known: bool, prior: GuardGpuSettings | None) -> None:
        """Forget a write recorded ahead that the driver refused."""
        sh = self.shared
        with sh.lock:
            if prior is None:
                sh.in_force.pop(index, None)
            else:
                sh.in_force[index] = prior
            if not written:
                sh.changed.discard(index)
            if not known:
                sh.original.pop(index, None)

    def _current(self, index: int, fresh: bool = False) -> GuardGpuSettings:
        """GPU ``index``'s settings: those the guard has in force on it (unless ``fresh``), else as
        NVML reads them, else as the latest frame showed them."""
        sh = self.shared
        with sh.lock:
            known = sh.in_force.get(index)
            frame = sh.last_frame
        if known is not None and not fresh:
            return known
        if sh.control is not None:
            try:
                now = sh.control.read(index)
            except (ControlDenied, *CALL_ERRORS):
                pass
            else:
                sh.original_persistence.setdefault(index, now.persistence)
                return from_control(now)
        if known is not None:
            return known
        return from_frame(frame, index) if frame is not None else GuardGpuSettings(index=index)

    def _writer(self) -> GuardActuator:
        """NVML, when acting (the probe found it)."""
        control = self.shared.control
        assert control is not None
        return control

    def _restore(self, d: Decision) -> None:
        sh = self.shared
        with sh.lock:
            original = dict(sh.original)
            in_force = dict(sh.in_force)
        indices = [i for i in sorted(original) if not d.retry or i in d.gpus]
        if d.retry and not indices:
            return
        with sh.lock:
            changed = set(sh.changed)
        changes: Changes = []
        errors: GpuErrors = []
        kept: list[str] = []
        wrote = False
        for index in indices:
            before, target = in_force.get(index, original[index]), original[index]
            # What the guard really wrote goes back, even when it may no longer write anything
            # else; what a dry-run only recorded (before the guard could act) is not written.
            real = index in changed
            try:
                if real:
                    after, left = put_back(self._writer(), index, target, before, sh.original_persistence)
                    kept.extend(left)
                else:
                    after = target
            except ControlDenied as exc:
                sh.cannot_act(str(exc))
                # Not tried again (permission does not come back by itself); the state file stays.
                errors.append((index, f"GPU {index}: {exc}; reset it by hand (nvidia-smi -rac; -rgc; -pl)"))
                with sh.lock:
                    sh.changed.discard(index)
                continue
            except CALL_ERRORS as exc:
                errors.append(_gpu_error(index, exc))
                continue
            wrote = wrote or real
            changes.append((before, after))
            if not real and sh.left_behind:
                continue  # a previous run's caps, still in force: readings keep saying so
            with sh.lock:
                sh.in_force.pop(index, None)
                sh.original.pop(index, None)
                sh.changed.discard(index)
        sh.last_action_at = sh.clock.time()
        if changes:
            self._acted()
        if errors:
            self.store.save()
            done = f"restored GPUs {_listed(b.index for b, _ in changes)}; " if changes else ""
            done += f"left as set elsewhere while capped: {', '.join(kept)}; " if kept else ""
            self._failed(d, f"{done}restoring: " + "; ".join(text for _, text in errors), changes, _indices(errors))
            return
        if wrote or sh.acting:
            with sh.lock:
                sh.left_behind = bool(sh.original) and sh.left_behind
                rest = bool(sh.original)
            if rest:
                self.store.save()
            else:
                self.store.remove()
        real_restore = wrote or (sh.acting and not indices)
        verb = "restored" if real_restore else "would restore"
        message = f"guard {verb} GPUs {_listed(indices) or '-'} ({d.trigger})"
        if changes:
            message += f": {describe([a for _, a in changes])}"
        if kept:
            message += f"; left as set elsewhere while capped: {', '.join(kept)}"
        sh.event("guard_restored", "info", message, self._data(d, indices, changes, dry_run=not real_restore))

    def _failed(self, d: Decision, why: str, changes: Changes | None, gpus: Iterable[int]) -> None:
        """Say that an action failed (``guard_failed``); ``gpus``: those the failure concerns."""
        sh = self.shared
        with sh.lock:
            sh.failures_total += 1
        log.warning("guard: %s", why)
        sh.event("guard_failed", "warning", f"guard: {why}", self._data(d, gpus, changes or []))

    def _data(self, d: Decision, gpus: Iterable[int], changes: Changes,
              dry_run: bool | None = None) -> dict[str, EventValue]:
        """An action's event data; ``gpus``: the GPUs its message names (those changed, those that failed)."""
        return {
            "mode": self.shared.config.mode,
            "dry_run": not self.shared.acting if dry_run is None else dry_run,
            "trigger": d.trigger,
            "step": d.step,
            "step_name": d.step_name,
            "gpus": _listed(gpus),
            "before": describe([b for b, _ in changes]),
            "after": describe([a for _, a in changes]),
        }
