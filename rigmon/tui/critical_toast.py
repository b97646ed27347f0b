"""CriticalToast: one toast for the critical alarms that arrive close together, grown as more come.

In a small terminal (below `COMPACT_BELOW_COLUMNS` x `COMPACT_BELOW_LINES`) every toast is a strip as wide as the
screen just above the footer (`fit_toasts`, rigmon.tcss), and the critical toast is one line (`toast_line`): the usual
toast, half the screen wide and a line per alarm, covered half the node list at 80x24 for its 15 s, hiding the
rows it was about. What each alarm says stays on its node's row, and on the alarms screen. The strip keeps the
line above the footer while it is up (`CriticalToast.keep_bottom`): a later toast stands above it. The strips
take lines of their own (`CriticalToast.keep_room`): the screen above them is that much shorter while they are up,
so they cover neither the key line (the operator lost the key hints exactly when a critical alarm came) nor a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len, set_cell_size
from textual.geometry import Size
from textual.notifications import Notification

from rigmon.cluster.alarm_board import AlarmRow

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer

#: Seconds a critical toast stays up; alarms arriving meanwhile join it and it starts again.
TOAST_S = 15.0
#: Alarms listed in one toast; more are counted.
LISTED_AT_MOST = 4
#: Textual's `Toast` is 60 cells wide, at most half its rack, which keeps room for a
#: scrollbar; around the text are the left border and one cell of padding either side.
TOAST_WIDTH = 60
RACK_SCROLLBAR = 2
TOAST_FRAME = 3
#: Below this many columns or lines toasts are compact (`fit_toasts`): at 120x40 a toast of the usual shape
#: leaves most of a full node list in sight; at 80x24 it covered half of it.
COMPACT_BELOW_COLUMNS = 120
COMPACT_BELOW_LINES = 40
#: The app's class that makes toasts compact strips above the footer (rigmon.tcss).
COMPACT_CLASS = "-compact-toasts"
#: The app's classes that keep lines for the compact strips above the footer, ``-toast-room-1`` to the most
#: (rigmon.tcss): strips taking more lines than that cover the screen's lowest ones.
ROOM_CLASS = "-toast-room-"
MOST_ROOM_LINES = 4
#: Seconds after a toast's time is up that its lines are given back (its own timer removes it then).
ROOM_LAG_S = 0.05


def compact(width: int, height: int) -> bool:
    """Whether a terminal of ``width`` x ``height`` cells gets compact toasts: one-line strips over the footer."""
    return width < COMPACT_BELOW_COLUMNS or height < COMPACT_BELOW_LINES


def fit_toasts(app: App[Any], size: Size | None = None) -> bool:
    """Give ``app`` the toasts its size wants (the app calls this on every resize, with the new ``size``: the
    app's handler runs before Textual's, which sets ``app.size``); whether they are compact."""
    size = size or app.size
    small = compact(size.width, size.height)
    app.set_class(small, COMPACT_CLASS)
    return small


def toast_text_width(app: App[Any], size: Size | None = None) -> int:
    """Cells of text on one line of a toast in ``app`` (of ``size``, default the app's): a compact strip's, or
    the usual toast's, at most half the rack."""
    size = size or app.size
    if fit_toasts(app, size):
        # The compact rack has no scrollbar gutter (rigmon.tcss).
        return max(size.width - TOAST_FRAME, 1)
    return max(min(TOAST_WIDTH, (size.width - RACK_SCROLLBAR) // 2) - TOAST_FRAME, 1)


def strip_lines(notification: Notification, width: int) -> int:
    """Lines the compact strip of ``notification`` takes in a terminal ``width`` cells wide: its title's, and
    its message's, each line wrapped at the strip's text width."""
    room = max(width - TOAST_FRAME, 1)
    lines = notification.message.splitlines() or [""]
    return bool(notification.title) + sum(max(1, -(-cell_len(line) // room)) for line in lines)


def toast_text(rows: Sequence[AlarmRow], width: int) -> tuple[str, str]:
    """Title and message of the toast for ``rows`` (oldest first), lines at most ``width`` cells.

    One alarm: its rule in the title, node, subject and the whole message below. Several:
    how many in the title and one line each, ``node message`` cut to the width, so the toast
    grows by a line per alarm rather than covering the screen.
    """
    if len(rows) == 1:
        row = rows[0]
        return f"CRITICAL {row.alarm.rule}", f"{about(row)}{said(row)}"
    lines = [fit(f"{r.node} {said(r)}", width) for r in rows[:LISTED_AT_MOST]]
    if len(rows) > LISTED_AT_MOST:
        lines.append(f"and {len(rows) - LISTED_AT_MOST} more: press a")
    return f"CRITICAL: {len(rows)} new alarms", "\n".join(lines)


def toast_line(rows: Sequence[AlarmRow], width: int) -> str:
    """The compact toast for ``rows`` (oldest first): one line of at most ``width`` cells, which says it is
    critical, how many alarms and on which nodes, and the first one (``CRITICAL 3 new alarms on node01, press
    a: node01 12 V rail minimum 11.25…``); one alarm is said as the usual toast says it, without its subject's key
    when the line does not fit whole (its message names the subject)."""
    if len(rows) == 1:
        row = rows[0]
        line = f"CRITICAL {about(row)}{said(row)}"
        if cell_len(line) > width and about(row) != f"{row.node} ":
            # The message names its subject in words (``coretemp Package id 0 at 100 °C``): the subject's key
            # (``temp:coretemp-isa-0000/Package id 0``) took the room of the reading at 80 columns.
            line = f"CRITICAL {row.node}: {said(row)}"
        return fit(line, width)
    nodes = ", ".join(dict.fromkeys(r.node for r in rows))
    first = rows[0]
    return fit(f"CRITICAL {len(rows)} new alarms on {nodes}, press a: {first.node} {said(first)}", width)


def about(row: AlarmRow) -> str:
    """``node02 gpu:3: ``: the node, and the subject unless it is the node itself (a cluster rule's
    ``node:node02``)."""
    if row.alarm.subject == f"node:{row.alarm.node}":
        return f"{row.node} "
    return f"{row.node} {row.alarm.subject}: "


def said(row: AlarmRow) -> str:
    """The alarm's message without the ``node NAME `` a cluster rule's message opens with: the toast
    names the node first, and at 80 columns ``node05 node node05 unrea…`` said nothing else."""
    return row.alarm.message.removeprefix(f"node {row.alarm.node} ")


def fit(line: str, width: int) -> str:
    """``line`` cut to ``width`` cells with an ellipsis when longer."""
    if cell_len(line) <= width:
        return line
    return set_cell_size(line, max(width - 1, 0)) + "…"


class CriticalToast:
    """Announces alarms that just turned critical: a toast and one ring of the bell per batch.

    While its toast is up (not timed out, not clicked away), newly critical alarms replace
    it with one listing them all, so a GPU falling off the bus (an Xid, the GPU lost, the
    rail low, seconds apart as each node's alarms are fetched) is one toast, not a stack.
    """

    def __init__(self) -> None:
        self._shown: Notification | None = None
        self._rows: list[AlarmRow] = []
        self._room_timer: Timer | None = None

    def announce(self, app: App[Any], rows: Sequence[AlarmRow]) -> None:
        """Toast ``rows`` (the alarms that just turned critical) with those of the toast still up. Called on
        every redraw, with or without rows: the lines kept for strips clicked away are given back then."""
        self.keep_room(app)
        if not rows:
            return
        if self._up(app):
            known = {r.row_key for r in self._rows}
            self._rows += [r for r in rows if r.row_key not in known]
        else:
            self._rows = list(rows)
        self._show(app, TOAST_S)
        app.bell()

    def refit(self, app: App[Any], size: Size) -> None:
        """Make the toast still up fit ``app``'s size now (the app calls this on every resize): a toast made one
        line at 80x24 is the usual one once the terminal is large, and the other way round; for the rest of its
        time, without another bell. ``size``: the terminal's new size."""
        if self._shown is not None and self._up(app):
            self._show(app, self._shown.time_left, size)

    def keep_bottom(self, app: App[Any]) -> None:
        """In a small terminal, put the critical strip still up back on the bottom line, over the footer, when
        a later toast (a theme's name, an export's paths) came under it: Textual stacks toasts newest lowest,
        so the later one took the footer's line and pushed the strip up over the node list. The later toast
        now stands above the strip, for its own few seconds; the strip keeps its place and its time left."""
        if self._shown is not None and self._up(app) and app.has_class(COMPACT_CLASS) \
                and list(app._notifications)[-1] is not self._shown:
            self._show(app, self._shown.time_left)
        self.keep_room(app)

    def keep_room(self, app: App[Any]) -> None:
        """In a small terminal, keep as many lines above the footer as the strips up take (`ROOM_CLASS`,
        rigmon.tcss: the footer's top margin), so that the screen's content ends above them and the footer
        stays in sight; none in a large one. Looked at again when the soonest strip's time is up."""
        up = [n for n in app._notifications if not n.has_expired]
        # An app that draws no toasts (Textual's ``run_test`` without notifications) keeps no lines for them.
        drawn = app.has_class(COMPACT_CLASS) and not app._disable_notifications
        lines = sum(strip_lines(n, app.size.width) for n in up) if drawn else 0
        for n in range(1, MOST_ROOM_LINES + 1):
            app.set_class(n == min(lines, MOST_ROOM_LINES), f"{ROOM_CLASS}{n}")
        if self._room_timer is not None:
            self._room_timer.stop()
            self._room_timer = None
        if up:
            soonest = min(n.time_left for n in up)
            self._room_timer = app.set_timer(soonest + ROOM_LAG_S, lambda: self.keep_room(app))

    def _up(self, app: App[Any]) -> bool:
        """Whether the toast is still up (not timed out, not clicked away)."""
        shown = self._shown
        return shown is not None and shown in app._notifications and not shown.has_expired

    def _show(self, app: App[Any], timeout_s: float, size: Size | None = None) -> None:
        """Put up the toast of the alarms held, for ``timeout_s``, in place of the one up (if any), fit to
        ``size`` (default: the app's)."""
        # Textual has no public way to replace a toast (App.notify posts a message and returns
        # nothing): the notification is added and removed in the app's collection directly, at
        # once, so a second batch in the same tick cannot find the first one still in flight.
        if self._shown is not None and self._up(app):
            app._unnotify(self._shown, refresh=False)
            # Textual's rack removes the toast of a notification gone, not the holder it sits in: a blank
            # line between the toasts, past the lines kept for them. The holder's id is the rack's own.
            holder = f"--textual-toast-{self._shown.identity}"
            for widget in app.screen.query("ToastHolder"):
                if widget.id == holder:
                    widget.remove()
        size = size or app.size
        width = toast_text_width(app, size)
        if compact(size.width, size.height):
            title, message = "", toast_line(self._rows, width)
        else:
            title, message = toast_text(self._rows, width)
        self._shown = Notification(message, title, "error", timeout_s, markup=False)
        app._notifications.add(self._shown)
        app._refresh_notifications()
        self.keep_room(app)
