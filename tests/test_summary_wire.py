"""The summary stream's wire format (``/v1/stream?view=summary``) is fixed: golden records of recorded frames.

`tests/fixtures/golden/summary-records-v1.jsonl` holds the JSON of `summary_record` for a few
recorded frames (one a line), written when the records were dataclasses. Whatever the records
are made of, an agent must send exactly these bytes, and a dashboard must read them back into
the same records. Regenerate only for a deliberate, additive change of the format:

    PYTHONPATH=$PWD python -m tests.test_summary_wire
"""

from __future__ import annotations

from pathlib import Path

import gc

import msgspec
import pytest
from msgspec.structs import replace

from rigmon.cluster.sanitise import decode_agent
from rigmon.schema import Frame, GuardReading, PeerPathReading, decode, encode
from rigmon.summary import SummaryRecord, summary_record
from tests.tui.snapshot_apps.record_frames import load_frames

GOLDEN = Path(__file__).parent / "fixtures" / "golden" / "summary-records-v1.jsonl"

#: (fixture, frame index) of the frames whose records are golden.
PICKS = (
    ("v100-gpu-lost-rail-sag", 10),
    ("v100-gpu-lost-rail-sag", 59),
    ("v100-ddp-gpu-3-lost", 45),
    ("strix-amd-gpu", 5),
    ("strix-usb4-thunderbolt-net", 30),
    ("enclosure-link-10g-array-lagging", 44),
    ("raid1-member-failed-recovering", 20),
    ("two-raid0-model-load", 15),
)


def with_paths_and_guard(frame: Frame) -> Frame:
    """``frame`` with peer paths (one silent, one degraded, one ok) and an engaged guard: the
    recorded fixtures have neither, and the summary's path figures and guard mark must be covered."""
    paths = (
        PeerPathReading(name="node02/tbnet", peer="node02", path="tbnet", address="10.0.0.2", state="ok",
                        window_s=5.0, sent=50, received=50, loss_pct=0.0, rtt_p50_us=48.0, rtt_p99_us=91.5,
                        link_gbps=40.0, last_reply_age_s=0.1),
        PeerPathReading(name="node03/tbnet", peer="node03", path="tbnet", address="10.0.0.3", state="silent",
                        window_s=5.0, sent=50, received=0, last_reply_age_s=12.5),
        PeerPathReading(name="node02/mgmt", peer="node02", path="mgmt", address="192.168.1.2", transport="tcp",
                        state="degraded", window_s=5.0, sent=50, received=47, loss_pct=6.0, rtt_p99_us=812.25),
    )
    guard = GuardReading(mode="enforce", acting=True, state="held", step=2, step_name="locked_clocks")
    return replace(frame, readings=replace(frame.readings, peer_paths=paths, guard=guard))


def golden_frames() -> list[Frame]:
    frames = [load_frames(name)[index] for name, index in PICKS]
    return [*frames, with_paths_and_guard(frames[1])]


def golden_lines() -> list[bytes]:
    return [line for line in GOLDEN.read_bytes().split(b"\n") if line]


@pytest.fixture(scope="module")
def frames() -> list[Frame]:
    return golden_frames()


def test_agents_send_the_golden_bytes(frames: list[Frame]) -> None:
    lines = golden_lines()
    assert len(lines) == len(frames)
    for frame, line in zip(frames, lines):
        assert encode(summary_record(frame)) == line


def test_dashboards_read_the_golden_bytes_back(frames: list[Frame]) -> None:
    for frame, line in zip(frames, golden_lines()):
        expected = summary_record(frame)
        for decoded in (decode(SummaryRecord, line), decode_agent(SummaryRecord, line)):
            assert decoded == expected
            assert encode(decoded) == line


def test_summary_records_decode_into_untracked_structs() -> None:
    """The dashboard decodes a summary record straight into frozen Structs that the cycle collector
    does not track (`rigmon.schema.Record`): no converter, and nothing for a full collection to walk."""
    record = decode(SummaryRecord, golden_lines()[-1])
    summary, paths = record.summary, record.summary.paths
    assert paths is not None and paths.worst is not None
    for value in (record, summary, paths, paths.worst, paths.paths[0]):
        assert isinstance(value, msgspec.Struct) and type(value).__struct_config__.frozen, type(value)
        assert not gc.is_tracked(value), type(value)
    with pytest.raises(AttributeError):
        summary.seq = 2  # type: ignore[misc]


def test_the_golden_records_cover_every_part_of_a_summary(frames: list[Frame]) -> None:
    """Not vacuous: some golden record has each kind of figure."""
    summaries = [summary_record(f).summary for f in frames]
    assert any(s.paths is not None and s.paths.silent and s.paths.degraded for s in summaries)
    assert any(s.guard_mark for s in summaries)
    assert any(s.gpus_lost for s in summaries)
    assert any(s.arrays_degraded for s in summaries)
    assert any(s.links_total for s in summaries)
    assert any(s.links_slow for s in summaries)
    assert any(s.rail_min_volts is not None for s in summaries)


def test_older_and_newer_agents_are_read(frames: list[Frame]) -> None:
    """Keys a dashboard does not know are ignored, and a summary without its newer keys gets their
    defaults (the format is additive)."""
    line = golden_lines()[-1]
    record = decode(SummaryRecord, line)
    newer = line.replace(b'"summary":{', b'"summary":{"future_figure":[1,2],', 1)
    assert decode(SummaryRecord, newer) == record
    older = line.replace(b',"guard_mark":"G2h"', b"", 1)
    assert older != line
    assert decode(SummaryRecord, older) == decode(SummaryRecord, line.replace(b'"guard_mark":"G2h"', b'"guard_mark":""'))
    assert record.summary.guard_mark == "G2h"
    # An agent from before ``links_slow`` does not say which unhealthy links are only slow.
    slow_line = next(line for line in golden_lines() if b'"links_slow":1' in line)
    assert decode(SummaryRecord, slow_line.replace(b',"links_slow":1', b"", 1)).summary.links_slow is None


if __name__ == "__main__":
    GOLDEN.write_bytes(b"".join(encode(summary_record(f)) + b"\n" for f in golden_frames()))
    print(f"wrote {GOLDEN}")
