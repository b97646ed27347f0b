"""The alarms a node's agent had firing when it last saved its alarm state, for a bundle read from its journal.

A bundle pulled from a running agent lists the alarms active at the pull (``/v1/alarms``). One read
from a journal after a crash has no agent to ask, and the window's events hold only the alarms that
fired or ended within it: an incident older than the window still firing at the crash (a connection
corroding over days, a link trained slow since boot) would read as a quiet node. The agent saves its
alarms in ``<state_dir>/alarm-state.json`` soon after any of them fires, resolves or is acknowledged,
and at a clean stop, so that file says which were firing, as of its save.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rigmon.agent.alarm_state import StateFileError, read_state_file, state_file_path
from rigmon.agent.journal.layout import JOURNAL_FILE
from rigmon.schema import Alarm
from rigmon.snapshot.bundle import NodePart


@dataclass(frozen=True, slots=True)
class SavedAlarms:
    """The alarms firing in a saved alarm state.

    Attributes:
        alarms: the alarms firing (with their acknowledgements) when the state was saved.
        saved_at: when it was saved, Unix seconds on the node's clock.
    """

    alarms: tuple[Alarm, ...]
    saved_at: float


def saved_alarms(state_dir: Path, node: str) -> SavedAlarms | str | None:
    """The alarms firing in ``state_dir``'s alarm state file when ``node``'s agent last saved it.

    Returns:
        The saved alarms; ``None`` when there is no such file (alarm state not kept, or a journal
        file given alone); or why the file cannot be used (unreadable, damaged, another node's).
    """
    path = state_file_path(state_dir)
    try:
        state = read_state_file(path)
    except StateFileError as exc:
        return f"{path}: {exc}"
    if state is None:
        return None
    if state.node != node:
        return f"{path} is node {state.node}'s, not {node}'s"
    return SavedAlarms(tuple(carried.alarm for carried in state.engine.alarms), state.saved_at)


def add_saved_alarms(part: NodePart, journal_file: Path) -> None:
    """Give ``part`` (read from ``journal_file``) the alarms saved beside it in its state directory
    (`NodePart.alarms`, ``alarms_saved_at``), or say in its capture errors why they cannot be read.
    A journal file given by another name (one the agent set aside) has no alarm state of its own."""
    if journal_file.name != JOURNAL_FILE:
        return
    saved = saved_alarms(journal_file.parent, part.node)
    if isinstance(saved, SavedAlarms):
        part.alarms, part.alarms_saved_at = saved.alarms, saved.saved_at
    elif saved is not None:
        part.capture_errors.append(f"no saved alarms: {saved}")
