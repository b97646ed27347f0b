"""What a node whose pull failed says: why, once, and what the bundle lacks of it for that."""

from __future__ import annotations

from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.progress import Progress

#: The progress line of a node's steps that a failure left untaken: the reason itself is said once,
#: when every node is done (`failure_line`), not once for each step.
FAILED_STEPS = "failed (the reason follows at the end)"


def lacks(part: NodePart) -> str:
    """What the bundle lacks of a node whose pull stopped: ``nothing of it is in the bundle`` when
    it gave nothing, else ``the bundle lacks its ...`` (the parts it did not get)."""
    if part.info is None and part.latest is None and part.history is None and not part.frames_gz:
        return "nothing of it is in the bundle"
    missing = []
    if part.pulled_at is None and not part.source.startswith("journal:"):
        missing.append("its capture (configuration, latest frame, raw files)")
    if part.history is None:
        missing.append("its history (series and events)")
    if not part.frames_gz:
        missing.append("its frames")
    if not missing:
        return "the bundle holds what was pulled before"
    listed = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + " and " + missing[-1]
    return f"the bundle lacks {listed}"


def pull_failed(part: NodePart, why: str, progress: Progress | None, steps_left: int) -> NodePart:
    """Record on ``part`` why its pull stopped and what the bundle lacks for it; the ``steps_left``
    steps it could not take are one progress line, without the reason (said once, at the end)."""
    part.error = f"{why}; {lacks(part)}"
    if progress is not None:
        progress.skip(part.node, steps_left, FAILED_STEPS)
    return part


def failure_line(part: NodePart) -> str:
    """A failed node as the command names it: the agent's name and its address (the address alone
    when the agent never said its name), then why it failed and what the bundle lacks."""
    where = part.node if part.node == part.source else f"{part.node} ({part.source})"
    return f"{where}: {part.error}"
