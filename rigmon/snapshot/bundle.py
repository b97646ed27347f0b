"""Bug-report bundles: one .tar.gz with a manifest, each node's inventory, config, series, events,
frames (wire JSON lines, replayable) and raw captures, plus REPORT.md.

Layout (``<top>`` is ``rigmon-snapshot-YYYYmmdd-HHMMSS``)::

    <top>/manifest.json
    <top>/REPORT.md
    <top>/nodes/<node>/info.json         /v1/info at capture time
    <top>/nodes/<node>/inventory.json    what the node is made of: the facts of the latest frame's records
                                         (models, serials, firmware, maximum link widths), no readings; a
                                         device's from the newest frame that read them (a GPU lost since);
                                         ``gpus_gone``: the GPUs of the journal's span the latest frame lacks
    <top>/nodes/<node>/config.json       the agent configuration, secrets redacted
    <top>/nodes/<node>/latest.json       the latest frame
    <top>/nodes/<node>/series.json       /v1/history of the window (min/mean/max per series)
    <top>/nodes/<node>/events.jsonl      one wire Event per line
    <top>/nodes/<node>/frames.jsonl.gz   one wire Frame per line, oldest first (gzip, as the agent sent it
                                         but for older agents' command lines, redacted; format 1 had
                                         frames.jsonl)
    <top>/nodes/<node>/captures/...      raw files by their path on the node (proc/mdstat, sys/...)
    <top>/nodes/<node>/captures/ERRORS.txt  what could not be captured
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import tarfile
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from rigmon import __version__
from rigmon.agent.journal import encode_history
from rigmon.schema import Alarm, Event, Frame, History, Info, encode
# The reading side, imported from here by its callers (it lived here before it had a module of its own).
from rigmon.snapshot.bundle_read import Bundle as Bundle
from rigmon.snapshot.bundle_read import BundleError as BundleError
from rigmon.snapshot.bundle_read import NodeBundle as NodeBundle
from rigmon.snapshot.bundle_read import read_bundle as read_bundle
from rigmon.snapshot.gpus_gone import GoneGpu, gone_gpu_data
from rigmon.snapshot.inventory import inventory
from rigmon.snapshot.redact_frames import redact_events, redact_frames_gz, redact_json_line
from rigmon.typed import to_data

BUNDLE_FORMAT = 2


@dataclass
class NodePart:
    """Everything pulled from one node (agent or journal) for a bundle.

    Attributes:
        node: node name.
        source: the agent URL or journal path it came from.
        from_at: window start, Unix seconds on the node's clock.
        to_at: window end.
        info: /v1/info (or the journal's record of it).
        config: redacted configuration as TOML keys.
        latest: the newest frame.
        files: raw captures by path on the node.
        capture_errors: what the node could not capture.
        history: series and events of the window.
        history_json: ``history`` as the agent sent it (stored as is).
        frames_gz: the window's frames as gzip (one or more members) of wire JSON lines.
        frame_count: how many frames ``frames_gz`` holds.
        error: why part of the pull failed, if it did.
        alarms: the agent's active alarms when it was pulled (``None``: not asked, or not known); read
            from a journal, those firing when its agent last saved its alarm state (``alarms_saved_at``).
        alarms_saved_at: when the alarms read from a journal's state directory were saved (the node's
            clock); ``None`` for alarms an agent answered at the pull.
        pulled_at: this machine's clock (Unix s) when the agent's capture (``/v1/snapshot``) came in.
        agent_now_at: the agent's own clock in that capture (its ``taken_at``): with ``pulled_at``, how
            far the node's clock was off this machine's, and until when the node was watched (a
            replay judges each node's staleness by these). ``None`` both when not pulled from a
            running agent (a journal) or by an older rigmon.
        run_end: read from a journal, how the last run it recorded ended (stopped cleanly, or not and
            its last frame); ``None`` for an agent pulled while it runs.
        run_clean: read from a journal, whether that run stopped cleanly (``run_end`` for programs: a
            replay says so at its last frame); ``None`` for an agent pulled while it runs.
        gpus_gone: the GPUs the node had within its journal's span and does not have on the bus in ``latest``
            (`rigmon.snapshot.gpus_gone`), oldest index first.
        gpus_gone_from_at: where that span begins (the node's clock); ``None`` when it was not examined.
    """

    node: str
    source: str
    from_at: float | None = None
    to_at: float | None = None
    info: Info | None = None
    config: dict[str, Any] | None = None
    latest: Frame | None = None
    files: dict[str, str] = field(default_factory=dict)
    capture_errors: list[str] = field(default_factory=list)
    history: History | None = None
    history_json: bytes | None = None
    frames_gz: bytes = b""
    frame_count: int = 0
    error: str | None = None
    alarms: tuple[Alarm, ...] | None = None
    alarms_saved_at: float | None = None
    pulled_at: float | None = None
    agent_now_at: float | None = None
    run_end: str | None = None
    run_clean: bool | None = None
    gpus_gone: list[GoneGpu] = field(default_factory=list)
    gpus_gone_from_at: float | None = None

    def frame_lines(self) -> list[bytes]:
        """The frames as wire JSON, one per entry (decompressed: for tests and small windows)."""
        return gzip.decompress(self.frames_gz).splitlines() if self.frames_gz else []

    @property
    def events(self) -> tuple[Event, ...]:
        """Events of the window (an older agent's GPU process command lines redacted: `redact_events`)."""
        return redact_events(self.history.events) if self.history is not None else ()


def frames_gzip(frames: Sequence[Frame]) -> bytes:
    """Frames as `NodePart.frames_gz` wants them: one gzip member of wire JSON lines."""
    return gzip.compress(b"".join(encode(f) + b"\n" for f in frames)) if frames else b""


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "node"


def node_dirs(parts: list[NodePart]) -> list[str]:
    """A distinct directory name per node (a name seen twice gets ``-2``, ``-3``...)."""
    seen: dict[str, int] = {}
    out: list[str] = []
    for part in parts:
        base = _safe_name(part.node)
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return out


def manifest(parts: list[NodePart], since_s: float, created_at: float) -> dict[str, Any]:
    """The bundle's manifest: format, when, which nodes and what each holds, and when each was pulled
    (``pulled_at`` by this machine's clock, ``agent_now_at`` by the node's; additive to format 2:
    absent from older bundles, ``null`` for a journal's node)."""
    return {
        "format": BUNDLE_FORMAT,
        "created_at": created_at,
        "created_by": f"rigmon {__version__}",
        "since_s": since_s,
        "nodes": [
            {
                "node": part.node,
                "dir": f"nodes/{d}",
                "source": part.source,
                "from_at": part.from_at,
                "to_at": part.to_at,
                "run_id": part.info.run_id if part.info else None,
                "frames": part.frame_count,
                "events": len(part.events),
                "series": len(part.history.series) if part.history else 0,
                "tier": part.history.tier if part.history else None,
                "captures": len(part.files),
                "error": part.error,
                "pulled_at": part.pulled_at,
                "agent_now_at": part.agent_now_at,
                "run_end": part.run_end,
                "run_clean": part.run_clean,
                "gpus_gone": len(part.gpus_gone),
            }
            for part, d in zip(parts, node_dirs(parts))
        ],
    }


def _json_bytes(data: Any) -> bytes:
    return json.dumps(data, indent=1, sort_keys=False).encode() + b"\n"


def bundle_members(parts: list[NodePart], since_s: float, report: str,
                   created_at: float) -> Iterator[tuple[str, bytes]]:
    """Every file of the bundle as (path below the top directory, content)."""
    yield "manifest.json", _json_bytes(manifest(parts, since_s, created_at))
    yield "REPORT.md", report.encode()
    for part, d in zip(parts, node_dirs(parts)):
        base = f"nodes/{d}"
        yield f"{base}/info.json", _json_bytes(to_data(part.info) if part.info else None)
        inv = inventory(part.info, part.latest, part.frames_gz)
        if part.gpus_gone_from_at is not None:
            # What the node had within its journal's span and lacks now: the GPU that fell off the bus
            # before the window or an agent restart is in none of its frames.
            inv["gpus_gone"] = [gone_gpu_data(g) for g in part.gpus_gone]
            inv["gpus_gone_since"] = part.gpus_gone_from_at
        yield f"{base}/inventory.json", _json_bytes(inv)
        yield f"{base}/config.json", _json_bytes(part.config)
        # Frames and events of older agents hold their GPU processes' command lines whole: redacted here.
        yield f"{base}/latest.json", redact_json_line(encode(part.latest) + b"\n") if part.latest else b"null\n"
        if part.history is not None:
            yield f"{base}/series.json", (part.history_json or encode_history(part.history)) + b"\n"
        yield f"{base}/events.jsonl", redact_json_line(b"".join(encode(e) + b"\n" for e in part.events))
        # Stored as received: an hour of a large rig is hundreds of MB of JSON, compressed once
        # by the agent's journal; the tar's own gzip gains nothing on it. Only a member holding a
        # command line to redact (an older agent's) is compressed again.
        yield f"{base}/frames.jsonl.gz", redact_frames_gz(part.frames_gz)
        for path, text in sorted(part.files.items()):
            yield f"{base}/captures/{_capture_path(path)}", text.encode()
        errors = list(part.capture_errors) + ([f"pull: {part.error}"] if part.error else [])
        if errors:
            yield f"{base}/captures/ERRORS.txt", ("\n".join(errors) + "\n").encode()


def _capture_path(path: str) -> str:
    # "/proc/mdstat" -> "proc/mdstat"; "collector:kmsg/kernel-log.txt" -> "collector-kmsg/kernel-log.txt"
    clean = path.lstrip("/").replace(":", "-")
    return "/".join(p for p in clean.split("/") if p not in ("", ".", ".."))


class _GzipMembers:
    """A file object writing gzip members: each at its own deflate level, one after another.

    A .tar.gz made of several members is one valid gzip stream (RFC 1952): ``tar xzf``,
    ``zcat`` and Python's `tarfile` read it as usual. It lets the frames, which arrive
    compressed, pass at level 0 (a copy and a CRC) while the rest is compressed.
    """

    def __init__(self, fileobj: BinaryIO, level: int) -> None:
        self._out = fileobj
        self._level = level
        self._comp = zlib.compressobj(level, zlib.DEFLATED, 31)

    def write(self, data: bytes) -> int:
        self._out.write(self._comp.compress(data))
        return len(data)

    def set_level(self, level: int) -> None:
        """End the current member and start the next one at ``level``."""
        if level != self._level:
            self._out.write(self._comp.flush())
            self._comp = zlib.compressobj(level, zlib.DEFLATED, 31)
            self._level = level

    def close(self) -> None:
        self._out.write(self._comp.flush())


#: Deflate level of the bundle's members other than the frames (JSON, text, captures).
BUNDLE_LEVEL = 6


def write_bundle(path: str | Path, parts: list[NodePart], since_s: float, report: str,
                 created_at: float | None = None) -> Path:
    """Write the bundle as a .tar.gz and return its path.

    It is written under a temporary name beside ``path`` and renamed when complete, so a full
    disk never leaves a cut bundle (that reads as a bug report but ends in the middle).

    Raises:
        OSError: it cannot be written (no such directory, no space left); nothing is left behind.
    """
    created_at = time.time() if created_at is None else created_at
    top = "rigmon-snapshot-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime(created_at))
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        _write_tar(partial, parts, since_s, report, created_at, top)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return target


def _write_tar(target: Path, parts: list[NodePart], since_s: float, report: str, created_at: float,
               top: str) -> None:
    # Private to its owner (0600, whatever the umask): a bundle holds host names, command lines
    # and the agents' configuration; sharing it is the operator's decision.
    with os.fdopen(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600), "wb") as raw:
        gz = _GzipMembers(raw, BUNDLE_LEVEL)
        # Plain tar over our own gzip writer (streaming mode: no seeking back).
        with tarfile.open(fileobj=gz, mode="w|") as tar:  # type: ignore[call-overload]
            for name, content in bundle_members(parts, since_s, report, created_at):
                # The frames (most of the bytes) are gzip already: store them, don't deflate again.
                gz.set_level(0 if name.endswith(".gz") else BUNDLE_LEVEL)
                member = tarfile.TarInfo(f"{top}/{name}")
                member.size = len(content)
                member.mtime = int(created_at)
                member.mode = 0o644
                tar.addfile(member, io.BytesIO(content))
            gz.set_level(BUNDLE_LEVEL)
        gz.close()
