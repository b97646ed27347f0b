"""Smoke run of benchmarks/soak.py: a short soak of one simulated node whose agent's memory,
descriptors and threads stay put while a dashboard client follows it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_short_soak_stays_flat() -> None:
    spec = importlib.util.spec_from_file_location("soak", REPO / "benchmarks" / "soak.py")
    assert spec is not None and spec.loader is not None
    soak = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = soak
    spec.loader.exec_module(soak)
    result = soak.run_soak("lab", nodes=1, speed=2000.0, warmup_s=3.0, seconds=4.0, interval_s=0.1)
    assert result.live_nodes_end == 1 and result.failures == 0 and result.gaps == 0
    assert result.frames_followed >= 10
    # Four seconds cannot show a slow leak, but they do show a descriptor or thread per frame.
    assert result.fds.end - result.fds.start <= 2 and result.threads.end - result.threads.start <= 2
    assert result.rss_mb.end - result.rss_mb.start < 20
