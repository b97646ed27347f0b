"""``rigmon snapshot --journal`` says how the journal's last run ended: a crash or a clean stop."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalStore
from rigmon.schema import Event
from rigmon.snapshot.bundle import read_bundle
from rigmon.snapshot.command import write_snapshot
from rigmon.snapshot.journal_part import read_journal
from rigmon.snapshot.report import render_report
from rigmon.snapshot.run_end import final_summary
from tests.agent.journal_frames import T0, FakeClock, frame


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def _journal(state: Path, *, clean: bool) -> None:
    store = JournalStore(state, FakeClock())
    store.begin_run("run1", "n1", T0)
    store.write([frame(i + 1, T0 + i, 40.0 + i) for i in range(30)])
    if clean:
        store.end_run("run1", T0 + 30.5)
    store.close()


def test_a_run_killed_is_said_to_have_not_stopped_cleanly_with_its_last_frame(tmp_path: Path) -> None:
    # kill -9 or a power cut: no stop recorded and no later run to write `unclean_shutdown`.
    state = tmp_path / "state"
    _journal(state, clean=False)
    part = read_journal(state, 3600)
    assert part.run_end is not None
    assert "did not stop cleanly" in part.run_end
    assert f"last frame: {_stamp(T0 + 29)}" in part.run_end
    report = render_report([part], 3600, T0 + 60)
    assert "did not stop cleanly" in report.split("## n1", 1)[1]
    out = write_snapshot([part], 3600, tmp_path / "snap.tar.gz")
    (entry,) = read_bundle(out).manifest["nodes"]
    assert entry["run_end"] == part.run_end


def test_a_run_stopped_cleanly_is_said_so(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _journal(state, clean=True)
    part = read_journal(state, 3600)
    assert part.run_end is not None
    assert f"stopped cleanly at {_stamp(T0 + 30.5)}" in part.run_end
    assert "did not stop cleanly" not in render_report([part], 3600, T0 + 60)


def test_the_final_seconds_name_the_rail_minimum_and_the_highest_power() -> None:
    final = {"psu_rail.volts.min_volts": (11.2551, 12.01), "hwmon_volts[vcore].volts": (0.9, 1.1),
             "gpus[0].power_w": (100.0, 310.0), "gpus[0].power_limit_w": (300.0, 300.0)}
    assert final_summary(final) == "psu_rail.volts.min_volts min 11.255 V, gpus[0].power_w max 310 W"
    assert final_summary({"host.cpu_pct": (1.0, 2.0)}) is None
    # A one-channel ADC: its channel's minimum is the rail's, named once (it was named twice); a second channel
    # lower than the rail's envelope (another terminal) still is.
    one = {**final, "psu_rail.channels_volts.v.min_volts": (11.2551, 12.01)}
    assert final_summary(one) == "psu_rail.volts.min_volts min 11.255 V, gpus[0].power_w max 310 W"
    two = {**one, "psu_rail.channels_volts.b.min_volts": (11.1, 12.0)}
    assert "psu_rail.channels_volts.b.min_volts min 11.100 V" in (final_summary(two) or "")



def test_the_events_of_a_clean_stop_are_in_the_window_and_its_frames_stay(tmp_path: Path) -> None:
    """The clean stop's record carries the events of the stop, after the last frame: the window runs on to
    the stop, and still holds the frames before it when the stop came long after them (a journal failing)."""
    state = tmp_path / "state"
    store = JournalStore(state, FakeClock())
    store.begin_run("run1", "n1", T0)
    store.write([frame(i + 1, T0 + i, 40.0 + i) for i in range(30)])
    failed = Event(id="run1-journal-1", at=T0 + 7200, kind="journal_failed", severity="warning", subject="journal",
                   message="journal: disk I/O error")
    store.end_run("run1", T0 + 7200.5, [("run1", failed)])
    store.close()
    part = read_journal(state, 3600)
    assert (part.from_at, part.to_at) == (T0 + 29 - 3600, T0 + 7200.5)
    assert part.events == (failed,) and part.frame_count == 30
    assert part.latest is not None and part.latest.seq == 30


def test_a_run_whose_agent_holds_the_directory_is_said_to_be_still_running(tmp_path: Path) -> None:
    # `rigmon snapshot --journal` beside a running agent: its run has no stop yet because it has not ended.
    # Before, the bundle said it did not stop cleanly, and the replay "recording ended ..., agent did not
    # stop cleanly" of a healthy agent.
    from rigmon.agent.state_lock import StateLock

    state = tmp_path / "state"
    _journal(state, clean=False)
    lock = StateLock(state)  # what a running agent holds (a flock, listed in /proc/locks)
    try:
        part = read_journal(state, 3600)
    finally:
        lock.release()
    assert part.run_end is not None and "was still running when the journal was read" in part.run_end
    assert "did not stop cleanly" not in part.run_end and f"last frame: {_stamp(T0 + 29)}" in part.run_end
    assert part.run_clean is None  # the replay says nothing of how it ended
    out = write_snapshot([part], 3600, tmp_path / "snap.tar.gz")
    (entry,) = read_bundle(out).manifest["nodes"]
    assert entry["run_clean"] is None
    # Its agent gone (the lock released: killed, or the disk read on another machine), it did not stop cleanly.
    after = read_journal(state, 3600)
    assert after.run_end is not None and "did not stop cleanly" in after.run_end and after.run_clean is False


def test_a_lock_is_found_in_proc_locks_by_device_and_inode() -> None:
    from rigmon.agent.state_lock import flock_held

    locks = ("1: FLOCK  ADVISORY  WRITE 18713 fe:00:2146658 0 EOF\n"
             "2: POSIX  ADVISORY  WRITE 99 08:01:555 0 EOF\n"
             "3: FLOCK  ADVISORY  WRITE 18714 08:01:2146658 0 EOF\n")
    dev = os.makedev(0xfe, 0)
    assert flock_held(locks, dev, 2146658)
    assert not flock_held(locks, dev, 555)  # another device's inode, and a POSIX lock
    assert not flock_held(locks, os.makedev(8, 1), 555)
    assert flock_held(locks, os.makedev(8, 1), 2146658)
    assert not flock_held("", dev, 2146658)


def test_the_command_says_first_that_the_journals_last_run_did_not_stop_cleanly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Incident 3: the node reset; the journal is read for its last seconds, which the command's output names.
    from rigmon.cli import main

    state = tmp_path / "state"
    _journal(state, clean=False)
    assert main(["snapshot", "--journal", str(state), "-o", str(tmp_path / "b.tar.gz")]) == 0
    first, *_, last = capsys.readouterr().out.splitlines()
    assert first.startswith("Not stopped cleanly: n1: The agent's last run (run1, started ") and \
        f"last frame: {_stamp(T0 + 29)}" in first, first
    assert last.startswith(f"{tmp_path / 'b.tar.gz'}: 1 node, 30 frames")
    _journal(tmp_path / "clean", clean=True)
    assert main(["snapshot", "--journal", str(tmp_path / "clean"), "-o", str(tmp_path / "c.tar.gz")]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(f"{tmp_path / 'c.tar.gz'}: ")


def test_a_crash_says_when_in_its_final_seconds_the_rail_was_lowest(tmp_path: Path) -> None:
    # Incident 3: one PSU trips, the node resets; the sag 0.8 s before the last frame is the evidence.
    from msgspec.structs import replace

    from tests.agent.guard_helpers import frame as rail_frame

    state = tmp_path / "state"
    store = JournalStore(state, FakeClock())
    store.begin_run("r", "n", T0)
    times = [T0 + i * 0.4 for i in range(20)]
    store.write([replace(rail_frame(at, 11.255 if i == 17 else 11.9), seq=i + 1) for i, at in enumerate(times)])
    store.close()
    part = read_journal(state, 3600)
    assert part.run_end is not None and part.run_end.endswith(
        "the rail's lowest, 11.255 V, 0.8 s before the last frame."), part.run_end
