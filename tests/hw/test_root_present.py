"""HostRoot.read_present: a file that is not there (an hwmon input its driver removed) told apart
from one that is there and fails to read (EIO, ENODATA: a sensor that did not answer this time)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from rigmon.hw.root import HostRoot, read_scope
from rigmon.sim import write_tree
from tests.hw.refusals import refuse_reads

CURR = "/sys/class/hwmon/hwmon3/curr2_input"
VOLTS = "/sys/class/hwmon/hwmon3/in1_input"


def test_a_file_that_reads_is_read_as_read_attr_reads_it(tmp_path: Path) -> None:
    write_tree(tmp_path, {CURR: "41000\n", VOLTS: " \n"})
    root = HostRoot(tmp_path)
    assert root.read_present(CURR) == root.read_attr(CURR) == "41000"
    assert root.read_present(VOLTS) == root.read_attr(VOLTS) == ""


def test_a_file_that_is_not_there_raises_and_read_attr_still_says_none(tmp_path: Path) -> None:
    write_tree(tmp_path, {VOLTS: "12000\n"})
    root = HostRoot(tmp_path)
    with pytest.raises(FileNotFoundError):
        root.read_present(CURR)
    with pytest.raises(FileNotFoundError):
        root.read_present("/sys/class/hwmon/hwmon9/temp1_input")  # its chip gone too
    assert root.read_attr(CURR) is None


@pytest.mark.parametrize("code", [errno.EIO, errno.ENODATA, errno.EAGAIN])
def test_a_file_that_is_there_but_fails_to_read_is_none_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  code: int) -> None:
    write_tree(tmp_path, {CURR: "41000\n", VOLTS: "12000\n"})
    root = HostRoot(tmp_path)
    refuse_reads(monkeypatch, lambda path: code if path.endswith("curr2_input") else None)
    for _ in range(3):
        with read_scope():
            assert root.read_present(CURR) is None
            assert root.read_present(CURR) is None  # again in the same scope: the same answer
            assert root.read_present(VOLTS) == "12000"
        assert root.read_present(CURR) is None


def test_a_kept_file_removed_since_raises_and_one_made_again_reads(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, {CURR: "41000\n", VOLTS: "12000\n"})
    root = HostRoot(tmp_path)
    with read_scope():
        assert root.read_present(CURR) == "41000"
    assert root.kept_fds() == 1
    tree.remove(CURR)  # the driver unbinds the sensor: its input goes, the chip stays
    for _ in range(2):
        with read_scope(), pytest.raises(FileNotFoundError):
            root.read_present(CURR)
    assert root.kept_fds() == 0
    tree.write(CURR, "40000\n")
    with read_scope():
        assert root.read_present(CURR) == "40000"
