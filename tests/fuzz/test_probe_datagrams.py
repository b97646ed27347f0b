"""Fuzzing the probe datagram: parse refuses everything but a valid probe with ProbeRefused, and the
responder answers nothing a stranger can make (and never a reply bigger than the request)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rigmon.probes.responder import ProbeResponder
from rigmon.probes.wire import SIZE, Probe, ProbeRefused, derive_key, pack, parse

KEY = derive_key("fuzz-token")
VALID = pack(Probe("request", "node01", 7, 1_700_000_000_000_000_000), KEY)


class _Sink:
    """Stands for the responder's socket: records what would be sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendto(self, data: bytes, addr: object) -> None:
        self.sent.append(data)


def _responder() -> tuple[ProbeResponder, _Sink]:
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 1e6, 1_000_000,
                               wall_ns=lambda: 1_700_000_000_000_000_000)
    sink = _Sink()
    responder.sock = sink  # type: ignore[assignment]
    return responder, sink


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2 * SIZE))
def test_random_bytes_are_refused_not_raised(data: bytes) -> None:
    try:
        parse(data, KEY)
    except ProbeRefused:
        return
    assert data == VALID  # only a valid probe parses (the chance of a random match is nil)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, SIZE - 1), st.integers(1, 255))
def test_any_flipped_byte_of_a_valid_request_gets_no_answer(position: int, flip: int) -> None:
    responder, sink = _responder()
    data = bytearray(VALID)
    data[position] ^= flip
    responder.datagram_received(bytes(data), ("192.0.2.1", 5000))
    assert sink.sent == []
    assert sum(responder.refused.values()) == 1


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096))
def test_the_responder_never_answers_garbage_and_never_raises(data: bytes) -> None:
    responder, sink = _responder()
    responder.datagram_received(data, ("192.0.2.1", 5000))
    responder.datagram_received(VALID, ("192.0.2.1", 5000))
    assert len(sink.sent) == 1 and len(sink.sent[0]) <= len(VALID)
