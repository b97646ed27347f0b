"""Helpers of the NVML tests: a deadline and a bounded wait for a condition."""

from __future__ import annotations

import time

import pytest


DEADLINE_S = 10.0


def _eventually(check: object, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``check()`` until it is true, failing after a bounded number of tries."""
    assert callable(check)
    end = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > end:
            pytest.fail("condition not reached before the deadline")
        time.sleep(0.02)
