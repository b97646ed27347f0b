"""NodeCommands: "Open node NAME" in the command palette for every followed node, names drawn as text.

Textual's system commands parse their titles and help as markup (a node named ``rig[/]01``
would end the palette with a `MarkupError`), so the node commands come from this provider,
which hands the palette `Content` built from the plain names.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

if TYPE_CHECKING:
    from rigmon.tui.app import RigmonApp


class NodeCommands(Provider):
    """One command per followed node: its name (from the agent) and, dimmed, its URL."""

    def _commands(self) -> list[tuple[str, Content, Callable[[], None]]]:
        app = cast("RigmonApp", self.app)
        commands: list[tuple[str, Content, Callable[[], None]]] = []
        for store in app.cluster.nodes.values():
            title = f"Open node {store.name}"
            display = Content.assemble(title, ("  " + store.url, "dim"))
            commands.append((title, display, partial(app.open_node, store.key)))
        return commands

    async def discover(self) -> Hits:
        for title, display, open_node in self._commands():
            yield DiscoveryHit(display, open_node, text=title)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, display, open_node in self._commands():
            score, offsets = matcher.fuzzy_search.match(matcher.query, title)
            if score > 0:
                # What `Matcher.highlight` does, without reading the name as markup.
                for offset in offsets:
                    if not title[offset].isspace():
                        display = display.stylize(matcher.match_style, offset, offset + 1)
                yield Hit(score, display, open_node, text=title)
