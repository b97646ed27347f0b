"""The Host box's temperatures: one at or over its high limit shows the limit in the warning style,
at or over its critical limit in the error style."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from rich.table import Table
from rich.text import Text

from rigmon.schema import Frame, TemperatureReading
from rigmon.tui.widgets.host_group import HostGroup, sensor_temp
from tests.alarms.helpers import T0, FakeClock, sim_frames
from tests.tui.snapshot_apps.record_frames import load_frames
from tests.tui.snapshot_apps.recorded import build, open_node, settle
from tests.tui.test_sources import text

#: The simulated NVMe drives' hwmon limits (``temp1_max``, ``temp1_crit``), in °C.
NVME_MAX_C, NVME_CRIT_C = 81.85, 84.85


@pytest.mark.parametrize(("max_c", "crit_c", "temp_c", "shown", "level"), [
    (None, None, 82.05, "82 °C", None),
    (81.85, 84.85, 41.85, "42 °C", None),
    (81.85, 84.85, 81.85, "82 °C ≥ 81.85", "warn"),
    (81.85, 84.85, 82.05, "82 °C ≥ 81.85", "warn"),
    (81.85, 84.85, 85.0, "85 °C ≥ 84.85", "bad"),
    (None, 100.0, 100.0, "100 °C ≥ 100", "bad"),
])
def test_a_temperature_at_its_limit_is_shown_against_it(max_c: float | None, crit_c: float | None, temp_c: float,
                                                        shown: str, level: str | None) -> None:
    sensor = TemperatureReading(sensor="hwmon2/temp1", label="nvme Composite", temp_c=temp_c, max_c=max_c,
                                crit_c=crit_c)
    assert sensor_temp(sensor) == (shown, level)


def _with_limits(frame: Frame) -> Frame:
    # The recording predates the agent's reading of hwmon limits: the NVMe composites get the
    # limits their simulated chips list (the collector's reading of them: tests/collectors/test_host_temp_limits.py).
    temps = tuple(msgspec.structs.replace(t, max_c=NVME_MAX_C, crit_c=NVME_CRIT_C) if t.label == "nvme Composite" else t
                  for t in frame.readings.temperatures)
    return msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, temperatures=temps))


def _cells(group: HostGroup) -> list[Text]:
    body = group.query_one("#body").content  # type: ignore[attr-defined]
    tables = [r for r in getattr(body, "renderables", [body]) if isinstance(r, Table)]
    return [cell for table in tables for column in table.columns for cell in column._cells if isinstance(cell, Text)]


async def host_box(app: Any, fleet: Any, pilot: Any) -> tuple[HostGroup, list[str]]:
    """The node screen's Host box of the fleet's only node, and its lines as text at the box's width."""
    await settle(app, fleet, pilot)
    await open_node(app, next(iter(fleet.agents)), pilot)
    await pilot.pause()
    group = app.screen.query_one(HostGroup)
    return group, text(group.query_one("#body").content,  # type: ignore[attr-defined]
                       group.content_size.width).splitlines()


async def test_the_hot_drives_composites_stand_out_in_the_host_box_at_80_columns() -> None:
    frames = [_with_limits(f) for f in load_frames("nvme-enclosure-thermal-throttle")]
    app, fleet, _ = build([("strix", frames, 90)])
    async with app.run_test(size=(80, 40)) as pilot:
        group, lines = await host_box(app, fleet, pilot)
        assert sum("82 °C ≥ 81.85" in line for line in lines) == 2, lines
        assert sum("40 °C" in line and "≥" not in line for line in lines) == 2, lines
        warn = group.style_of("warn")
        hot = [cell for cell in _cells(group) if "≥" in cell.plain]
        assert len(hot) == 2 and all(cell.style == warn for cell in hot), hot
        assert all(cell.style != warn for cell in _cells(group) if cell.plain == "40 °C")


async def test_the_host_box_names_nvme_sensors_by_their_drives(tmp_path: Path) -> None:
    # The real collectors read the simulated node (its NVMe hwmon chips named nvme-pci-6400 and so on, as
    # libsensors names them); the Host box names them as the Storage box does.
    frames = list(sim_frames("nvme-thermal-throttle", 1, tmp_path, FakeClock(T0), 3, 1.0))
    assert any(t.sensor.startswith("nvme-pci-") for t in frames[-1].readings.temperatures)
    app, fleet, _ = build([("strix", frames, 3)])
    async with app.run_test(size=(80, 40)) as pilot:
        group, lines = await host_box(app, fleet, pilot)
    assert [line.split()[0] for line in lines if "Composite" in line] == ["nvme0", "nvme1", "nvme2", "nvme3"], lines
    assert not any("nvme-pci" in line for line in lines), lines
