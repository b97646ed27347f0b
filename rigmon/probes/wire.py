"""The probe datagram: pack and parse, with its HMAC; pure functions, no I/O.

Layout (big-endian, always `SIZE` bytes)::

    0   4  magic b"RGMP"
    4   1  version (1)
    5   1  kind (1 request, 2 reply)
    6   1  length of the sender's node name in bytes (1..64)
    7   1  flags (replies only): bit 0 `FLAG_HELD`, bit 1 `FLAG_FLOODED`, bit 2 `FLAG_RDMA_DOWN`; other bits 0
           and ignored
    8  64  sender's node name, UTF-8, zero padded
   72   8  sequence number (per sending path)
   80   8  request: send time, Unix nanoseconds of the prober's wall clock; reply: that time
           echoed or, with `FLAG_HELD`, the nanoseconds the responder held the request (from
           its kernel's receive time to the reply's send)
   88  16  HMAC-SHA256 of bytes 0..87 under the probe key, truncated to 128 bits

A reply is the request with kind, flags, name, time field and MAC replaced: the same size,
never larger. The prober subtracts a reply's hold time from the round trip (as TWAMP does with
its reflector's timestamps): the responder's wait for a CPU and for Python's GIL before it
reads a request is the peer's scheduling, not the network's. Byte 7 was reserved (0) before
`FLAG_HELD`: an older prober ignores it and never reads a reply's time field, and an older
responder's reply has no flag, so its round trip counts whole. The version stays 1.
`FLAG_FLOODED` came the same way: the responder says it is refusing or dropping datagrams beyond its
budget (its port is flooded), so the prober's losses on the path may be the flood's, not the network's.
`FLAG_RDMA_DOWN` too: an RDMA port carrying one of the responder's probed paths is down (or was within its
probe window), so the prober's RDMA paths to it that went silent are that port's, whose own alarm is on the
responder's node; the reply says it on the paths that still answer (the management network's).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass
from typing import Literal

MAGIC = b"RGMP"
VERSION = 1
NAME_BYTES = 64
MAC_BYTES = 16
_HEAD = struct.Struct(f">4sBBBB{NAME_BYTES}sQQ")
#: Size of every probe datagram, request or reply.
SIZE = _HEAD.size + MAC_BYTES
KIND_REQUEST = 1
KIND_REPLY = 2
#: Flag of a reply whose time field is the responder's hold time (ns), not the echoed send time.
FLAG_HELD = 0x01
#: Flag of a reply whose responder is flooded now: it refuses or drops datagrams beyond its budget.
FLAG_FLOODED = 0x02
#: Flag of a reply whose responder has an RDMA port down that carries one of its probed paths.
FLAG_RDMA_DOWN = 0x04
#: Label the probe key is derived under, so the key is never the token itself.
KEY_LABEL = b"rigmon latency probe key v1"

ProbeKind = Literal["request", "reply"]
_KINDS: dict[int, ProbeKind] = {KIND_REQUEST: "request", KIND_REPLY: "reply"}
_CODES = {v: k for k, v in _KINDS.items()}


class ProbeRefused(ValueError):
    """A datagram that is not a valid probe; ``reason`` is one of ``size``, ``magic``,
    ``version``, ``kind``, ``name``, ``mac``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe datagram's content.

    Attributes:
        kind: request or reply.
        sender: the node that sent this datagram.
        seq: sequence number of the prober's path, echoed in the reply.
        sent_at_ns: the prober's send time, Unix ns (0 in a reply that carries ``held_ns``).
        held_ns: replies only: nanoseconds the responder held the request, from its kernel's
            receive time to the reply's send; ``None`` when the reply does not say (an older
            responder, or a request).
        flooded: replies only: the responder said its probe port is flooded (`FLAG_FLOODED`).
        rdma_down: replies only: the responder said an RDMA port carrying one of its paths is down
            (`FLAG_RDMA_DOWN`).
    """

    kind: ProbeKind
    sender: str
    seq: int
    sent_at_ns: int
    held_ns: int | None = None
    flooded: bool = False
    rdma_down: bool = False


def derive_key(secret: str | bytes) -> bytes:
    """The probe key from the agent's read token or the ``key_file`` text (HMAC-SHA256 under `KEY_LABEL`).

    Raises:
        ValueError: an empty secret.
    """
    raw = secret.encode() if isinstance(secret, str) else secret
    raw = raw.strip()
    if not raw:
        raise ValueError("the probe key's secret is empty")
    return hmac.new(raw, KEY_LABEL, hashlib.sha256).digest()


def _mac(key: bytes, head: bytes) -> bytes:
    return hmac.new(key, head, hashlib.sha256).digest()[:MAC_BYTES]


def pack(probe: Probe, key: bytes) -> bytes:
    """The datagram of ``probe``, `SIZE` bytes.

    Raises:
        ValueError: the sender's name is empty or longer than `NAME_BYTES` in UTF-8, or a
            request carries ``held_ns``, ``flooded`` or ``rdma_down``.
    """
    name = probe.sender.encode()
    if not 0 < len(name) <= NAME_BYTES:
        raise ValueError(f"node name must be 1..{NAME_BYTES} bytes for probes, got {len(name)}")
    flags, time_field = 0, probe.sent_at_ns
    if probe.held_ns is not None:
        if probe.kind != "reply":
            raise ValueError("only a reply carries the responder's hold time")
        flags, time_field = FLAG_HELD, max(0, probe.held_ns)
    if probe.flooded:
        if probe.kind != "reply":
            raise ValueError("only a reply says its responder is flooded")
        flags |= FLAG_FLOODED
    if probe.rdma_down:
        if probe.kind != "reply":
            raise ValueError("only a reply says its responder has an RDMA port down")
        flags |= FLAG_RDMA_DOWN
    head = _HEAD.pack(MAGIC, VERSION, _CODES[probe.kind], len(name), flags, name,
                      probe.seq & 0xFFFF_FFFF_FFFF_FFFF, time_field & 0xFFFF_FFFF_FFFF_FFFF)
    return head + _mac(key, head)


def is_request(data: bytes) -> bool:
    """Whether ``data`` has a request's size, magic, version and kind: the checks that cost
    nothing, made before a source's budget is spent and before the MAC is computed."""
    return len(data) == SIZE and data[:4] == MAGIC and data[4] == VERSION and data[5] == KIND_REQUEST


def parse(data: bytes, key: bytes) -> Probe:
    """The probe in ``data``, checked: exact size, magic, version, kind, name and MAC.

    Raises:
        ProbeRefused: saying which check failed.
    """
    if len(data) != SIZE:
        raise ProbeRefused("size")
    head, mac = data[: _HEAD.size], data[_HEAD.size :]
    magic, version, kind, name_len, flags, name_raw, seq, time_field = _HEAD.unpack(head)
    if magic != MAGIC:
        raise ProbeRefused("magic")
    if version != VERSION:
        raise ProbeRefused("version")
    if kind not in _KINDS:
        raise ProbeRefused("kind")
    # Before decoding anything the sender chose: a forged datagram costs one HMAC and no more.
    if not hmac.compare_digest(mac, _mac(key, head)):
        raise ProbeRefused("mac")
    if not 0 < name_len <= NAME_BYTES or any(name_raw[name_len:]):
        raise ProbeRefused("name")
    try:
        sender = name_raw[:name_len].decode()
    except UnicodeDecodeError:
        raise ProbeRefused("name") from None
    if _KINDS[kind] != "reply":
        return Probe(_KINDS[kind], sender, seq, time_field)
    flooded = bool(flags & FLAG_FLOODED)
    rdma_down = bool(flags & FLAG_RDMA_DOWN)
    if flags & FLAG_HELD:
        return Probe("reply", sender, seq, 0, time_field, flooded, rdma_down)
    return Probe("reply", sender, seq, time_field, None, flooded, rdma_down)
