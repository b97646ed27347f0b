"""What an hwmon chip's directory listing says is missing: an input its label or limits describe, or any reading."""

from __future__ import annotations

import pytest

from rigmon.collectors.hwmon_chips import chip_incomplete, parse_missing_inputs


@pytest.mark.parametrize(
    ("entries", "missing"),
    [
        (["in1_input", "in1_label", "in1_max", "name"], ()),
        # The labels come before the inputs (a driver adding its files after its device appeared).
        (["curr2_label", "in1_input", "in1_label", "in2_label", "name"], ("curr2", "in2")),
        (["fan1_min", "temp1_max", "temp2_input"], ("fan1", "temp1")),
        # amdgpu: the average is the power reading; its cap and sclk labels describe no input.
        (["freq1_label", "power1_average", "power1_cap", "power1_label"], ()),
        # Not channels: an intrusion alarm, a PWM's limits, a file without a channel number.
        (["intrusion0_alarm", "pwm1_max", "temp_min", "in0_input"], ()),
    ],
)
def test_parse_missing_inputs(entries: list[str], missing: tuple[str, ...]) -> None:
    assert parse_missing_inputs(entries) == missing


@pytest.mark.parametrize(
    ("entries", "incomplete"),
    [
        (["name", "temp1_input"], False),
        (["name", "power1_average"], False),
        (["name"], True),  # the directory is there, its files not yet
        (["in1_label", "name", "temp1_input"], True),
    ],
)
def test_chip_incomplete(entries: list[str], incomplete: bool) -> None:
    assert chip_incomplete(entries) == incomplete
