"""REPORT.md's series: a window of few frames charted from every frame; a node not pulled has none to chart."""

from __future__ import annotations

import time
from pathlib import Path

from rigmon.agent.journal import JournalStore
from rigmon.snapshot.bundle import NodePart
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


def test_a_node_not_pulled_is_not_said_to_be_quiet_nor_to_lack_a_journal() -> None:
    # An agent that refused the connection: nothing of it came, its events no more than its series.
    refused = "connection refused: no agent is listening at http://10.0.0.11:9871; nothing of it is in the bundle"
    report = render_report([NodePart(node="http://10.0.0.11:9871", source="http://10.0.0.11:9871",
                                     error=refused)], 3600, T0)
    section = report.split("## http://10.0.0.11:9871", 1)[1]
    assert "No events in the window." not in section
    assert "journal" not in section
    assert "No series and no events: the node's history is not in the bundle (see its error in the table above)." \
        in section
