"""ReplayBar: the time cursor of a replay (where, how far, playing or paused, speed); hidden when live."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.cluster.replay import ReplayPosition
from rigmon.tui.text import plain


#: Cells the bar of the time cursor takes at least.
MIN_BAR_CELLS = 10


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


class ReplayBar(Widget):
    """``▶ replay bug.tar.gz  2026-01-01 00:02:15 UTC  ━━━━━●──────  +135 s / 300 s  x2``.

    Shown only while `position` is set (the app is replaying a bundle).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "replay-bar--label",
        "replay-bar--played",
        "replay-bar--ahead",
        "replay-bar--cursor",
    }
    DEFAULT_CSS = """
    ReplayBar {
        height: 1;
        display: none;
    }
    ReplayBar.-replaying {
        display: block;
    }
    """

    class Moved(Message):
        """The replay's position changed (its cursor, play or pause, speed): for a screen whose
        view follows the cursor (the history view's chart)."""

        def __init__(self, position: ReplayPosition) -> None:
            super().__init__()
            self.position = position

    position: reactive[ReplayPosition | None] = reactive(None)
    """Where the replay stands; ``None`` for live data."""

    def watch_position(self, position: ReplayPosition | None) -> None:
        self.set_class(position is not None, "-replaying")
        if position is not None:
            self.post_message(self.Moved(position))

    def _style(self, name: str) -> str:
        return str(self.get_component_rich_style(f"replay-bar--{name}", partial=True))

    def render(self) -> RenderableType:
        pos = self.position
        if pos is None:
            return ""
        label = self._style("label")
        right = f"  +{pos.at - pos.start_at:.0f} s / {pos.end_at - pos.start_at:.0f} s  x{pos.speed:g}"
        # Where the line is short (80 columns and an export's long file name), the file name
        # goes first, then the date: the position and the speed the keys change stay in sight.
        source = plain(f"replay {pos.source}  " if pos.source else "replay  ", label)
        stamp = f"{_stamp(pos.at)} UTC  "
        if 2 + source.cell_len + len(stamp) + MIN_BAR_CELLS + len(right) > self.size.width:
            source = plain("replay  ", label)
            if 2 + source.cell_len + len(stamp) + MIN_BAR_CELLS + len(right) > self.size.width:
                stamp = f"{time.strftime('%H:%M:%S', time.gmtime(pos.at))} UTC  "
        text = Text()
        text.append("▶ " if pos.playing else "⏸ ", style=self._style("cursor"))
        text.append_text(source)
        text.append(stamp)
        width = max(MIN_BAR_CELLS, self.size.width - text.cell_len - len(right))
        played = round(pos.fraction * (width - 1))
        text.append("━" * played, style=self._style("played"))
        text.append("●", style=self._style("cursor"))
        text.append("─" * (width - 1 - played), style=self._style("ahead"))
        text.append(right, style=label)
        return text
