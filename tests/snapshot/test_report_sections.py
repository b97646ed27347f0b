"""REPORT.md's node sections: a window of few frames charted from every frame, a node not pulled said to be one,
a long list of events cut in its middle, saying so."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalStore
from rigmon.schema import SCHEMA_VERSION, Event, History
from rigmon.snapshot import report as report_module
from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.journal_part import read_journal
from rigmon.snapshot.report import render_report
from tests.agent.journal_frames import T0, FakeClock, frame


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def _short_run(state: Path) -> None:
    store = JournalStore(state, FakeClock())
    store.begin_run("run1", "n1", T0)
    store.write([frame(i + 1, T0 + i, 40.0) if i != 75 else frame(i + 1, T0 + i, 4000.0) for i in range(120)])
    store.close()


def test_a_window_of_few_frames_is_charted_from_every_frame_not_from_the_tiers_buckets(tmp_path: Path) -> None:
    # A node that crashed two minutes after its boot: the hour's window makes the journal answer in
    # 60 s buckets (three points joined by lines); its 120 frames chart each second.
    _short_run(tmp_path / "state")
    part = read_journal(tmp_path / "state", 3600)
    assert part.history is not None and part.history.tier == "60s"
    report = render_report([part], 3600, T0 + 200)
    assert "Series from the `frames` tier (1 s per point)." in report
    # The spike at its second, not at the start of its minute's bucket.
    assert f"net[eth0].rx_bytes_per_s: highest mean 40000 B/s at {_stamp(T0 + 75)}" in report


def test_the_frames_decoded_for_charts_are_bounded_for_the_whole_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Decoding frames is the report's main cost: past the budget a node keeps the agent's tier.
    _short_run(tmp_path / "state")
    monkeypatch.setattr(report_module, "CHART_FRAMES_BUDGET", 150)
    parts = [read_journal(tmp_path / "state", 3600) for _ in range(2)]
    report = render_report(parts, 3600, T0 + 200)
    assert [line for line in report.splitlines() if line.startswith("Series from")] == [
        "Series from the `frames` tier (1 s per point).", "Series from the `60s` tier (60 s per point)."]


def test_a_node_not_pulled_is_not_said_to_be_quiet_nor_to_lack_a_journal() -> None:
    # An agent that refused the connection: nothing of it came, its events no more than its series.
    refused = "connection refused: no agent is listening at http://10.0.0.11:9871; nothing of it is in the bundle"
    report = render_report([NodePart(node="http://10.0.0.11:9871", source="http://10.0.0.11:9871",
                                     error=refused)], 3600, T0)
    section = report.split("## http://10.0.0.11:9871", 1)[1]
    # In the nodes table too: its events are not known, not none ("0 (0/0)").
    (row,) = [line for line in report.splitlines() if line.startswith("| http://10.0.0.11:9871 |")]
    assert row.split(" | ")[6:8] == ["0", "-"], row
    assert "No events in the window." not in section
    assert "journal" not in section
    assert "No series and no events: the node's history is not in the bundle (see its error in the table above)." \
        in section


def test_a_long_list_of_events_keeps_its_first_and_latest_and_says_what_it_left_out() -> None:
    # An hour of a flapping link: the first warnings are the incident's start, the latest its end.
    events = tuple(Event(id=f"r-{n}", at=T0 + n, kind="thunderbolt_link_changed", severity="warning",
                         subject="tb:0-1", message=f"flap {n:02d}") for n in range(50))
    history = History(schema=SCHEMA_VERSION, node="n1", from_at=T0, to_at=T0 + 60, tier="frames", step_s=1.0,
                      series={}, events=events)
    report = render_report([NodePart(node="n1", source="x", history=history)], 3600, T0 + 60)
    listed = [line for line in report.splitlines() if "flap" in line]
    assert [line[-7:] for line in listed] == [f"flap {n:02d}" for n in (*range(10), *range(20, 50))]
    assert "- (10 events between these not listed: see the node's events.jsonl)" in report
    assert report.index("flap 09") < report.index("10 events between") < report.index("flap 20")


def test_a_throughputs_worst_point_is_also_said_in_decimal_units(tmp_path: Path) -> None:
    # Incident 6 compares two arrays at ~1.07 and ~1.10 GB/s: "1.11761e+09 B/s" made the reader count digits.
    _short_run(tmp_path / "state")
    report = render_report([read_journal(tmp_path / "state", 3600)], 3600, T0 + 200)
    assert f"net[eth0].rx_bytes_per_s: highest mean 40000 B/s at {_stamp(T0 + 75)} (40 kB/s)" in report
    assert report_module.readable_rate(1.11761e9) == "1.12 GB/s" and report_module.readable_rate(999.0) is None


def test_a_node_whose_clock_is_off_this_machines_is_said_to_be_under_the_nodes_table() -> None:
    # Each node's times are its own clock's: two nodes' events compared need how far apart the clocks were.
    ahead = NodePart(node="a", source="x", pulled_at=T0, agent_now_at=T0 + 12.34)
    behind = NodePart(node="b", source="y", pulled_at=T0, agent_now_at=T0 - 3.0)
    close = NodePart(node="c", source="z", pulled_at=T0, agent_now_at=T0 + 0.4)
    journal = NodePart(node="d", source="journal:/s")
    report = render_report([ahead, behind, close, journal], 60.0, T0 + 5)
    assert ("Each node's times are by its own clock:\n\n"
            "- **a**'s clock was 12.3 s ahead of this machine's when it was pulled.\n"
            "- **b**'s clock was 3.0 s behind this machine's when it was pulled.\n") in report
    assert "**c**'s clock" not in report and "**d**'s clock" not in report
    assert "by its own clock" not in render_report([close, journal], 60.0, T0 + 5)


def test_the_report_says_which_rigmon_made_it() -> None:
    from rigmon import __version__

    report = render_report([NodePart(node="a", source="x")], 60.0, T0)
    assert report.splitlines()[2] == (f"Created {_stamp(T0)} by rigmon {__version__}; window: the last 60 s before "
                                      "each node's latest frame.")
