"""Path resistance from the rail voltage against GPU power, for an ADC without a current channel."""

from __future__ import annotations

import msgspec
import pytest

from rigmon.agent.rail_path import PATH, GpuPowerPathCollector
from rigmon.collectors.base import NoData
from rigmon.path_resistance import DAY_S, PathStateHolder
from rigmon.schema import Frame, GpuReading, PathResistanceReading
from tests.agent.test_metrics import rail_frame

SOURCE_VOLTS = 12.05
PATH_OHMS = 0.0025


def frame(seq: int, gpu_w: float) -> Frame:
    # The rail falls by R * I with I = P / V (solved for V: V = (V0 + sqrt(V0^2 - 4 R P)) / 2).
    volts = (SOURCE_VOLTS + (SOURCE_VOLTS**2 - 4 * PATH_OHMS * gpu_w) ** 0.5) / 2
    base = rail_frame(1000.0 + seq, volts - 0.01)
    assert base.readings.psu_rail is not None and base.readings.psu_rail.volts is not None
    rail = msgspec.structs.replace(base.readings.psu_rail,
                               volts=msgspec.structs.replace(base.readings.psu_rail.volts, mean_volts=volts))
    gpus = tuple(GpuReading(index=i, uuid=f"GPU-{i}", name="V100", serial=None, pci_bus_id=None,
                            pci_bus_id_nvml=None, pci_bus_id_xid=None, power_w=gpu_w / 4) for i in range(4))
    return msgspec.structs.replace(base, seq=seq, readings=msgspec.structs.replace(base.readings, psu_rail=rail, gpus=gpus))


def test_resistance_from_load_steps() -> None:
    frames = [frame(seq, w) for seq, w in enumerate([180.0, 1050.0, 400.0, 1100.0, 200.0, 980.0, 650.0], 1)]
    current: list[Frame] = []
    collector = GpuPowerPathCollector(lambda: current[-1] if current else None)
    with pytest.raises(NoData):
        collector.collect()
    reading = None
    for f in frames:
        current.append(f)
        (reading,) = collector.collect()
        collector.collect()  # the same frame twice adds no second point
    assert isinstance(reading, PathResistanceReading)
    assert reading.path == PATH and reading.method == "load_steps" and reading.points == len(frames)
    assert reading.resistance_mohm == pytest.approx(PATH_OHMS * 1000, rel=0.02)


def test_quiet_when_the_adc_measures_the_path_itself() -> None:
    f = frame(1, 900.0)
    measured = PathResistanceReading(path="vpsu-v", method="two_point", resistance_mohm=0.8, uncertainty_mohm=0.01,
                                     points=10, current_span_amps=50.0, trend_mohm_per_day=None, trend_days=0.0,
                                     baseline_mohm=None)
    f = msgspec.structs.replace(f, readings=msgspec.structs.replace(f.readings, path_resistance=(measured,)))
    with pytest.raises(NoData, match="measures the path itself"):
        GpuPowerPathCollector(lambda: f).collect()


def test_quiet_without_gpus() -> None:
    f = frame(1, 900.0)
    f = msgspec.structs.replace(f, readings=msgspec.structs.replace(f.readings, gpus=()))
    with pytest.raises(NoData, match="no GPU power"):
        GpuPowerPathCollector(lambda: f).collect()


def test_daily_fits_survive_a_restart() -> None:
    loads = [180.0, 1050.0, 400.0, 1100.0, 200.0, 980.0, 650.0]
    current: list[Frame] = []
    before = GpuPowerPathCollector(lambda: current[-1])
    for seq, w in enumerate(loads, 1):
        current.append(frame(seq, w))
        before.collect()
    assert isinstance(before, PathStateHolder)
    saved = before.export_path_state()
    assert [s.path for s in saved] == [PATH] and saved[0].days[0].n == len(loads)
    after = GpuPowerPathCollector(lambda: current[-1])
    assert after.restore_path_state(saved) == 1
    for seq, w in enumerate(loads, 1):  # the next day, a new agent run
        current.append(msgspec.structs.replace(frame(seq, w), run_id="run2", taken_at=1000.0 + seq + DAY_S))
        (reading,) = after.collect()
    assert isinstance(reading, PathResistanceReading)
    assert reading.trend_days == 1.0 and reading.baseline_mohm == pytest.approx(PATH_OHMS * 1000, rel=0.02)
    assert reading.trend_mohm_per_day == pytest.approx(0.0, abs=0.05)
