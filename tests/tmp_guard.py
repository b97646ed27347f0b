"""The suite's own temporary directory, so it can prove every simulated rig removed its directory.

`tests/conftest.py` points ``TMPDIR`` (and `tempfile`) of the test process and of every process it
starts at a directory of the session's own; no other run or helper writes there, so a
``rigmon-sim-*`` found there at the end was left by this run: a rig whose directory was not removed
(its process killed) or made again after it was (a writer outliving the rig).
"""

from __future__ import annotations

from pathlib import Path

#: The prefix of a simulated rig's temporary directory (`rigmon.sim.rig.running_rig`).
SIM_PREFIX = "rigmon-sim-"
#: Files named per part of a directory left behind (a node's tree, ``state``): enough to tell which writer made it.
FILES_SHOWN = 4


def _files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if not p.is_dir())


def _part(entry: Path) -> str:
    """One entry of a left directory: a file's name, or a directory's with its files (or their count)."""
    if not entry.is_dir():
        return entry.name
    files = _files(entry)
    if len(files) > FILES_SHOWN:
        return f"{entry.name}/ ({len(files)} files)"
    return f"{entry.name}/ ({', '.join(files) or 'empty'})"


def sim_leftovers(tmp: Path) -> list[str]:
    """The simulated rigs' directories left in ``tmp``, each with what it holds: its nodes' trees and
    their file counts, the agents' state (journals) by name."""
    lines: list[str] = []
    for left in sorted(tmp.glob(f"{SIM_PREFIX}*")):
        try:
            parts = [_part(entry) for entry in sorted(left.iterdir())]
        except FileNotFoundError:
            if not left.exists():
                continue  # removed as it was listed: not left behind
            parts = []
        lines.append(f"{left}: {', '.join(parts) or 'empty'}")
    return lines
