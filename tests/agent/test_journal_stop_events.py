"""The events of an agent's stop reach its journal: events travel in frames, and no frame follows a stop,
so what the journal itself ran into at the stop (removed, replaced, failing) and the agent's last events
went nowhere. The clean stop's record carries them now, and `rigmon snapshot --journal` shows them."""

from __future__ import annotations

from pathlib import Path

from rigmon.agent.journal import JournalReader, JournalWriter, journal_path
from rigmon.config import JournalSection
from rigmon.schema import Event
from rigmon.snapshot.journal_part import read_journal
from rigmon.snapshot.report import render_report
from tests.agent.test_alarm_state import make_agent, settle
from tests.agent.test_alarms import wait_for
from tests.agent.journal_frames import T0, FakeClock
from tests.agent.test_journal_close import until, written


def remove_journal(state: Path) -> None:
    """An operator's ``rm``: the journal file with its WAL and shared memory."""
    for journal_file in state.glob(journal_path(state).name + "*"):
        journal_file.unlink()


def test_the_writers_own_events_at_the_stop_go_into_the_journal(tmp_path: Path) -> None:
    """A journal removed just before the stop: ``journal_failed`` and ``journal_recovered`` went to the
    sink only (the sampler, which has stopped); the new journal holds them with the clean stop."""
    sent: list[str] = []
    writer = JournalWriter(tmp_path / "state", FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start(lambda kind, _sev, _subject, _message, _data: sent.append(kind))
    written(writer, 1, 2)
    remove_journal(writer.path.parent)
    assert writer.close(timeout_s=10.0)
    assert sent == []  # kept for the clean stop's record, not handed to a sampler that has stopped
    with JournalReader(writer.path) as reader:
        kinds = [e.kind for e in reader.events(T0, T0 + 100)]
        assert [(run.run_id, run.clean) for run in reader.runs()] == [("run1", True)]
    assert kinds == ["journal_begun", "journal_failed", "journal_recovered"]


def test_the_agents_last_events_handed_to_close_go_into_the_journal(tmp_path: Path) -> None:
    last = Event(id="run1-9", at=T0 + 3, kind="mark", severity="info", subject="node:n1", message="job killed")
    writer = JournalWriter(tmp_path / "state", FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start()
    written(writer, 1, 2)
    assert writer.close(timeout_s=10.0, events=[last])
    with JournalReader(writer.path) as reader:
        assert reader.events(T0, T0 + 100) == [last]


def test_a_writer_started_again_hands_its_events_to_the_sink_again(tmp_path: Path) -> None:
    sent: list[str] = []
    writer = JournalWriter(tmp_path / "state", FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start()
    written(writer, 1, 1)
    assert writer.close(timeout_s=10.0)
    writer.start(lambda kind, _sev, _subject, _message, _data: sent.append(kind))
    written(writer, 2, 2)
    remove_journal(writer.path.parent)
    written(writer, 3, 3)
    until(lambda: sent == ["journal_failed", "journal_recovered"], "the events of a running writer sent")
    assert writer.close(timeout_s=10.0)


async def test_an_agents_stop_events_are_in_its_journal_and_a_snapshot_of_it(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    agent, probe = make_agent(tmp_path, clock)
    agent.start()
    await wait_for(lambda: probe.push is not None)
    await settle(agent, clock, 1.0, probe, probe=50.0)
    journal = agent.journal
    assert journal is not None
    await wait_for(lambda: journal.frames_written >= 1)
    remove_journal(tmp_path)
    clock.t = T0 + 2.0
    agent.mark("job killed")  # after the agent's last frame: no frame carries it
    await agent.stop()
    with JournalReader(tmp_path) as reader:
        kinds = {e.kind for e in reader.events(T0, T0 + 100)}
    assert {"journal_begun", "mark", "journal_failed", "journal_recovered"} <= kinds
    part = read_journal(tmp_path, 3600)
    assert part.error is None
    assert {"journal_begun", "mark", "journal_failed", "journal_recovered"} <= {e.kind for e in part.events}
    report = render_report([part], 3600, T0 + 60)
    assert "journal begun afresh at" in report and "the journal file was removed while the agent ran" in report
