"""The node screen's storage box as text, at each width a test reads it (shared by the storage box tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from rigmon.schema import Frame
from rigmon.tui.widgets.storage_group import StorageGroup
from tests.tui.snapshot_apps.recorded import build, open_node, settle
from tests.tui.test_sources import text


async def storage_lines(nodes: Sequence[tuple[str, str | Sequence[Frame], int]],
                        widths: Sequence[int] = (80, 200)) -> AsyncIterator[tuple[int, list[str]]]:
    """Replay ``nodes`` (`build`'s), open the first node's screen and yield, at each of ``widths`` (40 rows),
    the width and the storage box's lines."""
    app, fleet, _ = build(nodes)
    async with app.run_test(size=(widths[0], 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        for width in widths:
            await pilot.resize_terminal(width, 40)
            await pilot.pause()
            await pilot.pause()
            group = app.screen.query_one(StorageGroup)
            body = group.query_one("#body").content  # type: ignore[attr-defined]
            yield width, text(body, group.content_size.width).splitlines()
