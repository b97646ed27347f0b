"""The help screen says what the GPU table's throttle reasons and the guard's line mean, in words."""

from __future__ import annotations

from rigmon.tui.screens.help import HELP
from rigmon.tui.widgets.gpu_table import REASON_NAMES


def test_every_throttle_reason_the_gpu_table_names_is_explained_in_the_help() -> None:
    # The table says "HW power brake", "app clocks", "SW power cap": NVML's words, which nothing on screen
    # explained (is "app clocks" trouble? is "HW slowdown" the rail?).
    section = HELP.split("## GPUs, processes and the guard", 1)
    assert len(section) == 2, "no section on the GPU table"
    body = section[1].split("\n## ", 1)[0]
    for name in REASON_NAMES.values():
        assert f"*{name}*" in body, name
    for words in ("GPU memory", "mark", "would take", "released", "G1"):
        assert words in body, words


def test_the_help_legend_names_every_guard_mark() -> None:
    # A guard holding its caps because it cannot read the rail had no mark, and so no word in the legend.
    body = HELP.split("## GPUs, processes and the guard", 1)[1].split("\n## ", 1)[0]
    for mark in ("`G1`", "`G1h`", "`G1?`", "`g1`", "`G!`", "`G0h`", "`Goff`", "`dry1`"):
        assert mark in body, mark
