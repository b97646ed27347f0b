"""The probe datagram: fixed size, round trip, and every way a datagram is refused."""

from __future__ import annotations

import pytest

from rigmon.probes.wire import (
    FLAG_HELD,
    FLAG_RDMA_DOWN,
    SIZE,
    Probe,
    ProbeRefused,
    _mac,
    derive_key,
    pack,
    parse,
)

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


def test_a_reply_carries_the_responders_hold_time_in_the_time_field() -> None:
    reply = Probe("reply", "node02", 42, 0, held_ns=3_000_000)
    data = pack(reply, KEY)
    assert len(data) == SIZE
    assert data[7] == FLAG_HELD
    assert parse(data, KEY) == reply
    with pytest.raises(ValueError, match="hold"):
        pack(Probe("request", "node01", 1, 5, held_ns=1), KEY)


def test_a_reply_without_the_flag_is_an_older_responders_echo_and_says_nothing_of_its_hold() -> None:
    echoed = pack(Probe("reply", "node02", 42, 1_700_000_000_123_456_789), KEY)
    assert echoed[7] == 0  # the byte that was reserved: an older responder's reply looks like this
    assert parse(echoed, KEY).held_ns is None
    # A request's flags mean nothing: its time field is always the send time.
    head = bytearray(pack(Probe("request", "node01", 1, 5), KEY)[:88])
    head[7] = FLAG_HELD
    request = parse(bytes(head) + _mac(KEY, bytes(head)), KEY)
    assert (request.kind, request.sent_at_ns, request.held_ns) == ("request", 5, None)


def test_a_reply_says_its_responder_has_an_rdma_port_down() -> None:
    """Bit 2 of the flags (byte 7): beside the hold time and the flood, whatever else the reply says."""
    key = derive_key("tok")
    reply = parse(pack(Probe("reply", "node01", 9, 0, 1500, True, True), key), key)
    assert (reply.held_ns, reply.flooded, reply.rdma_down) == (1500, True, True)
    data = pack(Probe("reply", "node01", 9, 0, 1500, rdma_down=True), key)
    assert data[7] == FLAG_HELD | FLAG_RDMA_DOWN
    assert parse(pack(Probe("reply", "node01", 9, 0, 1500), key), key).rdma_down is False
    with pytest.raises(ValueError, match="only a reply"):
        pack(Probe("request", "node01", 9, 5, rdma_down=True), key)
