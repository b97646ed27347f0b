"""``rigmon snapshot``: pull agents and journals, render the report, write the bundle."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from rigmon.snapshot.bundle import NodePart, write_bundle
from rigmon.snapshot.gpus_gone import gone_gpu_text
from rigmon.snapshot.journal_part import read_journal
from rigmon.snapshot.progress import STEPS_PER_NODE, Progress
from rigmon.snapshot.pull import pull_agents
from rigmon.snapshot.report import render_report

_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """``90``, ``30s``, ``10m``, ``1h``, ``2d`` (or ``1h30m``) to seconds.

    Raises:
        ValueError: not a positive duration.
    """
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    else:
        pieces = re.findall(r"(\d+(?:\.\d+)?)([smhd])", text)
        if not pieces or "".join(n + u for n, u in pieces) != text:
            raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 10m, 1h, 2d)")
        seconds = sum(float(n) * _UNITS_S[u] for n, u in pieces)
    if seconds <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    return seconds


def pull_parts(urls: Sequence[str], journals: Sequence[str], since_s: float, token: str | None = None,
               stream: IO[str] | None = None, ca_file: str | None = None,
               token_from: str | None = None) -> list[NodePart]:
    """Pull every agent (concurrently) and read every journal; parts in the order given.

    ``ca_file`` verifies ``https://`` agents (default: the system's CA store). Progress goes
    to ``stream`` (default stderr). ``token_from``: where ``token`` was given (``--token-file
    /path``), which a refused token's sentence names.
    """
    progress = Progress(STEPS_PER_NODE * (len(urls) + len(journals)), stream if stream is not None else sys.stderr)
    parts: list[NodePart] = []
    if urls:
        parts += asyncio.run(pull_agents(urls, since_s, token, progress, ca_file, token_from))
    parts += [read_journal(j, since_s, progress) for j in journals]
    return parts


def write_snapshot(parts: Sequence[NodePart], since_s: float, output: str | Path) -> Path:
    """Render the report and write the bundle of ``parts``; returns its path."""
    created_at = time.time()
    report = render_report(list(parts), since_s, created_at)
    return write_bundle(output, list(parts), since_s, report, created_at)


def pulled_nothing(part: NodePart) -> bool:
    """Whether a node gave nothing at all (no identity, no frame): a bundle of it is empty."""
    return part.info is None and part.latest is None and part.frame_count == 0


def take_snapshot(urls: Sequence[str], journals: Sequence[str], since_s: float, output: str | Path,
                  token: str | None = None, stream: IO[str] | None = None,
                  ca_file: str | None = None) -> tuple[Path, list[NodePart]]:
    """Pull every agent and journal and write the bundle; returns its path and the parts.

    ``ca_file`` verifies ``https://`` agents (default: the system's CA store).
    """
    parts = pull_parts(urls, journals, since_s, token, stream, ca_file)
    return write_snapshot(parts, since_s, output), parts


def gpus_gone_lines(parts: Sequence[NodePart]) -> list[str]:
    """One line per GPU a node had within its journal's span and lacks now (plain text; names come from
    agents: the caller strips control characters)."""
    return [f"{part.node}: {gone_gpu_text(gpu)}" for part in parts for gpu in part.gpus_gone]


def summary_lines(parts: Sequence[NodePart]) -> list[str]:
    """What the command says of the bundle before its path: each GPU gone (`gpus_gone_lines`) and, read from a
    journal, each node whose last run did not stop cleanly (the crash a journal is read for), with its last
    frame and final seconds. Plain text; the caller strips control characters."""
    lines = [f"GPU gone: {line}" for line in gpus_gone_lines(parts)]
    lines += [f"Not stopped cleanly: {part.node}: {part.run_end}" for part in parts
              if part.run_clean is False and part.run_end is not None]
    return lines
