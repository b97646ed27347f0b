"""The guard's state file, ``<state_dir>/guard-state.json``: the GPU settings it changed and their originals.

Written before the first change and removed once the originals are back, so an agent that was
killed finds what it left behind on its next start (`rigmon.agent.guard.state_store`), and one whose
guard is now off can at least say so (`report_left_behind_when_disabled`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import msgspec

from rigmon.schema import EventValue, GuardGpuSettings, Severity
from rigmon.typed import TypedDataError, from_data, to_data

log = logging.getLogger(__name__)

STATE_FILE = "guard-state.json"
#: What reading a state file that is missing, unreadable or not one of ours raises.
STATE_FILE_ERRORS = (OSError, ValueError, KeyError, TypeError, TypedDataError)

EmitFn = Callable[[str, Severity, str, str, dict[str, EventValue] | None], object]


def state_file_path(state_dir: str | os.PathLike[str]) -> Path:
    """Where the guard keeps the settings it changed (and the originals to restore)."""
    return Path(state_dir) / STATE_FILE


# A frozen msgspec Struct, not a dataclass (cheaper to define at the agent's start); gc=False:
# frozen, holding only plain values and frozen records, it cannot be part of a reference cycle.
class SavedSettings(msgspec.Struct, frozen=True, gc=False):
    """What the state file holds.

    ``trigger``, ``engaged_at``, ``node`` and ``saved_at`` are read as the file has them,
    unchecked: they only go into messages and the restored state's ``engaged_at``. ``held``: an
    operator held the guard (no automatic restore until released), which the next run keeps.
    """

    step: int
    gpus: tuple[int, ...]
    original: tuple[GuardGpuSettings, ...]
    in_force: tuple[GuardGpuSettings, ...]
    original_persistence: dict[int, bool | None]
    trigger: str | None = None
    engaged_at: float | None = None
    node: str = ""
    saved_at: float | None = None
    held: bool = False


def write_state(path: Path, saved: SavedSettings) -> None:
    """Replace the state file at ``path`` with ``saved`` (written aside, then renamed over it).

    Raises:
        OSError: the file or its directory cannot be written.
    """
    data = {
        "node": saved.node, "saved_at": saved.saved_at, "step": saved.step, "trigger": saved.trigger,
        "engaged_at": saved.engaged_at, "gpus": list(saved.gpus),
        "original": [to_data(o) for o in saved.original],
        "in_force": [to_data(o) for o in saved.in_force],
        "original_persistence": {str(k): v for k, v in saved.original_persistence.items()},
        "held": saved.held,
    }
    tmp = path.with_suffix(".tmp")
    path.parent.mkdir(exist_ok=True)  # the state directory, never those above it (as the journal's)
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def read_state(path: Path) -> SavedSettings:
    """The state file at ``path``.

    Raises:
        OSError, ValueError, KeyError, TypeError, TypedDataError (`STATE_FILE_ERRORS`): it cannot be
            read or is not a guard state file.
    """
    data = json.loads(path.read_text())
    original = tuple(from_data(GuardGpuSettings, o) for o in data["original"])
    in_force = tuple(from_data(GuardGpuSettings, o) for o in data["in_force"])
    step = int(data["step"])
    gpus = tuple(int(i) for i in data["gpus"])
    persistence = {int(k): v for k, v in dict(data.get("original_persistence", {})).items()}
    return SavedSettings(step=step, gpus=gpus, original=original, in_force=in_force,
                         original_persistence=persistence, trigger=data.get("trigger"),
                         engaged_at=data.get("engaged_at"), node=data.get("node", ""), saved_at=data.get("saved_at"),
                         held=data.get("held") is True)


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



def state_file_note(state_dir: str) -> str | None:
    """What ``rigmon check`` says of the guard's state file: the GPU settings the guard has in force
    (an agent engaged now, or one killed while engaged), or that the file cannot be read; ``None``
    without one."""
    if not state_dir:
        return None
    path = state_file_path(state_dir)
    if not path.exists():
        return None
    # Here, not at the top: the agent imports this module without the guard (and pynvml).
    from rigmon.agent.guard.actuation import describe

    try:
        saved = read_state(path)
    except STATE_FILE_ERRORS as exc:
        return (f"{path} cannot be read ({exc}): GPU settings an agent's guard changed are unknown; check the "
                "GPUs (nvidia-smi -q -d CLOCK,POWER)")
    when = ("held by an operator: they stay until released (POST /v1/guard release)" if saved.held else
            "the agent restores them once the rail is healthy")
    return (f"caps in force on GPUs {','.join(map(str, saved.gpus))} ({path}): {describe(saved.in_force)}, "
            f"originals {describe(saved.original)}; {when} "
            "(or reset them by hand: nvidia-smi -rac; -rgc; -pl with the default limit)")
