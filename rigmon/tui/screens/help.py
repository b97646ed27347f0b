"""HelpScreen: keys and what the node states mean."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
## Keys

- **↑ ↓** (or **k j**): move between nodes
- **Enter** or a click: open the node
- **Escape**: back to the cluster (**c** from anywhere)
- **a**: the alarms of every node; there **x** acknowledges the alarm under the cursor,
  **Enter** opens its node, **Tab** moves to the resolved ones; on a narrow screen the
  panel under the tables shows the alarm under the cursor in full
- **e**: export: a snapshot bundle of the followed nodes (the last hour) and an SVG
  of the screen, in the export directory; a notification says where
- **g** / **G** on a node: hold or release its undervolt guard (the node's control token)
- **t**: next theme
- **Ctrl+P**: command palette (open a node, pick a theme)
- **?**: this help; **q**: quit

## Replay (`rigmon dash --replay FILE`)

- **Space**: play or pause; **← →**: 10 s back or ahead (**Shift**: 1 min)
- **[ ]**: slower or faster

## Alarms

A toast and the terminal bell announce each alarm that turns critical; alarms that
follow while the toast is up join it. The ⚠ column
counts the firing alarms of a node: its agent's and the dashboard's cluster rules
(unreachable, stale, clock skew, far from its peers).

## Node states

*live*: frames keep arriving. *stale*: the last frame is older than
three sampling intervals and no failure is known (a slow or stuck agent).
*unreachable*: the last attempt failed (refused, timed out, 401, bad answer or another
schema version) and the data is old; the reason and the age of the last data are shown.
*connecting*: no answer yet.

Nodes in trouble are listed first. Figures the node does not report show as "—".
Rail trends keep the lowest value of each bar, power trends the highest.
"""


class HelpScreen(ModalScreen[None]):
    """Keys and states; any of Escape, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "close", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)
