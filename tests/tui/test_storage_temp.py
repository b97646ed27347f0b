"""The storage box's NVMe temperature: a drive at or over its warning threshold shows the limit, in the warning style."""

from __future__ import annotations

from typing import Any

import pytest
from rich.table import Table
from rich.text import Text

from rigmon.schema import NvmeReading
from rigmon.tui.widgets.storage_group import StorageGroup, nvme_hot, nvme_temp
from tests.tui.snapshot_apps.recorded import build, open_node, settle
from tests.tui.test_sources import text


def nvme(**fields: Any) -> NvmeReading:
    base: dict[str, Any] = dict(name="nvme0", model=None, serial=None, firmware=None, state="live", transport="pcie",
                                address=None, namespaces=(), link_speed_gts=16.0, link_width=4,
                                max_link_speed_gts=16.0, max_link_width=4, link_gen=4, max_link_gen=4,
                                link_lost=False, temp_c=41.85, temp_max_c=81.85, temp_crit_c=84.85)
    return NvmeReading(**{**base, **fields})


@pytest.mark.parametrize(("fields", "hot", "shown"), [
    ({}, False, "42 °C"),
    ({"temp_c": 82.05, "temp_over_max": True}, True, "82 °C ≥ 81.85"),
    # The drive's own warning bit (its over-temperature threshold set below WCTEMP) counts as the collector says.
    ({"temp_c": 75.0, "temp_over_max": True, "temp_alarm": True}, True, "75 °C ≥ 81.85"),
    # An older agent reports no verdict: judged by the figures.
    ({"temp_c": 82.05}, True, "82 °C ≥ 81.85"),
    ({"temp_c": 82.05, "temp_max_c": None, "temp_over_max": True}, True, "82 °C"),
    ({"temp_c": None, "temp_over_max": None}, False, "-"),
])
def test_a_drive_over_its_warning_threshold_is_shown_against_it(fields: dict[str, Any], hot: bool, shown: str) -> None:
    drive = nvme(**fields)
    assert nvme_hot(drive) is hot
    assert nvme_temp(drive).replace("—", "-") == shown


def _cells(group: StorageGroup) -> list[Text]:
    body = group.query_one("#body").content  # type: ignore[attr-defined]
    tables = [r for r in getattr(body, "renderables", [body]) if isinstance(r, Table)]
    return [cell for table in tables for column in table.columns for cell in column._cells if isinstance(cell, Text)]


async def test_the_hot_enclosures_drives_stand_out_on_the_node_screen() -> None:
    app, fleet, _ = build([("strix", "nvme-enclosure-thermal-throttle", 90)])
    async with app.run_test(size=(80, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        for width in (80, 200):
            await pilot.resize_terminal(width, 40)
            await pilot.pause()
            await pilot.pause()
            group = app.screen.query_one(StorageGroup)
            lines = text(group.query_one("#body").content,  # type: ignore[attr-defined]
                         group.content_size.width).splitlines()
            assert sum("82 °C ≥ 81.85" in line for line in lines) == 2, (width, lines)
            assert any("nvme2" in line and "40 °C" in line for line in lines), (width, lines)
            warn = group.style_of("warn")
            hot = [cell for cell in _cells(group) if "≥" in cell.plain]
            assert len(hot) == 2 and all(cell.style == warn for cell in hot), hot
            assert all(cell.style != warn for cell in _cells(group) if cell.plain == "40 °C")
