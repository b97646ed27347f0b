"""How the cluster row draws the undervolt guard's mark (`rigmon.summary.guard_mark`): by what it says.

The mark arrives as text in a node's summary (an agent newer than this dashboard may send one it
does not know), so its look is read from the text: a guard switched off by an operator's release
(``Goff``, ``dryoff``) is a deliberate state, drawn muted; one in dry-run (``dry1``, ``dry2h``) changed
nothing and says what it would do, drawn as information; every other mark (caps in force ``G1``, held
``G1h``, blind ``G1?``, unable to act ``g1``, stuck caps ``G!``, or one not known) in the alarm style.
"""

from __future__ import annotations

from typing import Literal

#: The `rigmon.tui.widgets.node_row.NodeRow` component (``node-row--<name>``) a mark is drawn in.
MarkStyle = Literal["guard-off", "guard-dry", "alarm"]


def mark_style(mark: str) -> MarkStyle:
    """The row's component style for the guard mark ``mark`` (see the module's docstring)."""
    if mark.endswith("off"):
        return "guard-off"
    if mark.startswith("dry"):
        return "guard-dry"
    return "alarm"
