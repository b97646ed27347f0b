"""CriticalToast: one toast for the critical alarms that arrive close together, grown as more come."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len, set_cell_size
from textual.notifications import Notification

from rigmon.cluster.alarm_board import AlarmRow

if TYPE_CHECKING:
    from textual.app import App

#: Seconds a critical toast stays up; alarms arriving meanwhile join it and it starts again.
TOAST_S = 15.0
#: Alarms listed in one toast; more are counted.
LISTED_AT_MOST = 4
#: Textual's `Toast` is 60 cells wide, at most half its rack, which keeps room for a
#: scrollbar; around the text are the left border and one cell of padding either side.
TOAST_WIDTH = 60
RACK_SCROLLBAR = 2
TOAST_FRAME = 3


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

    def announce(self, app: App[Any], rows: Sequence[AlarmRow]) -> None:
        """Toast ``rows`` (the alarms that just turned critical) with those of the toast still up."""
        if not rows:
            return
        # Textual has no public way to replace a toast (App.notify posts a message and returns
        # nothing): the notification is added and removed in the app's collection directly, at
        # once, so a second batch in the same tick cannot find the first one still in flight.
        old = self._shown
        if old is not None and old in app._notifications and not old.has_expired:
            app._unnotify(old, refresh=False)
            known = {r.row_key for r in self._rows}
            self._rows += [r for r in rows if r.row_key not in known]
        else:
            self._rows = list(rows)
        width = min(TOAST_WIDTH, (app.size.width - RACK_SCROLLBAR) // 2) - TOAST_FRAME
        title, message = toast_text(self._rows, width)
        self._shown = Notification(message, title, "error", TOAST_S, markup=False)
        app._notifications.add(self._shown)
        app._refresh_notifications()
        app.bell()
