"""Strings from hardware and agents on screen: always Rich `Text` or plain notifications, never markup.

Rich tables, Textual's `DataTable`, `Static`, `Label`, notifications and the command palette
all parse a ``str`` as markup: a Thunderbolt dock named ``Evil[/]Dock`` (its ROM says so)
raises `MarkupError` and ends the dashboard, ``[@click=app.quit]`` becomes a link that
quits. Every widget hands such strings over through `plain` (or `notify` for toasts), which
never parses them. Control characters are not this module's business: they were made
visible once, where the strings were decoded (`rigmon.cluster.sanitise`).
"""

from __future__ import annotations

from typing import Literal, Protocol

from rich.style import StyleType
from rich.text import Text
from textual.notifications import SeverityLevel

from rigmon.tui.format import MISSING

Justify = Literal["left", "center", "right"]


def plain(value: str | None, style: StyleType = "", *, justify: Justify | None = None,
          missing: str = MISSING) -> Text:
    """``value`` as text drawn exactly as it is (``missing`` when ``None``), in ``style``."""
    return Text(missing if value is None else value, style=style, justify=justify)


class Notifier(Protocol):
    """Anything with Textual's ``notify`` (the app, a screen, a widget)."""

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...


def notify(target: Notifier, message: str, *, title: str = "", severity: SeverityLevel = "information",
           timeout: float | None = None) -> None:
    """A toast whose message is shown as it is (``markup=False``); titles are never markup."""
    target.notify(message, title=title, severity=severity, timeout=timeout, markup=False)
