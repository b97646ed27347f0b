"""rigmon.series: frame_series names every number of a frame as iter_numeric does, in the same order."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rigmon.series import frame_series, iter_numeric

GOLDEN = Path(__file__).parent / "fixtures" / "golden" / "snapshot-v1.json"


def _reference(readings: Any) -> dict[str, float]:
    return dict(iter_numeric(readings))


def test_frame_series_is_iter_numeric_as_a_dict_on_the_golden_frame() -> None:
    frame = json.loads(GOLDEN.read_text())
    series = frame_series(frame)
    assert series
    assert list(series.items()) == list(_reference(frame["readings"]).items())


def test_frame_series_edge_cases() -> None:
    readings = {
        "nan": math.nan, "inf": -math.inf, "flag": True, "taken_at": 5, "none": None, "text": "12",
        "gpus": [{"index": 0, "power_w": 250, "ok": False}, {"index": 1, "power_w": 251.5}],
        "named": [{"name": "md0", "read_bytes_per_s": 1}], "anonymous": [{"ok": True, "v": 2}, [3, 4]],
        "nested": {"deep": {"deeper": [1.5, {"x": 2}]}}, "same": [{"name": "a", "v": 1}, {"name": "a", "v": 2}],
    }
    series = frame_series({"readings": readings})
    assert list(series.items()) == list(_reference(readings).items())
    assert series == {
        "gpus[0].index": 0.0, "gpus[0].power_w": 250.0, "gpus[1].index": 1.0, "gpus[1].power_w": 251.5,
        "anonymous[0].v": 2.0, "anonymous[1][0]": 3.0, "anonymous[1][1]": 4.0,
        "named[md0].read_bytes_per_s": 1.0, "nested.deep.deeper[0]": 1.5, "nested.deep.deeper[2].x": 2.0,
        "same[a].v": 2.0,
    }
    assert frame_series({"readings": None}) == {}


def test_an_amd_gpu_is_named_by_its_pci_address_not_its_card() -> None:
    # The DRM card follows the drivers' probe order: after a reboot card0 may be the other GPU, whose
    # history then went on under the first one's name (and the first's stopped under card1's).
    readings = {"amd_gpus": [{"card": "card1", "pci_bus_id": "0000:03:00.0", "power_w": 250.0},
                             {"card": "card0", "pci_bus_id": None, "power_w": 9.5}]}
    series = frame_series({"readings": readings})
    assert series == {"amd_gpus[0000:03:00.0].power_w": 250.0, "amd_gpus[card0].power_w": 9.5}
    assert list(series.items()) == list(_reference(readings).items())
