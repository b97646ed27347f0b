"""What an hwmon chip's directory listing says is missing (an input its label or limits describe, or any
reading), and what a tick's read of an input that is gone does to the chip's facts."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.hwmon_chips import HwmonChip, chip_incomplete, chip_of, parse_missing_inputs, read_chip_input
from rigmon.hw.root import HostRoot
from rigmon.sim import write_tree
from tests.hw.refusals import refuse_reads

CHIP: HwmonChip = ("hwmon3", 4711)
INPUT = "/sys/class/hwmon/hwmon3/temp1_input"


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



def test_chip_of() -> None:
    chips = [("hwmon1", 10), ("hwmon3", 4711), ("hwmon30", 12)]
    assert chip_of(chips, INPUT) == CHIP
    assert chip_of(chips, "/sys/class/hwmon/hwmon4/temp1_input") is None


def _facts_read_at(facts: DeviceFacts[HwmonChip, int], reads: int) -> list[int]:
    """The reads of the device set (of ``reads``) at which ``CHIP``'s facts were read."""
    read_at = []
    for n in range(reads):
        facts.begin([CHIP])
        facts.get(CHIP, lambda _: read_at.append(n) or n)
    return read_at


def test_an_input_gone_has_the_facts_read_at_the_next_tick_one_that_fails_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = write_tree(tmp_path, {INPUT: "41000\n", "/sys/class/hwmon/hwmon3/name": "k10temp\n"})
    root = HostRoot(tmp_path)
    facts: DeviceFacts[HwmonChip, int] = DeviceFacts()
    assert _facts_read_at(facts, 2) == [0]
    assert read_chip_input(root, facts, CHIP, INPUT) == "41000"
    refuse_reads(monkeypatch, lambda path: errno.EIO if path.endswith(INPUT) else None)
    assert read_chip_input(root, facts, CHIP, INPUT) is None
    assert _facts_read_at(facts, 3) == []  # there, not answering: the facts are kept
    monkeypatch.undo()
    tree.remove(INPUT)
    assert read_chip_input(root, facts, CHIP, INPUT) is None
    # Read at the next tick (where the read of the facts finds the chip lacking it and backs off
    # with `DeviceFacts.recheck`), not every tick: a reread does not back off by itself.
    assert _facts_read_at(facts, 3) == [0]
