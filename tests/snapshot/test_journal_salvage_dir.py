"""A damaged journal is read from a salvaged copy in a temporary directory; what lies beside it in its state
directory (journals the agent set aside) is still looked for in that directory, not the copy's."""

from __future__ import annotations

from pathlib import Path

from rigmon.agent.journal.damage import set_aside
from rigmon.snapshot.journal_part import read_journal
from tests.agent.journal_frames import T0
from tests.snapshot.test_journal_snapshot import cut, recorded


def test_a_salvaged_journal_still_names_the_journals_set_aside_beside_it(tmp_path: Path) -> None:
    recorded(tmp_path / "journal.sqlite3", 200)
    kept = set_aside(tmp_path / "journal.sqlite3", T0)
    recorded(tmp_path / "journal.sqlite3", 400)
    cut(tmp_path / "journal.sqlite3")
    part = read_journal(tmp_path, 3600)
    assert part.error is not None and "this bundle holds what could still be read" in part.error
    # Before, the salvaged copy's temporary directory was searched, and the file went unnamed.
    assert any(kept.name in e and "set aside" in e for e in part.capture_errors), part.capture_errors
