"""Hypothesis properties do not fail on a loaded machine: the suite's profile (tests/conftest.py) has no
per-example deadline, for tests with settings of their own too."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

#: Examples of the property below that have run.
_calls: list[int] = []


@settings(max_examples=5, database=None)
@given(st.integers())
def test_an_example_left_waiting_by_a_loaded_machine_fails_no_property(n: int) -> None:
    """The first example is left waiting 0.3 s, as a process on a loaded 2-core machine can be (the
    default 200 ms deadline failed this, then called it flaky when the replay was quick)."""
    _calls.append(n)
    if len(_calls) == 1:
        time.sleep(0.3)
    assert isinstance(n, int)
