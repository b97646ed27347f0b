"""The dashboard's number formats."""

from __future__ import annotations

from rigmon.tui import format as fmt


def test_signed_never_shows_a_negative_zero() -> None:
    # Two PSUs sharing equally read -0.04 % from an equal share: "-0.0" looked like a lean.
    assert fmt.signed(-0.04, 1) == "+0.0"
    assert fmt.signed(-0.0, 2) == "+0.00"
    assert fmt.signed(-0.06, 1) == "-0.1"
    assert fmt.signed(0.06) == "+0.06"
    assert fmt.signed(None) == fmt.MISSING
