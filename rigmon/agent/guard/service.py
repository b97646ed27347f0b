"""The undervolt guard in the agent: runs the policy on every frame and carries its decisions out.

`GuardService` is a frame listener placed after the alarms, so an alarm that starts firing in
a frame is seen in the same frame. Deciding is pure and quick (`rigmon.agent.guard.policy`);
acting goes to one worker thread (`rigmon.agent.guard.worker`) that talks to the GPUs through
`rigmon.hw.nvml_control`, every call behind its own watchdog, so a hung driver call never stalls
sampling. Every action is an event (``guard_engaged``, ``guard_step``, ``guard_extended`` (a GPU that
(re)appeared while engaged given the caps in force), ``guard_restored``,
``guard_failed``, ``guard_holding`` (caps kept while the rail cannot be read), and the operator's ``guard_held``, and ``guard_released_idle`` for a release with
nothing in force) with the trigger, the GPUs and the
settings before and after; in dry-run the same events say what it would have done. The current state is in every frame
(`rigmon.agent.guard.collector`, ``readings.guard``); the NVML writes themselves are in
`rigmon.agent.guard.actuation`. The service, its worker and its state store share one
`rigmon.agent.guard.shared.GuardShared`.

Reversible: the GPUs' original settings go to ``<state_dir>/guard-state.json``
(`rigmon.agent.guard.state_store`) before the first write and the file is removed once they
are restored. A stopped agent restores them; an agent that was killed finds the file on its
next start, reports the settings left behind and restores them after the rail has been
healthy for ``restore_after_s``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable
from typing import Literal

from rigmon.agent.guard.actuation import LIMIT_TOLERANCE_W, GuardActuator
from rigmon.agent.guard.elsewhere import confirm_changes
from rigmon.agent.guard.policy import (
    HOUR_S,
    Decision,
    GuardState,
    decide,
    hold,
    observe,
    release,
    restore_allowed,
    steps_of,
)
from rigmon.agent.guard.shared import GuardShared
from rigmon.agent.guard.state_file import EmitFn, state_file_path
from rigmon.agent.guard.state_store import GuardStateStore
from rigmon.agent.guard.worker import GuardWorker
from rigmon.clock import Clock
from rigmon.config import GuardSection
from rigmon.schema import Alarm, Frame, GuardReading

log = logging.getLogger(__name__)

GuardCommand = Literal["hold", "release"]
#: The alarms in force now: the agent's alarm engine's active ones and those carried over a restart.
ActiveAlarms = Callable[[], Iterable[Alarm]]
#: Seconds between attempts to put back settings a failed restore left in force (a driver call
#: that hung); each failed attempt is a ``guard_failed`` event. Also between attempts to find
#: whether the guard may act when the driver was not loaded at start or a call hung.
RESTORE_RETRY_S = 60.0


class GuardService:
    """Runs the guard for one agent.

    Args:
        config: the ``[guard]`` section.
        control: NVML writes (``None``: no NVIDIA driver; the guard can only report).
        emit: the sampler's ``emit_event``.
        clock: the agent's clock.
        state_dir: where ``guard-state.json`` and ``guard-memory.json`` live (empty: nowhere; nothing survives a
            restart).
        node: node name, for the state file.
        active_alarms: the alarms in force, asked after the alarms judged each frame: a trigger
            alarm holds the restore while it is among them (``None``: no alarm engine; none holds).
    """

    def __init__(self, config: GuardSection, control: GuardActuator | None, emit: EmitFn, clock: Clock,
                 state_dir: str = "", node: str = "", active_alarms: ActiveAlarms | None = None) -> None:
        self.config = config
        self.active_alarms = active_alarms
        self.shared = GuardShared(config, control, emit, clock, state_file_path(state_dir) if state_dir else None,
                                  node)
        self.store = GuardStateStore(self.shared)
        self.worker = GuardWorker(self.shared, self.store)

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Bind to the running loop, find settings a previous run left behind, check permission."""
        self.shared.loop = asyncio.get_running_loop()
        self.store.load_left_behind()
        # After the settings left behind (which set the state afresh): a release and the hour's actions
        # outlive a restart, so it neither re-engages a released guard nor resets the ceiling.
        self.store.load_memory()
        self.worker.submit(self.worker.probe)

    def close(self) -> bool:
        """Restore what this run changed (blocking: call from a thread), then stop the worker.

        Returns:
            Whether it tried to restore settings (its events then wait for the next frame).
        """
        sh = self.shared
        with sh.lock:
            sh.closing = True  # frames still flow while the restore runs: a sag must not re-engage
            state, changed = sh.state, tuple(sorted(sh.original))
            acting = sh.acting or bool(sh.changed)
        restoring = (state.step > 0 or bool(changed)) and acting
        if restoring:
            # A restore that failed earlier leaves the guard armed with settings still in force:
            # those are put back too.
            _, decisions = release(state, sh.clock.time(), "agent stopping")
            decisions = decisions or [Decision("restore", 0, None, "agent stopping", changed)]
            with sh.lock:
                # Armed, but what the next run takes up stays: the release and the hour's actions.
                sh.state = GuardState(released_until=state.released_until, actions=state.actions,
                                      extends=state.extends)
            try:
                # A read and up to four writes per GPU (`put_back`), each behind its own timeout.
                self.worker.run_now(decisions, timeout_s=self.config.call_timeout_s
                                    * (2 + 5 * max(len(state.gpus), len(changed))))
            except Exception:  # noqa: BLE001 - a stop must finish; the state file stays for the next run
                log.exception("guard: restoring at stop failed; the next start will find the settings")
        self.worker.shutdown()
        if sh.control is not None:
            sh.control.close()
        return restoring

    # -- the operator ---------------------------------------------------------------------

    def command(self, action: GuardCommand, by: str) -> GuardReading:
        """``hold``: keep the caps in force (no automatic restore); ``release``: restore now and
        do not engage again for ``restore_after_s``.

        Returns:
            The guard's state after the command, taken before a restore it started runs (that
            completes in the background): ``original`` lists the settings being restored, empty
            when nothing was in force.
        """
        sh = self.shared
        now = sh.clock.time()
        with sh.lock:
            if action == "hold":
                sh.state = hold(sh.state)
                decisions: list[Decision] = []
            else:
                sh.state, decisions = release(sh.state, now, f"released by {by}", self.config.restore_after_s)
                # Armed, but a restore that failed left settings in force: the release puts them back now.
                stuck = tuple(i for i in sorted(sh.original) if sh.acting or i in sh.changed)
                if not decisions and stuck:
                    decisions = [Decision("restore", 0, None, f"released by {by}", stuck, retry=True)]
        self.store.remember()  # a release outlives a restart
        if action == "hold":
            # Kept in the state file: a hold outlives a killed agent (the next run does not restore).
            self.store.save()
            # Its own kind (before: ``guard_step`` with ``command: hold``, as older journals hold it):
            # a hold takes no step, and a rule on ``guard_step`` means the guard capped further.
            sh.event("guard_held", "info", f"guard held by {by}: settings stay until released",
                     {"by": by, "command": "hold", "step": sh.state.step})
        elif not decisions:
            # Its own kind (before: ``guard_restored``, as older journals hold it): nothing was
            # restored, and a reader counting ``guard_restored`` counts restores.
            sh.event("guard_released_idle", "info", f"guard released by {by}: nothing was in force; it does not "
                     f"engage for {self.config.restore_after_s:g} s", {"by": by, "command": "release", "step": 0})
        reading = self.reading()
        self.worker.submit_decisions(decisions)
        return reading

    # -- frames -----------------------------------------------------------------------------

    def on_frame(self, frame: Frame) -> None:
        """Run the policy on a frame (on the event loop; acting goes to the worker thread)."""
        sh = self.shared
        if sh.closing:
            return
        obs = observe(frame, self.config, self.active_alarms() if self.active_alarms is not None else ())
        self._notice_changes(frame)
        with sh.lock:
            sh.last_frame = frame
            sh.state, decisions = decide(sh.state, obs, self.config)
            probe = (sh.probe_again and not sh.acting and self.worker.idle()
                     and (sh.probed_at is None or obs.at - sh.probed_at >= RESTORE_RETRY_S))
            if probe:
                sh.probe_again = False
            if (not decisions and sh.state.step == 0 and (sh.acting or sh.changed) and self.worker.idle()
                    and restore_allowed(sh.state, obs.at, self.config)):
                # A restore failed (a hung driver call, a refused write): settings are still in
                # force while the guard is armed. Try again now and then, on the GPUs still there
                # (a lost GPU gets its own settings back when it is reset or the node reboots),
                # and only while a restore would be allowed: not under a firing trigger alarm.
                stuck = tuple(i for i in sorted(sh.original) if i in obs.gpus and (sh.acting or i in sh.changed))
                if stuck and (sh.last_action_at is None or obs.at - sh.last_action_at >= RESTORE_RETRY_S):
                    decisions = [Decision("restore", 0, None, "retrying the restore of settings still in force",
                                          stuck, retry=True)]
        if decisions:
            # An engage or step counts against the ceiling after a restart too (a frame deciding nothing changes
            # neither the release nor the actions: no memory to compare on every frame).
            self.store.remember()
        if probe:
            # The driver was not there yet at start (or a call hung): ask again, before the decisions.
            self.worker.submit(self.worker.probe)
        self.worker.submit_decisions(decisions)

    def _notice_changes(self, frame: Frame) -> None:
        """Have the worker check GPUs the guard capped whose frame readings differ from what it set
        (``nvidia-smi -rac``, a job's prologue, the operator's ``-pl``): `rigmon.agent.guard.elsewhere.confirm_changes`
        asks NVML, takes up what really changed and says so once per change.

        Only GPU readings this frame's own call took, and only one that started after the guard's
        last write (an older one, or a hung collector's last, still shows the settings before
        it), and only while nothing is queued for the GPUs. A frame is only a hint: a poll filed
        late (a busy scheduler) may still show the settings before the guard's write.

        Not a GPU back from off the bus (lost, or missing from the last frame that listed GPUs):
        it was reset, which puts the board's defaults back; nobody changed it elsewhere, and the
        policy gives it the caps in force again (``extend``, one ``guard_extended``).
        """
        sh = self.shared
        status = frame.collectors.get("gpu")
        if status is None or status.state != "ok" or status.sampled_at is None:
            return
        read_from = status.sampled_at - (status.duration_s or 0.0)
        suspects: list[int] = []
        with sh.lock:
            if not sh.changed or (sh.last_action_at is not None and read_from <= sh.last_action_at):
                return
            if not self.worker.idle():
                return
            # What the policy saw before this frame: a GPU missing then and here now is back.
            listed = sh.state.known_gpus
            for g in frame.readings.gpus:
                known = sh.in_force.get(g.index)
                back = bool(listed) and g.index not in listed
                if known is None or g.index not in sh.changed or g.state == "lost" or back:
                    continue
                app = (g.clock_app_mem_mhz, g.clock_app_graphics_mhz)
                if (None not in app and app != (known.app_clock_mem_mhz, known.app_clock_graphics_mhz)) or (
                        g.power_limit_w is not None and known.power_limit_w is not None
                        and abs(g.power_limit_w - known.power_limit_w) >= LIMIT_TOLERANCE_W):
                    suspects.append(g.index)
        if suspects:
            self.worker.submit(functools.partial(confirm_changes, self.shared, self.store, tuple(suspects)))

    def reading(self) -> GuardReading:
        """The guard's state as it goes into frames."""
        sh = self.shared
        with sh.lock:
            s = sh.state
            steps = steps_of(self.config)
            now = sh.clock.time()
            return GuardReading(
                mode=self.config.mode,
                acting=sh.acting,
                state=("released" if s.released_until is not None and now < s.released_until else "armed")
                if s.step == 0 else ("held" if s.held else "engaged"),
                step=s.step,
                step_name=steps[s.step - 1] if 0 < s.step <= len(steps) else None,
                reason=sh.reason,
                trigger=s.trigger,
                engaged_at=s.engaged_at,
                last_action_at=sh.last_action_at,
                gpus=s.gpus,
                actions_last_hour=sum(1 for t in sh.actions_at if now - t < HOUR_S),
                max_actions_per_hour=self.config.max_actions_per_hour,
                settings=tuple(sh.in_force[i] for i in sorted(sh.in_force)),
                original=tuple(sh.original[i] for i in sorted(sh.original)),
                left_behind=sh.left_behind,
                failures_total=sh.failures_total,
                released_until=s.released_until if s.released_until is not None and now < s.released_until else None,
                unread=s.unread,
                unread_since=s.read_at if s.unread else None,
                off_bus=self._off_bus(),
            )

    def _off_bus(self) -> tuple[int, ...]:
        """GPUs with settings in force that the latest frame shows lost or does not list (under the lock)."""
        sh = self.shared
        frame = sh.last_frame
        gpu = frame.collectors.get("gpu") if frame is not None else None
        if frame is None or not sh.in_force or (gpu is not None and gpu.state != "ok"):
            return ()  # GPUs not read are not known to be off the bus
        present = {g.index for g in frame.readings.gpus if g.state != "lost"}
        return tuple(i for i in sorted(sh.in_force) if i not in present)

    def wait_idle(self, timeout_s: float = 10.0) -> None:
        """Wait for the actions queued so far (tests)."""
        self.worker.wait_idle(timeout_s)
