"""Frames of a four-node tensor-parallel cluster whose agents probe each other (issue 21's story).

Every node probes every other over ``roce`` (100 GbE RDMA-class, single-digit microseconds)
and ``mgmt`` (the management network, UDP, hundreds of microseconds); node01 and node02 are
also joined by USB4 (``tbnet``, 40 Gb/s). From frame `SILENT_FROM` the tbnet link locks up:
both ends' probes go unanswered while the agents' HTTP keeps answering. node03's ``roce``
path to node04 is slow all along (p99 1.84 ms, 2 % loss: degraded). Deterministic, host-only
frames otherwise (`make_frame`).
"""

from __future__ import annotations

import random

from msgspec.structs import replace

from rigmon.schema import CollectorStatus, Frame, PeerPathReading
from tests.tui.snapshot_apps.fake_agent import make_frame

NODES = ("node01", "node02", "node03", "node04")
#: Frames per node.
FRAMES = 30
#: First frame in which the tbnet path between node01 and node02 is silent.
SILENT_FROM = 18
#: Seconds one probe window covers.
WINDOW_S = 5.0
#: Probes per window at 10 Hz.
SENT = 50


def _path(node: str, peer: str, path: str, seq: int, rng: random.Random) -> PeerPathReading:
    name = f"{peer}/{path}"
    link = {"roce": 100.0, "tbnet": 40.0, "mgmt": 2.5}[path]
    interface = {"roce": "enp1s0f0np0", "tbnet": "thunderbolt0", "mgmt": "eno1"}[path]
    address = f"10.{ {'roce': 100, 'tbnet': 40, 'mgmt': 1}[path] }.0.{NODES.index(peer) + 1}"
    common = dict(name=name, peer=peer, path=path, address=address, window_s=WINDOW_S, sent=SENT,
                  interface=interface, link_gbps=link, sent_total=SENT * seq)
    if path == "tbnet" and seq >= SILENT_FROM:
        age = float(seq - SILENT_FROM + 1)
        return PeerPathReading(**common, state="silent", received=0, loss_pct=100.0,  # type: ignore[arg-type]
                               last_reply_age_s=age, received_total=SENT * (SILENT_FROM - 1))
    base = {"roce": 6.0, "tbnet": 62.0, "mgmt": 240.0}[path]
    slow = node == "node03" and peer == "node04" and path == "roce"
    p50 = base * (1 + 0.1 * rng.random()) if not slow else 310.0 + 20 * rng.random()
    p99 = p50 * (1.6 + 0.2 * rng.random()) if not slow else 1840.0
    loss = 2.0 if slow else 0.0
    received = SENT - (1 if slow else 0)
    return PeerPathReading(**common, state="degraded" if slow else "ok",  # type: ignore[arg-type]
                           p99_limit_us=1000.0, p99_over_limit=slow, received=received, loss_pct=loss, rtt_p50_us=round(p50, 1), rtt_p99_us=round(p99, 1),
                           rtt_max_us=round(p99 * 1.3, 1), jitter_us=round(p50 * 0.08, 1), last_reply_age_s=0.1,
                           received_total=received * seq)


def paths_of(node: str, seq: int, rng: random.Random) -> tuple[PeerPathReading, ...]:
    """The peer paths ``node`` reports in frame ``seq``."""
    out = []
    for path in ("roce", "tbnet", "mgmt"):
        for peer in NODES:
            if peer == node or (path == "tbnet" and {node, peer} != {"node01", "node02"}):
                continue
            out.append(_path(node, peer, path, seq, rng))
    return tuple(out)


def cluster_frames(node: str, count: int = FRAMES) -> list[Frame]:
    """``count`` frames of ``node``, each with its probes' readings and collector status."""
    rng = random.Random(f"{node}-21")
    frames = []
    for seq in range(1, count + 1):
        frame = make_frame(node, f"run-{node}", seq, rng)
        status = CollectorStatus(state="ok", ok=True, duration_s=0.0002, sampled_at=frame.taken_at)
        frames.append(replace(frame, collectors={**frame.collectors, "peer_probes": status},
                              readings=replace(frame.readings, peer_paths=paths_of(node, seq, rng))))
    return frames


def fleet_nodes(count: int = FRAMES) -> list[tuple[str, list[Frame], int]]:
    """``(name, frames, frames held)`` of every node, for `tests.tui.snapshot_apps.recorded.build`."""
    return [(node, cluster_frames(node, count), count) for node in NODES]
