"""When the dashboard redraws: frames of many nodes arriving together share one redraw, first frames one refresh."""

from __future__ import annotations

from collections.abc import Callable

#: Longest wait between a node's new frame and the redraw showing it: frames of many nodes
#: arriving together share one redraw, and only the rows whose node changed are drawn again.
FRAME_REDRAW_S = 0.1


class Redraws:
    """Coalesces redraws and refreshes asked for in quick succession.

    Args:
        set_timer: the app's ``set_timer`` (``delay_s, callback``).
        refresh: runs the cluster rules and draws the current screen (the app's ``refresh_screen``).
        redraw: draws the current screen for new frames of the nodes given (the cluster rules
            stay on the refresh timer).
    """

    def __init__(self, set_timer: Callable[[float, Callable[[], None]], object], refresh: Callable[[], None],
                 redraw: Callable[[set[str]], None]) -> None:
        self._set_timer = set_timer
        self._refresh = refresh
        self._redraw = redraw
        self._redraw_pending = False
        self._refresh_pending = False
        self._new_frames: set[str] = set()

    def frames_filed(self, key: str, first: bool) -> None:
        """New frames of ``key`` are in its store (``first``: the first ones): draw them soon."""
        if first:
            self.refresh_soon()
        else:
            self._new_frames.add(key)
            if not self._redraw_pending:
                self._redraw_pending = True
                self._set_timer(FRAME_REDRAW_S, self._redraw_new_frames)

    def refresh_soon(self) -> None:
        """Refresh within `FRAME_REDRAW_S`: the first frames and alarm lists of many nodes
        arriving together (a dashboard starting on 256 nodes) share one refresh."""
        if not self._refresh_pending:
            self._refresh_pending = True
            self._set_timer(FRAME_REDRAW_S, self._refresh_now)

    def _refresh_now(self) -> None:
        self._refresh_pending = False
        self._refresh()

    def _redraw_new_frames(self) -> None:
        """Draw the frames that came since the last redraw, without waiting for the refresh timer."""
        self._redraw_pending = False
        keys, self._new_frames = self._new_frames, set()
        self._redraw(keys)
