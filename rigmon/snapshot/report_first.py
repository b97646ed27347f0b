"""REPORT.md's first sections, what a maintainer reads before the nodes' tables: the GPUs each node had within its
journal's span and lacks now (`gpus_gone`), the links that flapped between frames (`link_flaps`), and the alarms
firing on each node (`firing_section`): in a bundle of several nodes, each node's own section comes screens down."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.gpus_gone import gone_gpu_text
from rigmon.snapshot.link_flaps import link_flaps, link_flaps_text
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


def link_flaps_section(parts: Sequence[NodePart]) -> list[str]:
    """``## Link flaps`` and a list item per link whose carrier counter rose within its node's window; no lines
    when none did. A link down for less than a frame interval is read up in every frame and raises no event:
    its counter is all a snapshot taken between flaps holds of it."""
    items = [f"- **{md_text(part.node)}** {md_text(link_flaps_text(flaps))}"
             for part in parts if part.history is not None for flaps in link_flaps(part.history)]
    if not items:
        return []
    return ["## Link flaps", "",
            ("Carrier changes counted within the window (a link that went down and came back between two frames "
             "reads up in every frame; its counter is what says it flapped):"), "", *items, ""]


#: Severities in the order `firing_section` lists them.
_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
#: Alarms `firing_section` lists per node (the node's section lists them all).
MAX_FIRING_LISTED = 8


def firing_section(parts: Sequence[NodePart]) -> list[str]:
    """``## Alarms firing``: per node, its firing alarms (critical first, then the oldest), one line each; no lines
    when none fires. Those an agent answered at the pull, or read from a journal, when it last saved them."""
    lines: list[str] = []
    for part in parts:
        firing = sorted((a for a in part.alarms or () if a.state == "firing"),
                        key=lambda a: (_SEVERITY_ORDER.get(a.severity, 3), a.started_at))
        for a in firing[:MAX_FIRING_LISTED]:
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(a.started_at))
            lines.append(f"- **{md_text(part.node)}** {md_text(a.severity)} {md_text(a.rule)} on "
                         f"{md_text(a.subject)} since {since} UTC: {md_text(a.message)}")
        if len(firing) > MAX_FIRING_LISTED:
            lines.append(f"- **{md_text(part.node)}**: {len(firing) - MAX_FIRING_LISTED} more (see its section)")
    if not lines:
        return []
    return ["## Alarms firing", "", ("When each node was pulled (read from a journal: when its agent last saved "
                                    "them):"), "", *lines, ""]


#: Seconds a node's clock may be off this machine's before the report says so (a capture's own time and
#: its arrival are some tenths of a second apart on a loaded agent).
CLOCK_OFF_SAID_S = 2.0


def clock_lines(parts: Sequence[NodePart]) -> list[str]:
    """A sentence per node whose clock was off this machine's when it was pulled by `CLOCK_OFF_SAID_S` or more:
    each node's times in the report are its own clock's, and comparing two nodes' events needs the difference."""
    lines = []
    for part in parts:
        if part.pulled_at is None or part.agent_now_at is None:
            continue
        off_s = part.agent_now_at - part.pulled_at
        if abs(off_s) >= CLOCK_OFF_SAID_S:
            lines.append(f"- **{md_text(part.node)}**'s clock was {abs(off_s):.1f} s "
                         f"{'ahead of' if off_s > 0 else 'behind'} this machine's when it was pulled.")
    if not lines:
        return []
    return ["", "Each node's times are by its own clock:", "", *lines]
