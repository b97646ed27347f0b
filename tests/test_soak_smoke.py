"""Smoke run of benchmarks/soak.py: a short soak of one simulated node whose agent's memory,
descriptors and threads stay put while a dashboard client follows it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_short_soak_stays_flat() -> None:
    soak = load_soak()
    # Frames every 0.25 s, not 0.1: a tick holds its sysfs descriptors open while it reads, and on a loaded
    # machine (the suite's four workers on two cores) ticks every 0.1 s left no look between two of them
    # (+19 "held" descriptors once, all a tick's).
    result = soak.run_soak("lab", nodes=1, speed=2000.0, warmup_s=3.0, seconds=4.0, interval_s=0.25)
    assert result.live_nodes_end == 1 and result.failures == 0 and result.gaps == 0
    assert result.frames_followed >= 10
    # Four seconds cannot show a slow leak, but they do show a descriptor or thread per frame.
    assert result.fds.end - result.fds.start <= 2 and result.threads.end - result.threads.start <= 2
    assert result.rss_mb.end - result.rss_mb.start < 20


def load_soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak", REPO / "benchmarks" / "soak.py")
    assert spec is not None and spec.loader is not None
    soak = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = soak
    spec.loader.exec_module(soak)
    return soak


async def test_descriptors_held_for_a_moment_are_not_counted_those_kept_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """Descriptors a process holds in some looks only (a history query's journal files, a simulated tree
    file being rewritten) are not counted; those in every look are, a leak among them."""
    soak = load_soak()
    agents, dashboard = 4242, 4343
    # The agents' process: three journal files in the first look, one tree write in the third (68 held).
    # The dashboard's: one more in every look than it had (a leak: counted).
    looks = {agents: iter([71, 68, 69] + [68] * (soak.FD_LOOKS - 3)), dashboard: iter([23] * soak.FD_LOOKS)}
    monkeypatch.setattr(soak, "open_fds", lambda pid: next(looks[pid]))
    monkeypatch.setattr(soak, "FD_LOOK_GAP_S", 0.0)
    assert await soak.held_fds([agents, dashboard]) == [68, 23]
    assert [next(look, None) for look in looks.values()] == [None, None]  # every look taken
