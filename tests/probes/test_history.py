"""Probe readings are readings like any other: the journal's series come from them without code of their own."""

from __future__ import annotations

import json

import msgspec

from rigmon.schema import PeerPathReading, encode
from rigmon.series import frame_series
from tests.test_schema import sample_frame


def test_peer_paths_become_journal_series_named_by_path() -> None:
    frame = sample_frame()
    path = PeerPathReading(name="node02/roce", peer="node02", path="roce", address="10.0.1.2", state="ok",
                           window_s=10.0, sent=100, received=99, loss_pct=1.0, rtt_p50_us=14.0, rtt_p99_us=31.0)
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, peer_paths=(path,)))
    series = frame_series(json.loads(encode(frame)))
    assert series["peer_paths[node02/roce].rtt_p99_us"] == 31.0
    assert series["peer_paths[node02/roce].loss_pct"] == 1.0
    assert "peer_paths[node02/roce].rtt_max_us" not in series  # missing is no sample, never 0
