"""Captured serial ADC output replayed through the rail bookkeeping, as the agent publishes it.

A folder under tests/fixtures/hosts holds ``adc.txt`` (what the device printed), an
``agent.toml`` with its ``[psu]`` section, a one-line ``SOURCE`` and ``adc-expected.json``.
Lines arrive a quarter second apart; the agent takes a frame every second and a sag is
published at once, so the expected file lists every reading the agent would publish (and
each window is in exactly one of them). ``pytest --update-golden`` rewrites it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rigmon.collectors.psu_rail import RailState
from rigmon.config import load_agent_config
from rigmon.schema import PsuRailReading
from rigmon.typed import to_data

HOSTS = Path(__file__).parent.parent / "fixtures" / "hosts"
FOLDERS = sorted(p for p in HOSTS.iterdir() if (p / "adc.txt").exists())
LINE_INTERVAL_S = 0.25
FRAME_INTERVAL_S = 1.0
WALL_START = 1_700_000_000.0


def _summary(kind: str, reading: PsuRailReading) -> dict[str, object]:
    return {"published": kind, "windows": reading.windows, "sag": reading.sag, "stale": reading.stale,
            "channels_volts": to_data(reading.channels_volts), "channels_amps": to_data(reading.channels_amps)}


def replay(folder: Path) -> dict[str, object]:
    config = load_agent_config(folder / "agent.toml", environ={})
    state = RailState(config.psu)
    state.opened()
    # The port was just opened: the reader drops the (partial) first line; a capture starts whole.
    state.feed(b"\n", 0.0, WALL_START)
    published: list[dict[str, object]] = []
    next_frame = FRAME_INTERVAL_S
    mono = 0.0
    for line in (folder / "adc.txt").read_bytes().splitlines(keepends=True):
        mono += LINE_INTERVAL_S
        while mono > next_frame:
            published.append(_summary("frame", state.reading(next_frame, reset=True)))
            next_frame += FRAME_INTERVAL_S
        if state.feed(line, mono, WALL_START + mono):
            published.append(_summary("pushed", state.reading(mono, reset=True, pushed=True)))
    published.append(_summary("frame", state.reading(next_frame, reset=True)))
    return {"counters": to_data(state.counters), "published": published}


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_adc_capture(folder: Path, update_golden: bool) -> None:
    assert (folder / "SOURCE").read_text().strip()
    got = replay(folder)
    expected_path = folder / "adc-expected.json"
    if update_golden:
        expected_path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert got == json.loads(expected_path.read_text())
    # Every window is in exactly one published reading (issue 22: a sag was counted twice).
    counters = got["counters"]
    assert isinstance(counters, dict)
    assert sum(int(p["windows"]) for p in got["published"]) == counters["windows_total"]  # type: ignore[index, union-attr]
