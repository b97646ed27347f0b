"""Storage collectors against whole scenario trees: tests/fixtures/hosts/<name>/expected.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rigmon.collectors import REGISTRY
from rigmon.collectors.base import CollectorContext, EventDraft, NoData
from rigmon.config import AgentConfig, load_agent_config
from rigmon.hw.root import HostRoot
from rigmon.typed import to_data

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
STORAGE_COLLECTORS = ("disks", "raid", "nvme", "thunderbolt")
CASES = sorted(p.name for p in HOSTS.iterdir() if (p / "expected.json").exists()
               and any(k in json.loads((p / "expected.json").read_text()) for k in STORAGE_COLLECTORS))


class FixedClock:
    def time(self) -> float:
        return 1_700_000_000.0

    def monotonic(self) -> float:
        return 100.0


def assert_subset(expected: Any, actual: Any, path: str = "") -> None:
    """Every key in ``expected`` has the same value in ``actual``; lists match element-wise."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{path}.{key}: missing"
            assert_subset(value, actual[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), \
            f"{path}: expected {len(expected)} items, got {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_subset(e, a, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: expected {expected!r}, got {actual!r}"


@pytest.mark.parametrize("case", CASES)
def test_collectors_report_the_tree(case: str) -> None:
    root = HOSTS / case
    expected = json.loads((root / "expected.json").read_text())
    config = load_agent_config(root / "agent.toml", environ={}) if (root / "agent.toml").exists() else AgentConfig()
    ctx = CollectorContext(root=HostRoot(root), clock=FixedClock(), config=config)
    events: list[dict[str, Any]] = []
    for name in STORAGE_COLLECTORS:
        if name not in expected:
            continue
        collector = REGISTRY[name](ctx)
        try:
            records = collector.collect()
        except NoData:
            assert expected[name] == "absent", f"{name}: absent, expected records"
            continue
        finally:
            collector.close()
        assert expected[name] != "absent", f"{name}: reported records, expected absent"
        readings = [to_data(r) for r in records if not isinstance(r, EventDraft)]
        events += [to_data(r) for r in records if isinstance(r, EventDraft)]
        assert_subset(expected[name], readings, name)
    assert_subset(expected.get("events", []), events, "events")


def test_every_fixture_has_a_source_line() -> None:
    for case in CASES:
        source = (HOSTS / case / "SOURCE").read_text()
        assert source.strip() and "\n" not in source.strip(), case
