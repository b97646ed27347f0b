"""Fixtures shared by the hardware-access tests."""

from __future__ import annotations

import pytest

from rigmon.sim.nvml import FakeNvmlMachine, v100_sxm2_gpus


@pytest.fixture
def machine() -> FakeNvmlMachine:
    return FakeNvmlMachine(v100_sxm2_gpus(4))
