"""The journal: frames and events round trip, tiers keep min/mean/max, retention by age and size,
unclean-shutdown detection (injected clock throughout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.agent.journal import (
    TIERS_S,
    JournalReader,
    JournalStore,
    Retention,
    UncleanRun,
    unclean_message,
)
from rigmon.schema import Event
from tests.agent.journal_frames import T0, FakeClock, frame


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


def test_tier_widths_nest() -> None:
    assert all(b % a == 0 for a, b in zip(TIERS_S, TIERS_S[1:]))
