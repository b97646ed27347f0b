"""A deterministic snapshot bundle: three fake nodes, an alarm that fires and resolves, a node that goes silent."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from msgspec.structs import replace

from rigmon.schema import Event, Frame
from rigmon.snapshot.bundle import NodePart, frames_gzip, write_bundle
from tests.tui.snapshot_apps.fake_agent import START_AT, FakeAgent, make_frame

#: Frames recorded per node (one a second from START_AT + 1).
FRAMES = 120
#: node03's last frame: after it, the recording shows it stale.
SILENT_AFTER = 90
#: node02's rail alarm: fires at this seq, resolves at the second.
ALARM_FIRES, ALARM_RESOLVES = 40, 70
#: node02's GPU is lost here and stays lost.
GPU_LOST_AT = 100


def alarm_event(node: str, seq: int, n: int, kind: str, rule: str, severity: str, subject: str,
                text: str) -> Event:
    """The ``alarm_*`` event of ``node``'s alarm ``n`` in its frame ``seq``, as an agent emits it."""
    change = kind.removeprefix("alarm_")
    return Event(id=f"{node}-run1-e{n}", at=START_AT + seq, kind=kind,
                 severity=severity if change == "firing" else "info",  # type: ignore[arg-type]
                 subject=subject, message=f"{rule} {change}: {text}",
                 data={"alarm_id": f"{node}-run1-a{n}", "rule": rule, "severity": severity, "state": change,
                       "value": None})


def node_frames(node: str) -> list[Frame]:
    """The recorded frames of one node, with node02's alarm events in them."""
    rng = random.Random(f"{node}:bundle")
    last = SILENT_AFTER if node == "node03" else FRAMES
    frames = [make_frame(node, f"{node}-run1", seq, rng) for seq in range(1, last + 1)]
    if node == "node02":
        extra = {
            ALARM_FIRES: alarm_event(node, ALARM_FIRES, 1, "alarm_firing", "psu_rail_low_critical", "critical",
                                     "psu", "12 V rail minimum 11.38 V is below 11.5 V"),
            ALARM_RESOLVES: alarm_event(node, ALARM_RESOLVES, 1, "alarm_resolved", "psu_rail_low_critical",
                                        "critical", "psu", "12 V rail minimum 11.38 V is below 11.5 V"),
            GPU_LOST_AT: alarm_event(node, GPU_LOST_AT, 2, "alarm_firing", "gpu_lost", "critical", "gpu:3",
                                     "gpus[3].state is lost"),
        }
        frames = [replace(f, events=f.events + ((extra[f.seq],) if f.seq in extra else ())) for f in frames]
    return frames


def write_fake_bundle(path: Path, frames_of: Callable[[str], list[Frame]] = node_frames) -> Path:
    """Write the bundle (fixed creation time) and return its path; ``frames_of``: each node's frames
    (`node_frames`, or those with more in them)."""
    parts = []
    for node in ("node01", "node02", "node03"):
        frames = frames_of(node)
        parts.append(NodePart(node=node, source=FakeAgent(node).url, from_at=frames[0].taken_at,
                              to_at=frames[-1].taken_at, info=FakeAgent(node).info(), latest=frames[-1],
                              frames_gz=frames_gzip(frames), frame_count=len(frames)))
    return write_bundle(path, parts, 600.0, "# rigmon snapshot\n", created_at=START_AT + FRAMES + 5)
