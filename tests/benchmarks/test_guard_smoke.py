"""The undervolt-guard benchmark runs in its ``--smoke`` form and tells the incident's story (not timed)."""

from __future__ import annotations

from tests.benchmarks.test_smoke import row, run


def test_guard_undervolt_benchmark_shape() -> None:
    out = run("guard_undervolt.py")
    assert row(out, "no guard")[1].startswith("GPU 3")
    assert row(out, "guard dry-run")[1].startswith("GPU 3") and "engaged" in row(out, "guard dry-run")[4]
    enforce = row(out, "guard enforce")
    assert enforce[1] == "none" and "engaged" in enforce[4] and float(enforce[3]) > 11.5
