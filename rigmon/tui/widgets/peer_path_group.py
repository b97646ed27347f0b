"""PeerPathGroup: the node screen's box for its latency probes to peers (one line per peer and path)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text

from rigmon.cluster.incident import rtt
from rigmon.schema import Frame, PeerPathReading
from rigmon.summary import loss_figure
from rigmon.tui import format as fmt
from rigmon.tui.text import plain
from rigmon.tui.widgets.source_group import Column, Level, SourceGroup

#: How each path state is coloured (the agent judged it against its thresholds).
PATH_LEVELS: dict[str, Level | None] = {"ok": "ok", "degraded": "warn", "silent": "bad", "unknown": None}


def micros(value: float | None) -> str:
    """A round trip, ``—`` when no reply came in the window."""
    return fmt.MISSING if value is None else rtt(value)


def loss_text(loss_pct: float | None, limit_pct: float | None) -> str:
    """A window's loss on the same side of ``limit_pct`` as the loss itself (`rigmon.summary.loss_figure`:
    ``2.4%`` over a 2 % limit, ``1.6%`` under it, ``2%`` at it); ``—`` unknown."""
    return fmt.MISSING if loss_pct is None else loss_figure(loss_pct, limit_pct)


def path_state(path: PeerPathReading) -> str:
    """``ok``, ``degraded``, ``silent 12 s`` (since the last reply), ``unknown``; ``silent: key
    mismatch`` when the probe keys differ, and ``, peer flooded`` when its loss is suspect."""
    flood = ", peer flooded" if path.peer_flooded else ""
    if path.state == "silent" and path.key_mismatch:
        return "silent: key mismatch"
    if path.state == "silent" and path.last_reply_age_s is not None:
        return f"silent {path.last_reply_age_s:.0f} s{flood}"
    return path.state + flood


class PeerPathGroup(SourceGroup):
    """Every peer path the node probes: round trip p50/p99/max, jitter, loss, link speed, state."""

    TITLE: ClassVar[str] = "Peer paths"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("peer_probes",)

    def body(self, frame: Frame) -> RenderableType | None:
        paths = frame.readings.peer_paths
        if not paths:
            return None
        columns = (Column("peer"), Column("path"), Column("p50", True), Column("p99", True), Column("max", True),
                   Column("jitter", True, optional=True), Column("loss", True),
                   Column("link", True, optional=True, priority=1), Column("via", optional=True),
                   Column("state", wrap=True))
        rows: list[list[RenderableType]] = []
        for path in paths:
            level = PATH_LEVELS.get(path.state)
            loss = loss_text(path.loss_pct, path.loss_limit_pct)
            rows.append([
                plain(path.peer),
                plain(path.path + (" (tcp)" if path.transport == "tcp" else "")),
                micros(path.rtt_p50_us),
                # The figure over its limit is the one coloured (a path degraded by loss keeps a plain p99).
                self.styled(micros(path.rtt_p99_us), "warn" if path.p99_over_limit else None),
                micros(path.rtt_max_us),
                micros(path.jitter_us),
                self.styled(loss, "warn" if path.loss_over_limit else None),
                fmt.gbps(path.link_gbps),
                plain(path.interface),
                Text(path_state(path), style=self.style_of(level) if level else ""),
            ])
        return self.table(columns, rows)
