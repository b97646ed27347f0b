"""The dashboard's export: a `rigmon snapshot` bundle of the followed nodes (or of a replay up to its cursor).

The pulling, the report and the bundle format are `rigmon.snapshot`'s; this module only
chooses the file names and builds the node parts of a replay. The SVG screenshot that goes
next to the bundle is the UI's business.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from msgspec.structs import replace

from rigmon.cluster.agent_answers import TOKEN_WHERE
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.replay import Replay
from rigmon.snapshot.bundle import NodePart, frames_gzip, write_bundle
from rigmon.snapshot.pull import HTTP_TIMEOUT_S, pull_agent
from rigmon.snapshot.report import render_report

#: Window of history a live export pulls from each agent.
EXPORT_SINCE_S = 3600.0


@dataclass(frozen=True, slots=True)
class ExportPaths:
    """Where one export goes: the bundle and the screenshot, with the same stem."""

    bundle: Path
    screenshot: Path


def export_paths(directory: str | Path, created_at: float) -> ExportPaths:
    """``rigmon-dash-YYYYmmdd-HHMMSS.tar.gz`` and ``.svg`` in ``directory`` (UTC time); when an
    export of that second is there already, ``...-HHMMSS-2``, ``-3``..., so a second export in
    the same second never replaces the first."""
    stem = "rigmon-dash-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime(created_at))
    base = Path(directory).expanduser()
    name, n = stem, 1
    while (base / f"{name}.tar.gz").exists() or (base / f"{name}.svg").exists():
        n += 1
        name = f"{stem}-{n}"
    return ExportPaths(base / f"{name}.tar.gz", base / f"{name}.svg")


async def pull_targets(targets: Sequence[NodeTarget], since_s: float = EXPORT_SINCE_S,
                       note: Callable[[str, str], None] | None = None) -> list[NodePart]:
    """Pull every agent concurrently, each with its own read token and CA file (parts in ``targets`` order).

    An agent busy with other exports (503 with ``Retry-After``) is asked again after the wait it
    gives, a few times (`rigmon.snapshot.pull.EXPORT_RETRIES`); ``note`` (node, text) hears of each wait.
    """

    async def one(target: NodeTarget) -> NodePart:
        headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
        # The node's own CA, as the live connection uses: an export must not fail (or trust
        # less) where following the node works.
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=target.ca_file) if target.ca_file else True
        async with httpx.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT_S, verify=verify) as client:
            # A 401 without a token names where the dashboard takes one, as the live stream's does.
            return await pull_agent(client, target.url, since_s, note=note, token_from=target.token_from,
                                    token_where=target.token_where or TOKEN_WHERE)

    return list(await asyncio.gather(*(one(t) for t in targets)))


def replay_parts(replay: Replay) -> list[NodePart]:
    """The replayed nodes as bundle parts, their frames and events cut at the cursor (the
    series stay those of the whole recording). A node whose pull the bundle dates is pulled at
    the cursor (or at its own pull, when that came first), its clock as far off as it was, so
    the export replays as the recording does."""
    parts: list[NodePart] = []
    entries = replay.bundle.manifest.get("nodes") or []
    for index, (key, node) in enumerate(zip(replay.keys, replay.bundle.nodes)):
        frames = replay.frames_until(key)
        entry = entries[index] if index < len(entries) and isinstance(entries[index], dict) else {}
        history = node.history
        if history is not None:
            # Event times are the node's clock.
            history = replace(history, events=tuple(e for e in history.events if e.at <= replay.node_time(key)))
        clock = replay.clock_of(key)
        pulled_at = None if clock.watched_until is None else min(replay.at, clock.watched_until)
        part = NodePart(node=node.node, source=f"replay:{replay.source}",
                        from_at=frames[0].taken_at if frames else None,
                        to_at=frames[-1].taken_at if frames else None,
                        info=node.info, config=node.config if isinstance(node.config, dict) else None,
                        latest=frames[-1] if frames else None, files=dict(node.files),
                        history=history, frames_gz=frames_gzip(frames), frame_count=len(frames),
                        # A node the recording could not pull stays one in the export of its replay.
                        error=str(entry["error"]) if entry.get("error") else None, pulled_at=pulled_at,
                        agent_now_at=None if pulled_at is None else clock.node_time(pulled_at))
        parts.append(part)
    return parts


#: Mode of the export directory when the export creates it, and of the files it writes: a bundle
#: holds host names, command lines and configuration (see SECURITY.md), the screenshot what the
#: screen showed; they are the operator's to hand over, not every local user's to read.
EXPORT_DIR_MODE = 0o700
EXPORT_FILE_MODE = 0o600


def make_export_dir(directory: Path) -> None:
    """Create ``directory`` (mode `EXPORT_DIR_MODE`) if it is not there; an existing one keeps its mode.

    Raises:
        OSError: it cannot be created.
    """
    directory.mkdir(mode=EXPORT_DIR_MODE, parents=True, exist_ok=True)


def write_export(parts: list[NodePart], since_s: float, path: str | Path, created_at: float) -> Path:
    """Render the report and write the bundle, private to its owner (blocking: run it off the UI's loop)."""
    make_export_dir(Path(path).parent)
    report = render_report(parts, since_s, created_at)
    written = write_bundle(path, parts, since_s, report, created_at)
    written.chmod(EXPORT_FILE_MODE)
    return written
