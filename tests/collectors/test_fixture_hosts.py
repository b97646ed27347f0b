"""Every scenario folder under tests/fixtures/hosts: the registry's collectors read it as a root.

A folder holds the machine's files (proc/, sys/, dev/), an optional ``agent.toml``, an
optional ``nvml.toml`` (the fake NVML library served for that root) and ``expected.json``:
``{"collectors": {NAME: {"state": "ok" | "absent" | "error", "records": [...]}}}`` where each
record is its schema fields plus ``"type"``. A new quirk is a new folder, not new test code;
``pytest --update-golden`` rewrites expected.json from what the collectors report.
"""

from __future__ import annotations

import contextlib
import json
import tomllib
from pathlib import Path

import pytest

from rigmon.agent.collector_threads import Failed, call_collector
from rigmon.collectors import REGISTRY
from rigmon.collectors.base import CollectorContext, EventDraft
from rigmon.config import AgentConfig, load_agent_config
from rigmon.hw.root import HostRoot
from rigmon.sim.nvml import machine_from_toml, serving
from rigmon.typed import to_data

HOSTS = Path(__file__).parent.parent / "fixtures" / "hosts"
FOLDERS = sorted(p for p in HOSTS.iterdir() if (p / "expected.json").exists())


class FixedClock:
    """Collectors see one instant, so what they report depends on the tree alone."""

    def time(self) -> float:
        return 1_700_000_000.0

    def monotonic(self) -> float:
        return 100.0


def run_collector(name: str, root: Path) -> dict[str, object]:
    config = load_agent_config(root / "agent.toml", environ={}) if (root / "agent.toml").exists() else AgentConfig()
    ctx = CollectorContext(root=HostRoot(root), clock=FixedClock(), config=config)
    collector = REGISTRY[name](ctx)
    try:
        # What the agent reports: its own call (an error's text as the frame carries it).
        state, result = call_collector(collector)
    finally:
        collector.close()
    if state != "ok":
        error = result.error if isinstance(result, Failed) else result
        return {"state": state, "error": error}
    records = result
    out = []
    for record in records:
        kind = "EventDraft" if isinstance(record, EventDraft) else type(record).__name__
        out.append({"type": kind, **to_data(record)})
    return {"state": "ok", "records": out}


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_fixture_host(folder: Path, update_golden: bool) -> None:
    expected_path = folder / "expected.json"
    expected = json.loads(expected_path.read_text())
    with contextlib.ExitStack() as stack:
        if (folder / "nvml.toml").exists():
            machine = machine_from_toml(tomllib.loads((folder / "nvml.toml").read_text()))
            stack.enter_context(serving(folder, machine))
        got = {"collectors": {name: run_collector(name, folder) for name in expected["collectors"]}}
    if update_golden:
        expected_path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert got == expected


def test_every_folder_says_where_it_comes_from() -> None:
    for folder in FOLDERS:
        source = (folder / "SOURCE").read_text().strip()
        assert source and "\n" not in source, folder
