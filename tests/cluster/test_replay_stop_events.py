"""A replay shows the events a journal recorded with the agent's clean stop, after its last frame (no frame
follows a stop to carry them), like any other event: filed at their own time, once, also after seeking back."""

from __future__ import annotations

from pathlib import Path

from rigmon.agent.journal import JournalStore
from rigmon.cluster.replay import Replay
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Event
from rigmon.snapshot.bundle import read_bundle, write_bundle
from rigmon.snapshot.journal_part import read_journal
from tests.agent.journal_frames import T0, FakeClock, frame

STARTED = Event(id="run1-1", at=T0, kind="agent_started", severity="info", subject="node:n1", message="started")
FAILED = Event(id="run1-journal-1", at=T0 + 30.2, kind="journal_failed", severity="warning", subject="journal",
               message="journal /state/journal.sqlite3: the journal file was removed while the agent ran")
MARK = Event(id="run1-31", at=T0 + 30.1, kind="mark", severity="info", subject="node:n1", message="job killed")


def replay_of(tmp_path: Path, checkpoint_frames: int | None = None) -> tuple[Replay, ClusterStore]:
    state = tmp_path / "state"
    store = JournalStore(state, FakeClock())
    store.begin_run("run1", "n1", T0)
    store.write([frame(i + 1, T0 + i, 40.0, events=(STARTED,) if i == 0 else ()) for i in range(30)])
    store.end_run("run1", T0 + 30.5, [("run1", MARK), ("run1", FAILED)])
    store.close()
    bundle = read_bundle(write_bundle(tmp_path / "snap.tar.gz", [read_journal(state, 3600.0)], 3600.0, ""))
    replay = Replay(bundle, "snap.tar.gz", checkpoint_frames)
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    return replay, cluster


def test_the_stop_events_are_shown_once_the_cursor_reaches_them(tmp_path: Path) -> None:
    replay, cluster = replay_of(tmp_path)
    (store,) = cluster.nodes.values()
    assert replay.end_at == T0 + 30.2  # the cursor goes on to the last event, past the last frame
    replay.seek(cluster, T0 + 29)
    assert [e.id for e in store.events] == ["run1-1"]
    replay.seek(cluster, replay.end_at)
    assert [e.id for e in store.events] == ["run1-1", "run1-31", "run1-journal-1"]


def test_seeking_back_and_forth_files_each_stop_event_once(tmp_path: Path) -> None:
    replay, cluster = replay_of(tmp_path, checkpoint_frames=5)  # checkpoints to go back to
    replay.seek(cluster, replay.end_at)
    replay.seek(cluster, T0 + 12)
    (store,) = cluster.nodes.values()
    assert [e.id for e in store.events] == ["run1-1"]
    replay.seek(cluster, replay.end_at)
    assert [e.id for e in store.events] == ["run1-1", "run1-31", "run1-journal-1"]
