"""Alarms of the simulator scenarios fire once per episode: no firing and resolving every second.

The real collectors read each scenario's tree on a fake clock (`sim_frames`) at 1 Hz, as the
agent would, and the default rules judge the frames. On loose-sxm2 the NVLink rules used to
fire and resolve on every frame: the links of one GPU share its subject, and a quiet link
resolved what a rising one had fired.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rules import default_rules
from tests.alarms.helpers import T0, FakeClock, sim_frames

LOOSE_SXM2_RULES = {"gpu_nvlink_replay_rising", "gpu_nvlink_crc_rising", "gpu_pcie_replay_rising"}


def transitions(scenario: str, seconds: int, workdir: Path) -> Counter[tuple[str, str, str]]:
    """(rule, subject, change) counts over ``seconds`` of one node at 1 Hz."""
    clock = FakeClock(T0)
    engine = AlarmEngine(default_rules(), "node01", clock)
    seen: Counter[tuple[str, str, str]] = Counter()
    for frame in sim_frames(scenario, 1, workdir, clock, seconds, 1.0):
        seen.update((t.alarm.rule, t.alarm.subject, t.change) for t in engine.evaluate(frame))
    return seen


def test_loose_sxm2_alarms_fire_once_and_stay_firing(fast_dir: Path) -> None:
    seen = transitions("loose-sxm2", 300, fast_dir)
    # The fault persists for the whole run: one firing each for the loose GPU, nothing resolved.
    assert seen == Counter({(rule, "gpu:2", "firing"): 1 for rule in LOOSE_SXM2_RULES}), seen


@pytest.mark.parametrize("scenario", ["tb-retrain-10g", "strix-usb4", "md-degraded"])
def test_no_alarm_fires_more_often_than_its_scenario_has_episodes(scenario: str, fast_dir: Path) -> None:
    """Their timelines repeat every two to two and a half minutes: at most one episode each
    per period of the 300 s watched."""
    seen = transitions(scenario, 300, fast_dir)
    assert seen, "the scenario fired nothing: the frames do not reach the rules"
    assert max(seen.values()) <= 3, seen
