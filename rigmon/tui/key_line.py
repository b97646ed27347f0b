"""KeyLine: the screens' key line (Textual's `Footer`), which gives up the command palette's key when the
screen's own keys need its cells.

Textual's footer docks the palette's key (``^p palette``) at the right edge, over whatever keys do not fit
before it: at 80 columns the cluster screen with peer paths lost ``t Theme`` under it, and a replay's line
ended in ``a Alar``. The palette is still one Ctrl+P away (the help screen and README say so), so when the
keys and the palette's key do not fit together, the key line shows the keys; it shows the palette's key
again once the screen is wide enough for both.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

#: Cells the palette's key takes (its border, ``^p palette`` and its padding) before it was ever drawn.
PALETTE_KEY_CELLS = 12


class KeyLine(Footer):
    """A `Footer` that hides the command palette's key when the screen's keys need its cells.

    Hidden by a class, not by Textual's ``show_command_palette`` (which builds every key again: a line
    drawn empty for a moment, each time it changes).
    """

    DEFAULT_CSS = """
    KeyLine.-no-palette FooterKey.-command-palette {
        display: none;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._palette_cells = PALETTE_KEY_CELLS

    async def recompose(self) -> None:
        """Build the keys again (bindings changed), then see whether the palette's key still fits."""
        await super().recompose()
        self.call_after_refresh(self.fit_palette_key)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.fit_palette_key)

    def keys_cells(self) -> int:
        """Cells from the line's left edge to the right end of the last key other than the palette's."""
        right = self.region.x
        for child in self.children:
            if child.has_class("-command-palette"):
                if child.display:
                    self._palette_cells = max(child.outer_size.width, 1)
                continue
            right = max(right, child.region.right + child.styles.margin.right)
        return right - self.region.x

    def fit_palette_key(self) -> None:
        """Show the palette's key only if it fits beside every other key."""
        if not self.is_attached or not self._bindings_ready or self.size.width == 0:
            return
        # The last key's description ends in a blank cell of padding, which the palette's key may cover.
        show = self.keys_cells() - 1 + self._palette_cells <= self.size.width
        self.set_class(not show, "-no-palette")

    @property
    def shows_palette_key(self) -> bool:
        """Whether the palette's key is on the line (when Textual offers it)."""
        return not self.has_class("-no-palette")
