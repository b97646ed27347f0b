"""The probe datagram: fixed size, round trip, and every way a datagram is refused."""

from __future__ import annotations

import pytest

from rigmon.probes.wire import SIZE, Probe, ProbeRefused, derive_key, pack, parse

KEY = derive_key("the-read-token")


def test_round_trip_and_fixed_size() -> None:
    probe = Probe("request", "node01", 42, 1_700_000_000_123_456_789)
    data = pack(probe, KEY)
    assert len(data) == SIZE
    assert parse(data, KEY) == probe
    reply = pack(Probe("reply", "a-much-longer-node-name-of-the-responder", 42, probe.sent_at_ns), KEY)
    assert len(reply) == len(data)


def test_key_is_derived_not_the_token_and_depends_on_it() -> None:
    assert KEY != b"the-read-token"
    assert len(KEY) == 32
    assert derive_key("the-read-token\n") == KEY
    assert derive_key("another-token") != KEY
    with pytest.raises(ValueError):
        derive_key("  \n")


def test_name_longer_than_the_field_is_refused_at_packing() -> None:
    with pytest.raises(ValueError, match="node name"):
        pack(Probe("request", "n" * 65, 1, 1), KEY)


def _refused(data: bytes, key: bytes = KEY) -> str:
    with pytest.raises(ProbeRefused) as info:
        parse(data, key)
    return info.value.reason


def test_refusals_say_why() -> None:
    good = pack(Probe("request", "node01", 1, 5), KEY)
    assert _refused(good, derive_key("other")) == "mac"
    assert _refused(good[:-1]) == "size"
    assert _refused(good + b"\0") == "size"
    assert _refused(b"") == "size"
    assert _refused(b"XXXX" + good[4:]) == "magic"
    assert _refused(good[:4] + b"\x02" + good[5:]) == "version"
    assert _refused(good[:5] + b"\x07" + good[6:]) == "kind"
    flipped = bytearray(good)
    flipped[75] ^= 1  # a bit of the sequence number
    assert _refused(bytes(flipped)) == "mac"
