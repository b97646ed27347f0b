"""The guard's changes kept on disk: save them, remove them once restored, take up what a previous run left.

`GuardStateStore` writes `rigmon.agent.guard.shared.GuardShared`'s originals and settings in force
to ``<state_dir>/guard-state.json`` (format: `rigmon.agent.guard.state_file`) before and after
every change, removes the file once the originals are back, and on start loads a file a killed
run left behind into the shared state, so the worker restores those settings in time. It also keeps
what a restart must not forget when nothing is in force, an operator's release and the hour's actions,
in ``<state_dir>/guard-memory.json`` (`rigmon.agent.guard.memory_file`), and takes them up on start.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

from rigmon.agent.guard.actuation import describe
from rigmon.agent.guard.memory_file import MEMORY_FILE, GuardMemory, read_memory, write_memory
from rigmon.agent.guard.policy import GuardState
from rigmon.agent.guard.shared import GuardShared
from rigmon.agent.guard.state_file import STATE_FILE_ERRORS, SavedSettings, read_state, write_state

log = logging.getLogger(__name__)


class GuardStateStore:
    """The state file of one agent's guard (no-ops when ``shared.path`` is ``None``).

    Args:
        shared: the guard's state, read and changed under its lock.
    """

    def __init__(self, shared: GuardShared) -> None:
        self.shared = shared
        #: ``guard-memory.json`` beside the state file (``None``: nowhere).
        self.memory_path = shared.path.with_name(MEMORY_FILE) if shared.path is not None else None
        #: What the memory file holds now (`remember` writes only a change); serialises its writers
        #: (the event loop's frames and commands, the worker's actions).
        self._remembered = GuardMemory()
        self._memory_lock = threading.Lock()

    def remember(self) -> None:
        """Write the release and the hour's actions when they changed (from any thread).

        A file that cannot be written is logged; the guard goes on without it.
        """
        sh = self.shared
        if self.memory_path is None:
            return
        # Taken under the memory lock (never while holding ``sh.lock``), so that of two threads the one
        # that writes last writes the newer state.
        with self._memory_lock:
            with sh.lock:
                s = sh.state
                memory = GuardMemory(released_until=s.released_until, actions=s.actions, extends=s.extends,
                                     acted=tuple(sh.actions_at))
            if memory == self._remembered:
                return
            try:
                write_memory(self.memory_path, memory)
            except OSError as exc:
                log.warning("guard: cannot write %s: %s", self.memory_path, exc)
            self._remembered = memory

    def load_memory(self) -> None:
        """Take up a previous run's release (still in its time) and actions within the hour."""
        sh = self.shared
        if self.memory_path is None:
            return
        memory = read_memory(self.memory_path).as_of(sh.clock.time(), sh.config.restore_after_s)
        with sh.lock:
            sh.state = replace(sh.state, released_until=memory.released_until, actions=memory.actions,
                               extends=memory.extends)
            sh.actions_at = list(memory.acted)
        if memory.released_until is not None:
            log.info("guard: released by an operator before the restart: it does not engage again before %s",
                     memory.released_until)
        self.remember()  # what is no longer to remember goes

    def save(self) -> None:
        """Write the originals and the settings in force (only once something was really changed).

        A file that cannot be written is logged; the guard goes on without it.
        """
        sh = self.shared
        if sh.path is None:
            return
        with sh.lock:
            if not (sh.acting or sh.changed) or not sh.original:
                return
            s = sh.state
            saved = SavedSettings(
                node=sh.node, saved_at=sh.clock.time(), step=s.step, trigger=s.trigger, engaged_at=s.engaged_at,
                gpus=tuple(s.gpus), original=tuple(sh.original[i] for i in sorted(sh.original)),
                in_force=tuple(sh.in_force[i] for i in sorted(sh.in_force)),
                original_persistence=dict(sh.original_persistence), held=s.held,
            )
        try:
            write_state(sh.path, saved)
        except OSError as exc:
            log.warning("guard: cannot write %s: %s", sh.path, exc)

    def remove(self) -> None:
        """Remove the file (the originals are back)."""
        path = self.shared.path
        if path is not None:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("guard: cannot remove %s: %s", path, exc)

    def load_left_behind(self) -> None:
        """Take up the settings a previous run left in place (engaged, marked ``left_behind``), with an event."""
        sh = self.shared
        if sh.path is None or not sh.path.exists():
            return
        try:
            saved = read_state(sh.path)
        except STATE_FILE_ERRORS as exc:
            # Kept aside, not overwritten by this run's first save: it may be the only record of
            # the GPUs' own settings (a newer rigmon's format, a file edited by hand).
            aside = sh.path.with_name(sh.path.name + ".unreadable")
            try:
                sh.path.replace(aside)
                kept = f"kept as {aside}"
            except OSError as move_exc:
                kept = f"and cannot be moved aside: {move_exc}"
            message = (f"guard: unreadable {sh.path.name} ({exc}), {kept}: settings a previous agent run changed "
                       "are unknown and are not restored; check the GPUs (nvidia-smi -q -d CLOCK,POWER) and "
                       "reset them by hand if needed (nvidia-smi -rac; -rgc; -pl with the default limit)")
            log.warning("%s", message)
            sh.event("guard_failed", "warning", message, {"left_behind": True, "state_file": str(aside)})
            return
        original, in_force, step, gpus = saved.original, saved.in_force, saved.step, saved.gpus
        now = sh.clock.time()
        with sh.lock:
            sh.original = {o.index: o for o in original}
            sh.in_force = {o.index: o for o in in_force}
            sh.original_persistence = dict(saved.original_persistence)
            sh.left_behind = True
            if sh.config.mode == "enforce":
                sh.changed = {o.index for o in in_force}
            # An operator's hold outlives the run that took it: no automatic restore until released.
            sh.state = GuardState(step=max(1, step), trigger=f"left behind by a previous run: {saved.trigger}",
                                  engaged_at=saved.engaged_at, last_step_at=now, last_trigger_at=now,
                                  gpus=gpus, held=saved.held)
        message = (f"guard found settings a previous agent run left in place on GPUs "
                   f"{','.join(map(str, gpus))}: {describe(in_force)} (originals {describe(original)}); "
                   + ("held by the operator: they stay until released (POST /v1/guard {\"action\": \"release\"})"
                      if saved.held and sh.config.mode == "enforce" else
                      f"they are restored after the rail is healthy for {sh.config.restore_after_s:g} s"
                      if sh.config.mode == "enforce" else
                      f"the guard is in dry-run and does not restore them: set mode = \"enforce\", or reset "
                      f"them by hand (nvidia-smi -rac; -rgc; -pl with the default limit) and remove {sh.path}"))
        log.warning("guard: %s", message)
        sh.event("guard_engaged", "warning", message, {
            "left_behind": True, "step": step, "gpus": ",".join(map(str, gpus)),
            "before": describe(original), "after": describe(in_force), "mode": sh.config.mode,
            "trigger": str(saved.trigger), "held": saved.held,
        })
