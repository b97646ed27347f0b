"""Wire schema: golden format, round trip, and one clear error type for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rigmon.schema import (
    SCHEMA_VERSION,
    CollectorStatus,
    Event,
    Frame,
    HostReading,
    InfinibandPortReading,
    Info,
    RdmaHwCounterReading,
    NetInterfaceReading,
    Readings,
    SchemaError,
    TemperatureReading,
    decode,
    encode,
)

GOLDEN = Path(__file__).parent / "fixtures" / "golden" / "snapshot-v1.json"


def sample_frame() -> Frame:
    return Frame(
        schema=SCHEMA_VERSION,
        node="node01",
        run_id="0123456789abcdef",
        seq=42,
        taken_at=1_700_000_000.25,
        agent_start=1_699_999_000.0,
        collectors={
            "host": CollectorStatus(state="ok", ok=True, error=None, duration_s=0.0012, sampled_at=1_700_000_000.2),
            "gpu": CollectorStatus(state="absent", ok=True, error="no NVIDIA driver", duration_s=0.0001),
        },
        readings=Readings(
            host=HostReading(
                cpu_pct=12.5, cpu_count=32, load_1=3.2, load_5=2.9, load_15=2.0,
                mem_total_bytes=274877906944, mem_available_bytes=200000000000,
                swap_total_bytes=0, swap_free_bytes=0, uptime_s=3600.0, boot_id="b0a7",
            ),
            temperatures=(TemperatureReading(sensor="thermal_zone0", label="x86_pkg_temp", temp_c=48.0),),
            net=(
                NetInterfaceReading(
                    name="eth0", operstate="up", carrier=True, speed_mbps=10000, mtu=9000,
                    rx_bytes_total=1000, tx_bytes_total=2000, rx_packets_total=10, tx_packets_total=20,
                    rx_errors_total=0, tx_errors_total=0, rx_dropped_total=0, tx_dropped_total=0,
                    carrier_changes_total=1, rx_bytes_per_s=None, tx_bytes_per_s=None,
                    rx_packets_per_s=None, tx_packets_per_s=None,
                ),
            ),
            infiniband=(
                InfinibandPortReading(
                    name="mlx5_0/1", device="mlx5_0", port=1, link_layer="Ethernet", state="ACTIVE", state_id=4,
                    phys_state="LinkUp", physical_state_id=5, rate_gbps=100.0, rate_text="100 Gb/sec (4X EDR)",
                    expected_gbps=100.0, expected_source="best_seen", link_state="ok",
                    link_downed_total=0, port_data_received_bytes_total=4000, errors_total=0,
                    port_data_received_bytes_per_s=125.0,
                    hw_counters=(RdmaHwCounterReading(name="np_cnp_sent", value_total=3, value_per_s=0.5),),
                ),
            ),
        ),
        events=(
            Event(id="0123456789abcdef-1", at=1_700_000_000.0, kind="agent_started", severity="info",
                  subject="node:node01", message="agent started on node01", data={"n": 1}),
        ),
    )


def test_golden_frame(update_golden: bool) -> None:
    """A diff here is a protocol change: review it as one (pytest --update-golden rewrites it)."""
    text = json.dumps(json.loads(encode(sample_frame())), indent=2, sort_keys=True) + "\n"
    if update_golden:
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_round_trip() -> None:
    frame = sample_frame()
    assert decode(Frame, encode(frame)) == frame


def test_unknown_keys_are_ignored() -> None:
    data = json.loads(encode(sample_frame()))
    data["added_in_a_later_release"] = {"x": 1}
    data["readings"]["host"]["new_reading_w"] = 5
    assert decode(Frame, json.dumps(data)).seq == 42


def test_missing_is_null_not_zero() -> None:
    data = json.loads(encode(sample_frame()))
    assert data["readings"]["net"][0]["rx_bytes_per_s"] is None


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(schema=2),
        lambda d: d.update(seq="42"),
        lambda d: d.pop("run_id"),
        lambda d: d["collectors"]["host"].update(state="sleepy"),
        lambda d: d["readings"]["host"].update(cpu_pct="12%"),
        lambda d: d["events"][0].update(severity="meh"),
    ],
)
def test_bad_frames_raise_schema_error(mutate: object) -> None:
    data = json.loads(encode(sample_frame()))
    mutate(data)  # type: ignore[operator]
    with pytest.raises(SchemaError):
        decode(Frame, json.dumps(data))


@pytest.mark.parametrize("raw", [b"", b"not json", b"\xff\xfe", b"[1,2]", b"null", b'{"schema": 1}'])
def test_garbage_raises_schema_error(raw: bytes) -> None:
    with pytest.raises(SchemaError):
        decode(Frame, raw)


def test_info_round_trip() -> None:
    info = Info(schema=1, node="n", run_id="r", agent_version="0.1.0", agent_start=1.0, interval_s=1.0,
                collectors=("host",))
    assert decode(Info, encode(info)) == info


def test_nan_is_refused_on_encode() -> None:
    frame = sample_frame()
    bad = Frame(**{**{f: getattr(frame, f) for f in frame.__struct_fields__},
                   "taken_at": float("nan")})
    with pytest.raises(ValueError):
        encode(bad)


def test_frame_without_rdma_ports_still_decodes() -> None:
    """The ``infiniband`` readings are additive: a frame from an older agent has no such key."""
    data = json.loads(encode(sample_frame()))
    del data["readings"]["infiniband"]
    assert decode(Frame, json.dumps(data)).readings.infiniband == ()
