"""The probe datagram: pack and parse, with its HMAC; pure functions, no I/O.

Layout (big-endian, always `SIZE` bytes)::

    0   4  magic b"RGMP"
    4   1  version (1)
    5   1  kind (1 request, 2 reply)
    6   1  length of the sender's node name in bytes (1..64)
    7   1  reserved, 0
    8  64  sender's node name, UTF-8, zero padded
   72   8  sequence number (per sending path)
   80   8  send time, Unix nanoseconds of the prober's wall clock (echoed in the reply)
   88  16  HMAC-SHA256 of bytes 0..87 under the probe key, truncated to 128 bits

A reply is the request with kind, name and MAC replaced: the same size, never larger.
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
_HEAD = struct.Struct(f">4sBBBx{NAME_BYTES}sQQ")
#: Size of every probe datagram, request or reply.
SIZE = _HEAD.size + MAC_BYTES
KIND_REQUEST = 1
KIND_REPLY = 2
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
    """One probe datagram's content."""

    kind: ProbeKind
    sender: str
    seq: int
    sent_at_ns: int


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
        ValueError: the sender's name is empty or longer than `NAME_BYTES` in UTF-8.
    """
    name = probe.sender.encode()
    if not 0 < len(name) <= NAME_BYTES:
        raise ValueError(f"node name must be 1..{NAME_BYTES} bytes for probes, got {len(name)}")
    head = _HEAD.pack(MAGIC, VERSION, _CODES[probe.kind], len(name), name, probe.seq & 0xFFFF_FFFF_FFFF_FFFF,
                      probe.sent_at_ns & 0xFFFF_FFFF_FFFF_FFFF)
    return head + _mac(key, head)


def parse(data: bytes, key: bytes) -> Probe:
    """The probe in ``data``, checked: exact size, magic, version, kind, name and MAC.

    Raises:
        ProbeRefused: saying which check failed.
    """
    if len(data) != SIZE:
        raise ProbeRefused("size")
    head, mac = data[: _HEAD.size], data[_HEAD.size :]
    magic, version, kind, name_len, name_raw, seq, sent_at_ns = _HEAD.unpack(head)
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
    return Probe(_KINDS[kind], sender, seq, sent_at_ns)
