"""REPORT.md charts a window of few frames from every frame, not from the tier the agent answered in."""

from __future__ import annotations

import time
from pathlib import Path

from rigmon.agent.journal import JournalStore
from rigmon.snapshot.journal_part import read_journal
from rigmon.snapshot.report import render_report
from tests.agent.test_journal import T0, FakeClock, frame


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def test_a_window_of_few_frames_is_charted_from_every_frame_not_from_the_tiers_buckets(tmp_path: Path) -> None:
    # A node that crashed two minutes after its boot: the hour's window makes the journal answer in
    # 60 s buckets (three points joined by lines); its 120 frames chart each second.
    state = tmp_path / "state"
    store = JournalStore(state, FakeClock())
    store.begin_run("run1", "n1", T0)
    store.write([frame(i + 1, T0 + i, 40.0) if i != 75 else frame(i + 1, T0 + i, 4000.0) for i in range(120)])
    store.close()
    part = read_journal(state, 3600)
    assert part.history is not None and part.history.tier == "60s"
    report = render_report([part], 3600, T0 + 200)
    assert "Series from the `frames` tier (1 s per point)." in report
    # The spike at its second, not at the start of its minute's bucket.
    assert f"net[eth0].rx_bytes_per_s: highest mean 40000 B/s at {_stamp(T0 + 75)}" in report
