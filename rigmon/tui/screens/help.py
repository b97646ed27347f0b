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
- **Escape**: back to the cluster
- **t**: next theme
- **Ctrl+P**: command palette (open a node, pick a theme)
- **?**: this help; **q**: quit

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
