"""The guard's memory across agent restarts, ``<state_dir>/guard-memory.json``: an operator's release and
the actions of the last hour.

`rigmon.agent.guard.state_file` keeps the GPU settings in force, and only while there are any; this
file keeps what a restart must not forget though nothing is in force: a release (the guard does not
engage again before ``released_until``, so a restart does not re-engage a guard the operator released)
and the times of the actions within the hour (so a restart does not reset ``max_actions_per_hour``,
nor the ``actions_last_hour`` the readings show). Without anything to remember the file is removed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec

from rigmon.schema import SchemaError, decode

log = logging.getLogger(__name__)

MEMORY_FILE = "guard-memory.json"
#: Seconds over which actions count (`rigmon.agent.guard.policy.HOUR_S`; not imported: this module
#: is read before the guard's policy is).
HOUR_S = 3600.0


# Frozen, holding only plain values: gc=False (as `rigmon.agent.guard.state_file.SavedSettings`).
class GuardMemory(msgspec.Struct, frozen=True, gc=False):
    """What the file holds.

    ``released_until``: an operator released the guard, which does not engage before then (Unix
    seconds). ``actions``: times of the engages and steps (``max_actions_per_hour`` counts them),
    ``extends``: ``(GPU, time)`` of each GPU capped again on its return (its own ceiling of events),
    ``acted``: times of every action (``readings.guard.actions_last_hour``), each within the hour.
    """

    released_until: float | None = None
    actions: tuple[float, ...] = ()
    extends: tuple[tuple[int, float], ...] = ()
    acted: tuple[float, ...] = ()

    def empty(self) -> bool:
        """Nothing to remember."""
        return self.released_until is None and not self.actions and not self.extends and not self.acted

    def as_of(self, now: float, release_s: float) -> GuardMemory:
        """What is still to remember at ``now``: actions within the hour, and a release not over (at most
        ``release_s`` from now: a clock set back does not stretch the operator's release)."""
        until = self.released_until
        return GuardMemory(
            released_until=min(until, now + release_s) if until is not None and until > now else None,
            actions=tuple(t for t in self.actions if 0 <= now - t < HOUR_S),
            extends=tuple((i, t) for i, t in self.extends if 0 <= now - t < HOUR_S),
            acted=tuple(t for t in self.acted if 0 <= now - t < HOUR_S),
        )


def memory_file_path(state_dir: str | os.PathLike[str]) -> Path:
    """Where the guard keeps its release and the hour's actions."""
    return Path(state_dir) / MEMORY_FILE


def write_memory(path: Path, memory: GuardMemory) -> None:
    """Replace the file at ``path`` with ``memory`` (written aside, then renamed over it); remove it
    when ``memory`` is `GuardMemory.empty`.

    Raises:
        OSError: the file or its directory cannot be written.
    """
    if memory.empty():
        path.unlink(missing_ok=True)
        return
    tmp = path.with_suffix(".tmp")
    path.parent.mkdir(exist_ok=True)  # the state directory, never those above it (as the journal's)
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(memory), indent=1))
    os.replace(tmp, path)


def read_memory(path: Path) -> GuardMemory:
    """The file at ``path``; an empty memory when there is none, or it cannot be read (logged: the guard
    then starts as a fresh one would, its release and count of actions forgotten)."""
    try:
        # The schema's decoder (built under its lock: `rigmon.schema.frame`), not one of its own.
        return decode(GuardMemory, path.read_bytes())
    except FileNotFoundError:
        return GuardMemory()
    except (OSError, SchemaError) as exc:
        log.warning("guard: cannot read %s (%s): an operator's release and the hour's actions are forgotten",
                    path, exc)
        return GuardMemory()
