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


def test_a_rate_fits_the_cluster_row_s_nine_cells() -> None:
    # A node on 100 GbE RoCE moves 10.05 GB/s: at 80 columns the net column (9 cells) read
    # "10.05 GB…", the unit cut off.
    from rigmon.tui.row_columns import COLUMNS

    cells = min(c.min_width for c in COLUMNS if c.key in ("storage", "net"))
    assert cells == 9
    for value in (0.0, 999.0, 512e3, 999e6, 1.07e9, 9.994e9, 10.05e9, 12.34e9, 99.9e9, 123.4e9):
        assert len(fmt.rate(value)) <= cells, fmt.rate(value)
    assert fmt.rate(1.07e9) == "1.07 GB/s" and fmt.rate(12.34e9) == "12.3 GB/s" and fmt.rate(123.4e9) == "123 GB/s"
