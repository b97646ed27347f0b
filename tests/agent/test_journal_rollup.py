"""The tiers kept as frames are written: compiled shapes read exactly what `frame_series` reads, a
frame of another shape is never read under a wrong name, and the buckets a writer stores match
the ones computed from the frames afterwards, across shape changes, restarts and failed writes."""

from __future__ import annotations

import copy
import json
import math
import types
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rigmon.agent.journal import JournalStore
from rigmon.agent.journal.rollup import SHAPE_ERRORS, Rollup, SeriesShape, column_stats
from rigmon.schema import AmdGpuReading, Frame, InfinibandPortReading, ProbeResponderReading, Readings, decode, encode
from rigmon.series import Stats, add_value, frame_series
from tests.agent.journal_frames import T0, FakeClock, frame

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "snapshot-v1.json"


def golden_readings() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN.read_text())["readings"]
    return data


def read(shape: SeriesShape, readings: Any) -> dict[str, float]:
    """What a shape reads, as `frame_series` gives it (missing and non-finite left out)."""
    out: dict[str, float] = {}
    for name, value in zip(shape.names, shape.values(readings)):
        if type(value) in (int, float) and math.isfinite(value):
            out[name] = float(value)
    return out


def test_a_shape_reads_what_the_walk_reads() -> None:
    readings = golden_readings()
    shape = SeriesShape(readings)
    assert read(shape, readings) == frame_series({"readings": readings})
    assert len(shape.names) > 50


def test_a_shape_reads_a_missing_reading_that_comes_back() -> None:
    readings = {"host": {"cpu_pct": None, "boot_id": "b", "uptime_at": 5.0}, "gpus": [{"index": 0, "power_w": 1}]}
    shape = SeriesShape(readings)
    later = copy.deepcopy(readings)
    later["host"]["cpu_pct"] = 12.5
    later["host"]["boot_id"] = "c"
    assert read(shape, later) == frame_series({"readings": later}) == {"host.cpu_pct": 12.5, "gpus[0].index": 0.0,
                                                                       "gpus[0].power_w": 1.0}
    later["host"]["cpu_pct"] = math.nan
    assert read(shape, later) == frame_series({"readings": later})


@pytest.mark.parametrize("change", ["gpu_renumbered", "key_added", "key_renamed", "record_appears", "list_grows",
                                    "records_in_an_empty_list", "first_field_type", "first_key_moves"])
def test_a_frame_of_another_shape_is_never_read_by_the_old_one(change: str) -> None:
    readings: dict[str, Any] = {
        "gpus": [{"index": 0, "power_w": 100.0}, {"index": 1, "power_w": 110.0}],
        "psu": None,
        "host": {"cpu_pct": 1.0, "mem_pct": 2.0},
        "paths": [],
        "clock_reasons": ["sw_power_cap"],
    }
    shape = SeriesShape(readings)
    other = copy.deepcopy(readings)
    if change == "gpu_renumbered":
        other["gpus"][1]["index"] = 2  # GPU 1 lost, GPU 2 in its place: gpus[2], not gpus[1]
    elif change == "key_added":
        other["host"]["swap_pct"] = 3.0
    elif change == "key_renamed":
        other["host"] = {"cpu_pct": 1.0, "swap_pct": 2.0}
    elif change == "record_appears":
        other["psu"] = {"volts": 11.9}
    elif change == "list_grows":
        other["gpus"].append({"index": 2, "power_w": 1.0})
    elif change == "records_in_an_empty_list":
        other["paths"] = [{"name": "a", "ohms": 0.001}]
    elif change == "first_field_type":
        other["gpus"][0]["index"] = "0"
    elif change == "first_key_moves":
        other["gpus"][0] = {"power_w": 100.0, "index": 0}
    with pytest.raises(SHAPE_ERRORS):
        shape.values(other)
    assert read(SeriesShape(other), other) == frame_series({"readings": other})


@pytest.mark.parametrize("change", ["pci_address_moves", "pci_address_goes", "card_renumbered"])
def test_an_amd_gpu_moved_to_another_pci_address_is_never_read_under_the_old_one(change: str) -> None:
    # An AMD GPU's series are named by its PCI address (`rigmon.series.ELEMENT_KEY_FIELDS`), not its first field.
    gpu = AmdGpuReading(card="card0", pci_bus_id="0000:c3:00.0", power_w=100.0, busy_pct=None, clock_sclk_mhz=None,
                        clock_mclk_mhz=None, temp_c=None, vram_total_bytes=None, vram_used_bytes=None)
    readings: dict[str, Any] = {"amd_gpus": [msgspec.to_builtins(gpu)]}
    shape = SeriesShape(readings)
    assert read(shape, readings) == frame_series({"readings": readings}) == {"amd_gpus[0000:c3:00.0].power_w": 100.0}
    of_records = SeriesShape(decode(Readings, encode(readings)))
    other = copy.deepcopy(readings)
    if change == "pci_address_moves":
        other["amd_gpus"][0]["pci_bus_id"] = "0000:03:00.0"
    elif change == "pci_address_goes":
        other["amd_gpus"][0]["pci_bus_id"] = None
    else:
        other["amd_gpus"][0]["card"] = "card1"
    records = decode(Readings, encode(other))
    for compiled, data in ((shape, other), (of_records, records)):
        with pytest.raises(SHAPE_ERRORS):
            compiled.values(data)
        assert read(SeriesShape(data), data) == frame_series({"readings": other})


def test_words_listed_or_not_are_one_shape() -> None:
    readings = {"gpus": [{"index": 0, "clock_reasons": [], "power_w": 1.0}]}
    shape = SeriesShape(readings)
    readings["gpus"][0]["clock_reasons"] = ["sw_power_cap", "hw_slowdown"]
    assert read(shape, readings) == {"gpus[0].index": 0.0, "gpus[0].power_w": 1.0}


def test_two_series_of_one_name_are_left_to_the_walk() -> None:
    readings = {"net": [{"name": "eth0", "rx": 1.0}, {"name": "eth0", "rx": None}]}
    with pytest.raises(ValueError):
        SeriesShape(readings)
    rollup = Rollup(None)
    rollup.add(T0, readings)
    ((_, _, stats),) = [d for d in rollup.add(T0 + 60, {}) if d[0] == 60]
    assert stats == {"net[eth0].rx": [1.0, 1.0, 1.0, 1.0]} == {
        name: [v, v, v, 1.0] for name, v in frame_series({"readings": readings}).items()}


def test_column_stats_fold_as_add_value_does() -> None:
    shape = SeriesShape({"a": 1.0, "b": None, "c": 2, "d": None, "e": 1.5, "f": 3, "g": 0})
    rows: list[tuple[Any, ...]] = [(1.0, None, 2, None, None, None, 1), (math.inf, 5.0, 3, "text", 2.5, None, 2),
            (-2.5, True, 4, None, None, None, None), (0.5, 7, 5, False, -1.0, None, "x")]
    for seeded in (False, True):
        got: dict[str, Stats] = {"c": [0.0, 10.0, 9.0, 4.0]} if seeded else {}
        column_stats(shape, rows, got)
        want: dict[str, Stats] = {"c": [0.0, 10.0, 9.0, 4.0]} if seeded else {}
        for row in rows:
            for name, value in zip(shape.names, row):
                if type(value) in (int, float) and math.isfinite(value):
                    add_value(want, name, float(value))
        assert got == want


def replace(obj: Any, **changes: Any) -> Any:
    return msgspec.structs.replace(obj, **changes)


def test_buckets_kept_while_writing_match_those_computed_from_the_frames(tmp_path: Path) -> None:
    clock = FakeClock()
    store = JournalStore(tmp_path, clock)
    store.catch_up_tiers()  # nothing stored yet: from here on writes keep the tiers
    assert store._rollup is not None
    frames = [frame_with_changes(i) for i in range(2000)]
    for start in range(0, 2000, 7):  # commits of a few frames, as the writer makes them
        store.write(frames[start:start + 7])
        if start % 15 == 0:
            store.catch_up_tiers()  # maintenance folds the frames committed since
    store.catch_up_tiers()
    assert store.watermark(60) == T0 + 1980 and store.watermark(900) == T0 + 1800
    stored = store.buckets(0, T0, T0 + 1980)
    fresh = JournalStore(tmp_path / "other", FakeClock())
    try:
        fresh.write(frames)
        computed = fresh.compute_buckets(0, T0, T0 + 1980)
        assert [at for at, _ in stored] == [at for at, _ in computed] == [T0 + 60 * i for i in range(33)]
        for (at, mine), (_, theirs) in zip(stored, computed):
            assert mine.keys() == theirs.keys(), at
            for name in mine:
                lo, total, hi, n = theirs[name]
                assert (mine[name][0], mine[name][2], mine[name][3]) == (lo, hi, n), (at, name)
                assert mine[name][1] / n == pytest.approx(total / n, rel=1e-6), (at, name)
        quarters = dict(store.buckets(1, T0, T0 + 1800))
        assert sorted(quarters) == [T0, T0 + 900]
        cpu = quarters[T0]["host.cpu_pct"]
        values = [float((i * 7) % 53) for i in range(900) if i % 17]
        assert (cpu[0], cpu[2], cpu[3]) == (min(values), max(values), len(values))
        assert quarters[T0]["net[eth1].rx_bytes_per_s"] == [200.0, float(sum(range(200, 400))), 399.0, 200.0]
        assert "net[eth1].rx_bytes_per_s" not in quarters[T0 + 900]
    finally:
        fresh.close()
        store.close()


def frame_with_changes(i: int) -> Any:
    f = frame(i + 1, T0 + i, float((i * 7) % 53))
    readings = f.readings
    if 200 <= i < 400:
        readings = replace(readings, net=(*readings.net, replace(readings.net[0], name="eth1", rx_bytes_per_s=float(i))))
    if i % 17 == 0:
        readings = replace(readings, host=replace(readings.host, cpu_pct=None))
    return replace(f, readings=readings)


def test_a_new_writer_seeds_the_open_minute_from_the_journal(tmp_path: Path) -> None:
    clock = FakeClock()
    store = JournalStore(tmp_path, clock)
    store.catch_up_tiers()
    store.write([frame(i + 1, T0 + i, float(i)) for i in range(90)])  # a minute and a half
    store.close()  # killed before maintenance: the tiers are only in the frames
    store = JournalStore(tmp_path, clock)
    try:
        store.catch_up_tiers()  # minute 0 from the frames
        assert store._rollup is None and store.watermark(60) == T0 + 60
        store.catch_up_tiers()  # nothing left: the open minute's 30 frames read back
        assert store._rollup is not None and store._rollup.minute_start == T0 + 60
        store.write([frame(i + 1, T0 + i, float(i)) for i in range(90, 130)])
        store.catch_up_tiers()
        minute = dict(store.buckets(0, T0, T0 + 120))[T0 + 60]["host.cpu_pct"]
        assert minute == [60.0, float(sum(range(60, 120))), 119.0, 60.0]
    finally:
        store.close()


def test_a_failed_write_leaves_the_tiers_right(tmp_path: Path) -> None:
    from rigmon.agent.frame_json import frame_json

    clock = FakeClock()
    store = JournalStore(tmp_path, clock)
    try:
        store.catch_up_tiers()
        store.write([frame(i + 1, T0 + i, float(i)) for i in range(50)])
        bad = frame(51, T0 + 50, 999.0)
        with pytest.raises(AttributeError):
            # A write that fails after the frame's row is in: the transaction rolls back.
            store.write_encoded([(bad, frame_json(bad))], events=[("run1", None)])  # type: ignore[list-item]
        store.write([frame(i + 1, T0 + i, float(i)) for i in range(50, 190)])
        store.catch_up_tiers()
        stored = dict(store.buckets(0, T0, T0 + 180))
        assert [stored[T0 + 60 * m]["host.cpu_pct"] for m in range(3)] == [
            [60.0 * m, float(sum(range(60 * m, 60 * m + 60))), 60.0 * m + 59, 60.0] for m in range(3)]
        assert store.frames_json(T0, T0 + 200)[-1] == frame_json(frame(190, T0 + 189, 189.0))
        assert len(store.frames_json(T0, T0 + 200)) == 190
    finally:
        store.close()


# --- The writer's fold reads the records it holds (`Readings`), not their JSON decoded back. ---


def _records(tp: Any, depth: int = 0) -> Any:
    """A hypothesis strategy for a value of annotation ``tp`` of `rigmon.schema`: records, their
    tuples, dicts and unions; JSON-safe numbers (no NaN: a frame holding one is not encoded)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return st.none()
    if tp is msgspec.UnsetType:
        return st.just(msgspec.UNSET)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(-(2 ** 40), 2 ** 40) | st.sampled_from([0, 1, 2])
    if tp is float:
        return st.floats(-1e12, 1e12, allow_nan=False) | st.sampled_from([0.0, 1.5])
    if tp is str:
        return st.sampled_from(["", "a", "b", "eth0", "0"])
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_records(a, depth) for a in args))
    if origin is tuple:
        return st.lists(_records(args[0], depth + 1), max_size=0 if depth > 2 else 3).map(tuple)
    if origin is dict:
        return st.dictionaries(st.sampled_from(["a", "b", "ch0"]), _records(args[1], depth + 1),
                               max_size=0 if depth > 2 else 2)
    assert isinstance(tp, type) and issubclass(tp, msgspec.Struct), tp
    return st.builds(tp, **{f.name: _records(f.type, depth + 1) for f in msgspec.structs.fields(tp)})


def wire_series(readings: Readings) -> dict[str, float]:
    """The series of a frame of these readings as the journal stores it: its wire JSON, walked."""
    return frame_series({"readings": json.loads(encode(readings))})


@pytest.fixture(scope="module")
def rig_frames(tmp_path_factory: pytest.TempPathFactory) -> list[Frame]:
    """Frames of the full rig of the journal benchmarks (8 GPUs, RM1 ADC, PMBus, md arrays, USB4)."""
    from benchmarks.journal import real_frames

    data = real_frames(4, tmp_path_factory.mktemp("rig"), T0)
    return [decode(Frame, json.dumps(d).encode()) for d in data]


def test_a_shape_of_records_reads_what_the_walk_reads_of_their_json(rig_frames: list[Frame]) -> None:
    golden = decode(Frame, GOLDEN.read_bytes()).readings
    for readings in [golden, *(f.readings for f in rig_frames)]:
        shape = SeriesShape(readings)
        assert read(shape, readings) == wire_series(readings)
    assert len(wire_series(rig_frames[-1].readings)) > 800
    # The rig's next frames have the shape of its second one (the first has no rates yet): read
    # without compiling again.
    first = SeriesShape(rig_frames[1].readings)
    for f in rig_frames[2:]:
        assert read(first, f.readings) == wire_series(f.readings)
    # A shape of records does not read JSON data, nor one of JSON data records.
    with pytest.raises(SHAPE_ERRORS):
        first.values(json.loads(encode(rig_frames[0].readings)))
    with pytest.raises(SHAPE_ERRORS):
        SeriesShape(json.loads(encode(rig_frames[0].readings))).values(rig_frames[0].readings)


def _other_values(data: st.DataObject, value: Any) -> Any:
    """``value`` with other numbers (or ``None`` where allowed) in its records: mostly the same shape."""
    if isinstance(value, msgspec.Struct):
        changes = {}
        for f in msgspec.structs.fields(value):
            v = getattr(value, f.name)
            if type(v) in (int, float) or (v is None and data.draw(st.booleans())):
                changes[f.name] = data.draw(_records(f.type, 3))
            elif isinstance(v, (msgspec.Struct, tuple, dict)):
                changes[f.name] = _other_values(data, v)
        return msgspec.structs.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(_other_values(data, v) for v in value)
    if isinstance(value, dict):
        return {k: _other_values(data, v) for k, v in value.items()}
    return value


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(_records(Readings), st.data())
def test_a_shape_of_records_never_reads_a_series_under_a_wrong_name(a: Readings, data: st.DataObject) -> None:
    try:
        shape = SeriesShape(a)
    except ValueError:
        return  # two series of one name (two GPUs of one index): left to the walk
    assert read(shape, a) == wire_series(a)
    for b in (_other_values(data, a), data.draw(_records(Readings))):
        try:
            got = read(shape, b)
        except SHAPE_ERRORS:
            continue
        assert got == wire_series(b)


@pytest.mark.parametrize("change", ["gpu_renumbered", "record_appears", "record_goes", "tuple_grows",
                                    "channel_added", "words_to_records"])
def test_a_frame_of_records_of_another_shape_is_never_read_by_the_old_one(rig_frames: list[Frame],
                                                                          change: str) -> None:
    readings = rig_frames[-1].readings
    shape = SeriesShape(readings)
    gpus = readings.gpus
    if change == "gpu_renumbered":
        other = replace(readings, gpus=(*gpus[:-1], replace(gpus[-1], index=99)))
    elif change == "record_appears":
        assert readings.probe_responder is None
        other = replace(readings, probe_responder=ProbeResponderReading(address="0.0.0.0:7", answered_total=3))
    elif change == "record_goes":
        other = replace(readings, host=None)
    elif change == "tuple_grows":
        other = replace(readings, gpus=(*gpus, replace(gpus[0], index=8)))
    elif change == "channel_added":
        rail = readings.psu_rail
        assert rail is not None and rail.volts is not None
        other = replace(readings, psu_rail=replace(rail, channels_volts={**rail.channels_volts, "extra": rail.volts}))
    else:
        assert not readings.infiniband
        other = replace(readings, infiniband=(InfinibandPortReading(name="mlx5_0", device="mlx5_0", port=1,
                                                                    symbol_error_total=2),))
    with pytest.raises(SHAPE_ERRORS):
        shape.values(other)
    assert read(SeriesShape(other), other) == wire_series(other)


def test_clock_reasons_listed_none_or_missing_are_one_shape(rig_frames: list[Frame]) -> None:
    readings = rig_frames[0].readings
    shape = SeriesShape(readings)
    for reasons in [None, (), ("sw_power_cap", "hw_slowdown")]:
        other = replace(readings, gpus=tuple(replace(g, clock_reasons=reasons) for g in readings.gpus))
        assert read(shape, other) == wire_series(other)


def stored_tiers(store: JournalStore) -> list[tuple[Any, ...]]:
    rows = store.conn.execute("SELECT step_s, start_at, body FROM buckets ORDER BY step_s, start_at").fetchall()
    marks = store.conn.execute("SELECT key, value FROM meta WHERE key LIKE 'tier:%' ORDER BY key").fetchall()
    return [tuple(r) for r in rows + marks]


def rig_frames_with_changes(rig_frames: list[Frame], count: int) -> list[Frame]:
    """Frames of the rig a second apart: values moving, GPU clock reasons and a PSU coming and going."""
    frames = []
    for i in range(count):
        base = rig_frames[i % len(rig_frames)]
        readings = base.readings
        gpus = tuple(replace(g, power_w=float(100 + (i * 13 + g.index) % 97),
                             clock_reasons=("sw_power_cap",) if (i + g.index) % 5 == 0 else ())
                     for g in readings.gpus)
        readings = replace(readings, gpus=gpus)
        if 100 <= i < 130:
            readings = replace(readings, psu_rail=None)
        if i % 11 == 0:
            readings = replace(readings, host=replace(readings.host, cpu_pct=None))
        frames.append(replace(base, seq=i + 1, taken_at=T0 + i, run_id="run1", readings=readings, events=()))
    return frames


@pytest.mark.parametrize("kind", ["rig", "small"])
def test_the_fold_from_records_stores_the_same_buckets_as_the_fold_from_json(
        tmp_path: Path, rig_frames: list[Frame], kind: str) -> None:
    from rigmon.agent.frame_json import frame_json

    frames = (rig_frames_with_changes(rig_frames, 1000) if kind == "rig"
              else [frame_with_changes(i) for i in range(1000)])
    stores = []
    for name, as_json in (("records", False), ("json", True)):
        store = JournalStore(tmp_path / name, FakeClock())
        store.catch_up_tiers()
        assert store._rollup is not None
        for start in range(0, len(frames), 7):
            batch = frames[start:start + 7]
            # Readings that are not records: the store folds the frames' JSON, as before this change.
            store.write_encoded([(replace(f, readings=None) if as_json else f, frame_json(f)) for f in batch])
            if start % 15 == 0:
                store.catch_up_tiers()
        store.catch_up_tiers()
        stores.append(store)
    try:
        records, from_json = (stored_tiers(s) for s in stores)
        assert len(records) > 16 and records == from_json
    finally:
        for s in stores:
            s.close()


def test_the_writers_fold_does_not_decode_the_frames_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rigmon.agent.journal import store as store_module

    class NoDecode:
        def decode(self, raw: bytes) -> Any:
            raise AssertionError("a frame's JSON decoded back")

    store = JournalStore(tmp_path, FakeClock())
    try:
        store.catch_up_tiers()
        monkeypatch.setattr(store_module, "_readings_decoder", NoDecode())
        store.write([frame(i + 1, T0 + i, float(i)) for i in range(130)])
        store.catch_up_tiers()
        assert store._rollup is not None
        assert dict(store.buckets(0, T0, T0 + 120))[T0 + 60]["host.cpu_pct"] == [
            60.0, float(sum(range(60, 120))), 119.0, 60.0]
    finally:
        store.close()
