"""Fixtures shared by the agent tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.sim.nvml import FakeNvmlMachine, v100_sxm2_gpus


@pytest.fixture
def machine() -> FakeNvmlMachine:
    return FakeNvmlMachine(v100_sxm2_gpus(4))


@pytest.fixture(scope="module")
def export_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state directory whose journal holds `tests.agent.test_history_stream.FRAMES` bulky frames,
    written once for a module of export tests."""
    from tests.agent.test_history_stream import filled_state

    path = tmp_path_factory.mktemp("exports") / "state"
    filled_state(path)
    return path
