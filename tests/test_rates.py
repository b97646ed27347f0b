"""Counter deltas and rates across wrap and reset."""

from __future__ import annotations

import pytest

from rigmon.rates import CounterRates, counter_delta


@pytest.mark.parametrize(
    ("previous", "current", "width", "expected"),
    [
        (100, 150, None, 50),
        (100, 100, None, 0),
        (100, 5, None, None),  # 64-bit counter went down: reset, no honest delta
        (2**32 - 10, 5, 32, 15),  # 32-bit wrap
        (2**32 - 10, 2**31 + 5, 32, None),  # too big to be a wrap: a reset
        (10, 3, 32, None),  # small value going down: reset, not a near-full wrap
    ],
)
def test_counter_delta(previous: int, current: int, width: int | None, expected: int | None) -> None:
    assert counter_delta(previous, current, width) == expected


def test_rates_first_read_is_none_then_per_second() -> None:
    rates = CounterRates()
    assert rates.rate("eth0", 1000, 10.0) is None
    assert rates.rate("eth0", 3000, 12.0) == 1000.0
    assert rates.rate("eth0", 10, 13.0) is None  # reset
    assert rates.rate("eth0", 110, 14.0) == 100.0  # counting again from the reset value


def test_no_elapsed_time_gives_none() -> None:
    rates = CounterRates()
    rates.rate("k", 1, 5.0)
    assert rates.rate("k", 2, 5.0) is None


def test_forget_missing_drops_vanished_keys() -> None:
    rates = CounterRates()
    rates.rate("a", 1, 1.0)
    rates.rate("b", 1, 1.0)
    rates.forget_missing({"a"})
    assert rates.rate("a", 2, 2.0) == 1.0
    assert rates.rate("b", 2, 2.0) is None
