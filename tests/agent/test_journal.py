"""The journal: frames and events round trip, tiers keep min/mean/max, retention by age and size,
unclean-shutdown detection, and failures reported instead of raised (injected clock throughout)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rigmon.agent.journal import (
    TIERS_S,
    JournalReader,
    JournalStore,
    JournalWriter,
    Retention,
    UncleanRun,
    unclean_message,
)
from rigmon.config import JournalSection
from rigmon.schema import (
    SCHEMA_VERSION,
    CollectorStatus,
    Event,
    Frame,
    HostReading,
    NetInterfaceReading,
    Readings,
    Severity,
)

T0 = 1_699_999_200.0  # a multiple of 900: buckets start on whole frames


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t - T0


def host(cpu_pct: float) -> HostReading:
    return HostReading(cpu_pct=cpu_pct, cpu_count=8, load_1=1.0, load_5=1.0, load_15=1.0, mem_total_bytes=100,
                       mem_available_bytes=50, swap_total_bytes=0, swap_free_bytes=0, uptime_s=5.0, boot_id="b")


def nic(name: str, rx: float) -> NetInterfaceReading:
    return NetInterfaceReading(name=name, operstate="up", carrier=True, speed_mbps=1000, mtu=1500,
                               rx_bytes_total=1, tx_bytes_total=1, rx_packets_total=1, tx_packets_total=1,
                               rx_errors_total=0, tx_errors_total=0, rx_dropped_total=0, tx_dropped_total=0,
                               carrier_changes_total=1, rx_bytes_per_s=rx, tx_bytes_per_s=None,
                               rx_packets_per_s=None, tx_packets_per_s=None)


def frame(seq: int, at: float, cpu: float, run_id: str = "run1", events: tuple[Event, ...] = ()) -> Frame:
    return Frame(schema=SCHEMA_VERSION, node="n1", run_id=run_id, seq=seq, taken_at=at, agent_start=T0,
                 collectors={"host": CollectorStatus(state="ok", ok=True)},
                 readings=Readings(host=host(cpu), net=(nic("eth0", cpu * 10),)), events=events)


def test_frames_and_events_round_trip(tmp_path: Path) -> None:
    store = JournalStore(tmp_path, FakeClock())
    ev = Event(id="run1-1", at=T0 + 1, kind="agent_started", severity="info", subject="node:n1", message="hi")
    frames = [frame(i + 1, T0 + i, float(i), events=(ev,) if i == 1 else ()) for i in range(700)]
    store.write(frames[:350])
    store.write(frames[350:])
    with JournalReader(tmp_path) as reader:
        assert reader.frames(T0, T0 + 699) == frames
        assert reader.frames(T0 + 10, T0 + 12) == frames[10:13]
        assert reader.events(T0, T0 + 10) == [ev]
        assert reader.time_range() == (T0, T0 + 699)
    store.close()


def test_frames_are_compressed_once_into_one_stream_per_block(tmp_path: Path) -> None:
    import gzip

    from rigmon.agent.frame_json import frame_json

    frames = [frame(i + 1, T0 + i, float(i % 97)) for i in range(700)]
    store = JournalStore(tmp_path, FakeClock(), block_frames=300)
    store.write(frames)
    assert store.conn.execute("SELECT COUNT(*) FROM dicts").fetchone()[0] == 0
    # Streams of 300 frames, each named by its first row; a full one is a finished gzip member
    # of the frames' wire JSON lines, made of the rows as they were written.
    streams = store.conn.execute("SELECT stream, COUNT(*), MIN(id) FROM frames GROUP BY stream ORDER BY stream").fetchall()
    assert [(n, stream == first) for stream, n, first in streams] == [(300, True), (300, True), (100, True)]
    body = b"".join(b for (b,) in store.conn.execute("SELECT body FROM frames WHERE stream = ? ORDER BY id",
                                                      (streams[0][0],)))
    assert gzip.decompress(body) == b"".join(frame_json(f) + b"\n" for f in frames[:300])
    raw = len(store.frames_json(T0, T0 + 1)[0])
    stored = store.conn.execute("SELECT AVG(LENGTH(body)) FROM frames").fetchone()[0]
    assert stored < raw / 4
    store.close()


def test_tiers_keep_min_mean_max_and_match_on_the_fly(tmp_path: Path) -> None:
    clock = FakeClock()
    store = JournalStore(tmp_path, clock)
    # Two hours at 1 Hz; the cpu dips to 1.0 for a single frame in minute 7.
    values = [50.0 + (i % 10) for i in range(7200)]
    values[7 * 60 + 13] = 1.0
    store.write([frame(i + 1, T0 + i, v) for i, v in enumerate(values)])
    computed = store.compute_buckets(0, T0, T0 + 3600)
    for _ in range(10):
        store.downsample()
    assert store.watermark(60) == T0 + 7140  # the bucket holding the last frame is still open
    assert store.watermark(900) == T0 + 6300
    stored = store.buckets(0, T0, T0 + 3600)
    assert [at for at, _ in stored] == [T0 + 60 * i for i in range(60)]
    dip = dict(stored)[T0 + 420]["host.cpu_pct"]
    assert dip[0] == 1.0 and dip[2] == 59.0 and dip[3] == 60
    assert abs(dip[1] / dip[3] - sum(values[420:480]) / 60) < 1e-4
    assert [(at, s["host.cpu_pct"][0], s["host.cpu_pct"][2]) for at, s in stored] == \
        [(at, s["host.cpu_pct"][0], s["host.cpu_pct"][2]) for at, s in computed]
    quarter = dict(store.buckets(1, T0, T0 + 7200))
    assert quarter[T0]["host.cpu_pct"][0] == 1.0
    assert quarter[T0]["host.cpu_pct"][3] == 900
    store.close()


def test_history_chooses_the_tier_by_span(tmp_path: Path) -> None:
    store = JournalStore(tmp_path, FakeClock())
    store.write([frame(i + 1, T0 + i, float(i % 60)) for i in range(4 * 3600)])
    store.downsample()
    with JournalReader(tmp_path) as reader:
        short = reader.history("n1", T0 + 100, T0 + 400, 1.0, {"host.cpu_pct"})
        assert short.tier == "frames" and len(short.series["host.cpu_pct"].at) == 301
        assert set(short.series) == {"host.cpu_pct"}
        hour = reader.history("n1", T0, T0 + 3 * 3600, 1.0)
        assert hour.tier == "60s" and len(hour.series["host.cpu_pct"].at) == 180
        assert hour.series["host.cpu_pct"].min[0] == 0.0 and hour.series["host.cpu_pct"].max[0] == 59.0
        assert "net[eth0].rx_bytes_per_s" in hour.series
        day = reader.history("n1", T0, T0 + 30 * 3600, 1.0)
        assert day.tier == "900s"


def test_retention_by_age_keeps_tiers_longer(tmp_path: Path) -> None:
    clock = FakeClock()
    retention = Retention(frames_keep_s=3600, tier_keep_s={60: 7200, 900: 86400})
    store = JournalStore(tmp_path, clock, retention)
    store.write([frame(i + 1, T0 + i, 1.0) for i in range(3 * 3600)])
    clock.t = T0 + 3 * 3600
    for _ in range(5):
        store.maintain()
    first, _ = store.time_range() or (0.0, 0.0)
    assert first >= T0 + 2 * 3600
    oldest_minute = store.conn.execute("SELECT MIN(start_at) FROM buckets WHERE step_s = 60").fetchone()[0]
    assert T0 + 3600 <= oldest_minute <= T0 + 3600 + 60
    oldest_quarter = store.conn.execute("SELECT MIN(start_at) FROM buckets WHERE step_s = 900").fetchone()[0]
    assert oldest_quarter == T0
    # Dictionaries of deleted frames go with them.
    oldest_dict = store.conn.execute("SELECT MIN(id) FROM dicts").fetchone()[0]
    assert oldest_dict == store.conn.execute("SELECT MIN(dict_id) FROM frames").fetchone()[0]
    store.close()


def test_retention_by_size_drops_oldest_frames_first(tmp_path: Path) -> None:
    clock = FakeClock()
    store = JournalStore(tmp_path, clock, Retention(max_bytes=400_000))
    store.write([frame(i + 1, T0 + i, float(i % 13)) for i in range(6000)])
    clock.t = T0 + 6000
    assert store.used_bytes() > 400_000
    store.maintain()
    assert store.used_bytes() <= 400_000
    first, last = store.time_range() or (0.0, 0.0)
    assert first > T0 and last == T0 + 5999
    store.close()
    # The freed pages went back to the file system.
    assert (tmp_path / "journal.sqlite3").stat().st_size < 1_000_000


def test_begin_run_reports_runs_that_never_stopped(tmp_path: Path) -> None:
    clock = FakeClock()
    store = JournalStore(tmp_path, clock)
    assert store.begin_run("run1", "n1", T0) == []
    frames = [frame(i + 1, T0 + i * 0.5, 40.0 + i) for i in range(20)]
    frames[-3] = frame(18, T0 + 8.5, 5.0)
    store.write(frames)
    store.close()  # no end_run: the process died
    store = JournalStore(tmp_path, clock)
    unclean = store.begin_run("run2", "n1", T0 + 30)
    assert len(unclean) == 1
    u = unclean[0]
    assert (u.run_id, u.last_frame_at) == ("run1", T0 + 9.5)
    assert u.final["host.cpu_pct"] == (5.0, 59.0)  # frames 9.5 - 5 s onwards
    store.end_run("run2", T0 + 40)
    store.close()
    store = JournalStore(tmp_path, clock)
    assert store.begin_run("run3", "n1", T0 + 50) == []  # reported once; run2 stopped cleanly
    runs = {r.run_id: r for r in store.runs()}
    assert runs["run1"].clean is False and runs["run2"].clean is True and runs["run3"].clean is None
    store.close()


def test_unclean_message_names_the_rail_minimum_and_power() -> None:
    run = UncleanRun("r1", "n1", T0, T0 + 99.2, {"psu[a].volts.min_volts": (11.31, 11.9), "gpus[0].power_w": (90.0, 310.5),
                                              "gpus[0].power_limit_w": (300.0, 300.0)})
    message, data = unclean_message(run, T0 + 100.0)
    assert message.startswith("node restarted unexpectedly; last frame ")
    assert "0.8 s before this start" in message
    assert "psu[a].volts.min_volts min 11.310 V" in message
    assert "gpus[0].power_w max 310.5 W" in message and "limit" not in message
    assert data["min:psu[a].volts.min_volts"] == 11.31 and data["previous_run_id"] == "r1"


@pytest.mark.parametrize(("volts", "shown"), [(11.977, "11.977 V"), (11.46, "11.460 V")])
def test_unclean_message_shows_the_rail_minimum_to_the_millivolt(volts: float, shown: str) -> None:
    # Three significant digits showed 11.977 V as "12 V" and a sag to 11.46 V as "11.5 V".
    run = UncleanRun("r1", "n1", T0, T0 + 99.0, {"psu_rail.volts.min_volts": (volts, 12.0)})
    message, _ = unclean_message(run, T0 + 100.0)
    assert f"psu_rail.volts.min_volts min {shown}" in message


def test_unclean_message_names_the_12v_rail_not_a_boards_lowest_voltages() -> None:
    # A Super I/O's CPU core (0.9 V) and limits (0 V) have lower minima than any sag of the rail.
    final = {"hwmon_volts[hwmon2/in0].volts": (0.88, 0.92), "hwmon_volts[hwmon2/in0].min_volts": (0.0, 0.0),
             "hwmon_volts[hwmon2/in4].volts": (3.29, 3.31), "psu_rail.volts.min_volts": (11.31, 11.9),
             "psu_rail.volts.max_volts": (11.9, 12.1), "pmbus_psus[hwmon20].vin_volts": (229.0, 231.0)}
    message, data = unclean_message(UncleanRun("r1", "n1", T0, T0 + 99.0, final), T0 + 100.0)
    assert "psu_rail.volts.min_volts min 11.310 V" in message
    assert "hwmon_volts" not in message and "vin_volts" not in message and "max_volts" not in message
    assert data["min:hwmon_volts[hwmon2/in0].volts"] == 0.88  # every series is still in the data


def test_writer_reports_a_full_disk_and_keeps_running(tmp_path: Path) -> None:
    clock = FakeClock()
    events: list[tuple[str, str]] = []
    failed = threading.Event()

    def sink(kind: str, severity: str, subject: str, message: str, data: object) -> None:
        events.append((kind, message))
        if kind == "journal_failed":
            failed.set()

    class FullDiskWriter(JournalWriter):
        def _open(self) -> JournalStore | None:
            store = super()._open()
            assert store is not None
            # A page cap at the current size makes SQLite answer exactly as on a full disk (SQLITE_FULL).
            pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
            store.conn.execute(f"PRAGMA max_page_count = {pages}")
            return store

    writer = FullDiskWriter(tmp_path, clock, JournalSection(commit_interval_s=0.05), "run1", "n1", T0)
    writer.start(sink)
    for i in range(200):
        writer.submit(frame(i + 1, T0 + i, float(i)))
    assert failed.wait(10)
    assert writer.status.state == "error"
    assert "full" in (writer.status.error or "")
    writer.submit(frame(201, T0 + 201, 1.0))  # still accepts frames, never raises
    writer.close()
    assert any(kind == "journal_failed" and "full" in msg for kind, msg in events)
    with JournalReader(tmp_path) as reader:
        assert reader.runs()[0].clean is True  # the stop was still recorded as clean


class EventLoopback:
    """Like the agent: events from the writer's sink travel in the next frame submitted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: list[Event] = []
        self.seen: dict[str, Event] = {}
        self.seq = 0

    def sink(self, kind: str, severity: Severity, subject: str, message: str,
             data: dict[str, str | int | float | bool | None]) -> None:
        with self.lock:
            event = Event(id=f"run1-e{len(self.seen) + 1}", at=T0 + self.seq, kind=kind, severity=severity,
                          subject=subject, message=message, data=dict(data))
            self.pending.append(event)
            self.seen.setdefault(kind, event)

    def next_frame(self) -> Frame:
        with self.lock:
            events, self.pending = tuple(self.pending), []
            self.seq += 1
            return frame(self.seq, T0 + self.seq, 1.0, events=events)


def submit_until(writer: JournalWriter, loop: EventLoopback, done: Callable[[], bool]) -> None:
    for _ in range(2000):
        if done():
            return
        writer.submit(loop.next_frame())
        time.sleep(0.005)
    raise AssertionError("condition not met")


def test_writer_records_its_failure_and_recovery_once_it_can_write(tmp_path: Path) -> None:
    loop = EventLoopback()
    room = threading.Event()

    class RefusingUntilRoomWriter(JournalWriter):
        # Not the page cap of the test above: pages freed by the failed writes let some later
        # ones through, and the journal would flap. query_only refuses every write until lifted.
        def _write(self, store: JournalStore | None, batch: list[Frame]) -> JournalStore | None:
            if store is not None:
                store.conn.execute(f"PRAGMA query_only = {0 if room.is_set() or loop.seq < 5 else 1}")
            return super()._write(store, batch)

    writer = RefusingUntilRoomWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.01), "run1", "n1", T0)
    writer.start(loop.sink)
    submit_until(writer, loop, lambda: "journal_failed" in loop.seen)
    # The frames after it (the first carries journal_failed) are lost as well.
    lost_before = writer.frames_not_written
    submit_until(writer, loop, lambda: writer.frames_not_written >= lost_before + 5)
    room.set()
    submit_until(writer, loop, lambda: "journal_recovered" in loop.seen)
    submit_until(writer, loop, lambda: not loop.pending)  # the recovery travels in the next frame
    writer.close()
    recovered = loop.seen["journal_recovered"]
    assert writer.frames_not_written > 5
    assert recovered.data["frames_not_written"] == writer.frames_not_written
    assert f"{writer.frames_not_written} frames not recorded" in recovered.message
    with JournalReader(tmp_path) as reader:
        assert reader.count_frames(T0, T0 + loop.seq) == loop.seq - writer.frames_not_written
        kinds = [e.kind for e in reader.events(T0, T0 + loop.seq)]
        assert kinds.count("journal_failed") == 1 and kinds.count("journal_recovered") == 1
        assert [e for e in reader.events(T0, T0 + loop.seq) if e.kind == "journal_recovered"] == [recovered]


def test_writer_reports_a_journal_it_cannot_open(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file where the state directory should be")
    failed = threading.Event()
    writer = JournalWriter(tmp_path / "blocked", FakeClock(), JournalSection(), "run1", "n1", T0)
    writer.start(lambda kind, *rest: failed.set() if kind == "journal_failed" else None)
    writer.submit(frame(1, T0, 1.0))
    assert failed.wait(10)
    assert writer.status.state == "error" and "cannot open journal" in (writer.status.error or "")
    writer.close()


def test_a_journal_of_a_newer_format_is_set_aside_not_written_over(tmp_path: Path) -> None:
    # Written by a newer rigmon (an agent downgraded): its layout is not this agent's to know.
    store = JournalStore(tmp_path, FakeClock())
    store.write([frame(1, T0, 1.0)])
    store.conn.execute("UPDATE meta SET value = '99' WHERE key = 'format'")
    store.close()
    seen: dict[str, dict[str, object]] = {}
    opened = threading.Event()
    writer = JournalWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.01), "run2", "n1", T0 + 10)

    def sink(kind: str, severity: str, subject: str, message: str, data: dict[str, object]) -> None:
        seen[kind] = {"message": message, **data}
        opened.set()

    writer.start(sink)
    writer.submit(frame(1, T0 + 10, 2.0, run_id="run2"))
    assert opened.wait(10)
    writer.close()
    assert "journal_set_aside" in seen and "unclean_shutdown" not in seen
    assert "format 99, newer than" in str(seen["journal_set_aside"]["message"])
    kept = Path(str(seen["journal_set_aside"]["kept_as"]))
    # Kept as it was: its format row and its frame.
    with JournalReader(kept) as old:
        assert old.conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == "99"
        assert [f.seq for f in old.frames(T0, T0)] == [1]
    with JournalReader(tmp_path) as new:
        assert [f.run_id for f in new.frames(T0, T0 + 10)] == ["run2"]


@pytest.mark.parametrize("damage", ["cut", "bad-header-of-a-page"])
def test_a_crash_that_damaged_the_journal_is_still_reported(tmp_path: Path, damage: str) -> None:
    # A power cut: the run never stopped, and the journal fails its check at the next start.
    store = JournalStore(tmp_path, FakeClock())
    store.begin_run("run1", "n1", T0)
    for start in range(0, 2000, 100):
        store.write([frame(i + 1, T0 + i, 11.9) for i in range(start, start + 100)])
    store.close()
    path = tmp_path / "journal.sqlite3"
    if damage == "cut":
        os.truncate(path, path.stat().st_size * 2 // 3)
    else:
        with open(path, "r+b") as fh:
            fh.seek(path.stat().st_size // 4096 // 2 * 4096)
            fh.write(b"\xff" * 4096)
    seen: dict[str, dict[str, object]] = {}
    done = threading.Event()
    writer = JournalWriter(tmp_path, FakeClock(T0 + 3000), JournalSection(commit_interval_s=0.01), "run2", "n1",
                           T0 + 3000)

    def sink(kind: str, severity: str, subject: str, message: str, data: dict[str, object]) -> None:
        seen[kind] = {"message": message, **data}
        if kind == "journal_set_aside":
            done.set()

    writer.start(sink)
    writer.submit(frame(1, T0 + 3000, 12.0, run_id="run2"))
    assert done.wait(10)
    for _ in range(1000):  # the journal open again, and the crash reported (a stop keeps later events)
        if writer.status.state == "ok":
            break
        time.sleep(0.01)
    writer.close()
    assert "unclean_shutdown" in seen and seen["unclean_shutdown"]["previous_run_id"] == "run1"
    assert str(seen["unclean_shutdown"]["message"]).startswith("node restarted unexpectedly; ")


def test_tier_widths_nest() -> None:
    assert all(b % a == 0 for a, b in zip(TIERS_S, TIERS_S[1:]))


def test_writer_waits_for_frames_until_its_next_own_work(tmp_path: Path) -> None:
    """Between frames the writer sleeps until its next maintenance, not a fixed second that
    races the 1 Hz frames (a second wake-up about every other frame)."""
    import queue

    waits: list[float | None] = []
    long_wait = threading.Event()

    class Recording(queue.Queue[object]):
        def get(self, block: bool = True, timeout: float | None = None) -> object:
            waits.append(timeout)
            if timeout is not None and timeout > 1.0:
                long_wait.set()
            return super().get(block, timeout)

    writer = JournalWriter(tmp_path, FakeClock(), JournalSection(), "run1", "n1", T0)
    writer._queue = Recording(maxsize=4)
    writer.start()
    writer.submit(frame(1, T0, 1.0))
    try:
        assert long_wait.wait(10), f"waits for a frame: {waits}"
    finally:
        writer.close()
    assert writer.frames_written == 1
    assert all(w is None or 0.0 <= w <= 15.0 for w in waits)


def test_a_frame_that_cannot_be_encoded_is_lost_and_said_so_and_the_writer_goes_on(tmp_path: Path) -> None:
    """A NaN a collector let through: the frame's batch is lost and counted, the journal reads error
    with the reason, and the next frames are written (the writer's thread used to die on it)."""
    loop = EventLoopback()
    writer = JournalWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start(loop.sink)
    submit_until(writer, loop, lambda: writer.frames_written >= 3)
    writer.submit(frame(10_000, T0 + 9_999, float("nan")))
    submit_until(writer, loop, lambda: "journal_failed" in loop.seen)
    assert "cannot be written" in (loop.seen["journal_failed"].message)
    submit_until(writer, loop, lambda: "journal_recovered" in loop.seen)
    written = writer.frames_written
    submit_until(writer, loop, lambda: writer.frames_written >= written + 3)
    writer.close()
    assert writer.frames_not_written >= 1


def test_a_writer_that_stops_on_a_bug_says_so_in_its_status(tmp_path: Path) -> None:
    """A writer thread ended by an unexpected error left the journal "ok" while nothing was recorded."""
    loop = EventLoopback()

    class BuggyWriter(JournalWriter):
        def _write(self, store: JournalStore | None, batch: list[Frame]) -> JournalStore | None:
            if loop.seq > 3:
                raise RuntimeError("a bug")
            return super()._write(store, batch)

    writer = BuggyWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start(loop.sink)
    submit_until(writer, loop, lambda: writer.status.state == "error")
    error = writer.status.error or ""
    assert f"the journal writer of {writer.path} stopped on an unexpected error (a bug: " in error
    assert "RuntimeError" not in error  # a sentence for the operator, not a class name
    assert "journal_failed" in loop.seen
    writer.close()
