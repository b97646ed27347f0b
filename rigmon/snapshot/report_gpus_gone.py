"""REPORT.md's first section: the GPUs each node had within its journal's span and lacks now (`gpus_gone`)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.gpus_gone import gone_gpu_text
from rigmon.snapshot.report_text import md_text


def gpus_gone_section(parts: Sequence[NodePart]) -> list[str]:
    """``## GPUs gone`` and a list item per gone GPU of each node; no lines when no node lacks one.

    First in the report: a node whose GPU fell off the bus before the window (or before the agent restarted)
    holds that GPU in none of its frames, and reads as a healthy node with fewer GPUs further down.
    """
    lines: list[str] = []
    for part in parts:
        if not part.gpus_gone:
            continue
        since = part.gpus_gone_from_at
        when = "" if since is None else \
            f" (its journal examined from {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(since))} UTC)"
        count = len(part.gpus_gone)
        lines += [(f"Node **{md_text(part.node)}** had {count} GPU{'' if count == 1 else 's'} "
                   f"it does not have on the bus now{when}:"), ""]
        lines += [f"- {md_text(gone_gpu_text(gpu))}" for gpu in part.gpus_gone]
        lines.append("")
    return ["## GPUs gone", "", *lines] if lines else []
