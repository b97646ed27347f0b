"""`md_text` and `md_code`: a string from an agent escaped where it would act in Markdown, and only there
(REPORT.md is read with ``cat`` as often as in a viewer)."""

from __future__ import annotations

from rigmon.snapshot.report_text import md_code, md_text


def test_plain_text_is_left_as_it_reads() -> None:
    for text in ["GPU 3 (NVIDIA Tesla V100-SXM2-16GB) lost: fell off the bus", "psu_rail_low_critical",
                 "epoch 3 checkpoint, loss=0.25", "11.255", "-5 dBm", "http://v100-a:9871", "gpus[0].power_w",
                 "refused \\x1b[2J", "GPU #3", "tb:0-1"]:
        assert md_text(text) == text


def test_escapes_go_where_they_act() -> None:
    assert md_text("<b>x</b> & *y*") == "\\<b>x\\</b> \\& \\*y\\*"
    assert md_text("a|b\nc") == "a\\|b c"
    assert md_text("# x") == "\\# x" and md_text("node #") == "node \\#" and md_text("1. x") == "1\\. x"
    assert md_text("[a](u)") == "\\[a\\](u)" and md_text("_u_ snake_case") == "\\_u\\_ snake_case"
    assert md_text("C:\\") == "C:\\\\" and md_text("\\*") == "\\\\\\*"
    assert md_code("gpu_lost") == "`gpu_lost`" and md_code("a`b") == "``a`b``" and md_code("`x") == "`` `x ``"
