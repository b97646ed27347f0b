"""HostRoot on files that are not what a collector expects: a directory where an attribute was, a
symlink loop, a read the driver refuses with EACCES, a name with a NUL in it (built from a value
read from the hardware), a name too long for a file. Each is "not there" for that one file; nothing
raises, the next file reads."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from rigmon.hw.root import HostRoot, read_scope
from rigmon.sim import write_tree
from tests.hw.refusals import refuse_reads

SPEED = "/sys/bus/pci/devices/0000:1c:00.0/current_link_speed"
WIDTH = "/sys/bus/pci/devices/0000:1c:00.0/current_link_width"


@pytest.fixture
def pci(tmp_path: Path) -> HostRoot:
    write_tree(tmp_path, {SPEED: "8.0 GT/s PCIe\n", WIDTH: "16\n"})
    return HostRoot(tmp_path)


def assert_unreadable(root: HostRoot, rel: str) -> None:
    assert root.read_attr(rel) is None
    assert root.read_text(rel) is None
    assert root.read_bytes(rel) is None
    assert root.read_parsed(rel, str.split) is None
    assert root.read_attr(WIDTH) == "16"


def test_a_directory_where_an_attribute_was_is_absent(pci: HostRoot) -> None:
    real = pci.path(SPEED)
    real.unlink()
    real.mkdir()
    assert_unreadable(pci, SPEED)


def test_a_symlink_loop_is_absent_and_lists_nothing(pci: HostRoot) -> None:
    real = pci.path(SPEED)
    real.unlink()
    os.symlink(real.name, real)
    assert_unreadable(pci, SPEED)
    assert pci.listdir(SPEED) == []
    assert pci.realpath(SPEED) is None


def test_an_attribute_that_became_a_directory_between_ticks_is_absent(pci: HostRoot) -> None:
    with read_scope():
        assert pci.read_attr(SPEED) == "8.0 GT/s PCIe"
    real = pci.path(SPEED)
    real.unlink()
    real.mkdir()
    with read_scope():
        assert pci.read_attr(SPEED) is None
        assert pci.read_attr(WIDTH) == "16"


def test_a_read_refused_with_eacces_is_absent(pci: HostRoot, monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver's show() that answers -EACCES (the open succeeded, as for any readable attribute)."""
    refuse_reads(monkeypatch, lambda path: errno.EACCES if path.endswith("current_link_speed") else None)
    assert_unreadable(pci, SPEED)


def test_a_name_with_a_nul_names_nothing(pci: HostRoot) -> None:
    """An NVMe controller's ``address`` read with a NUL in it, used to find its PCI function."""
    rel = "/sys/bus/pci/devices/0000:1c:00.0\x00/current_link_speed"
    assert_unreadable(pci, rel)
    assert pci.listdir("/sys/bus/pci/devices/0000:1c:00.0\x00") == []
    assert pci.readlink(rel) is None
    assert pci.realpath(rel) is None
    assert not pci.exists(rel)


def test_a_name_too_long_for_a_file_names_nothing(pci: HostRoot) -> None:
    """An ``address`` of 400 digits, used as a directory name (longer than NAME_MAX)."""
    rel = f"/sys/bus/pci/devices/{'9' * 400}/current_link_speed"
    assert_unreadable(pci, rel)
    assert pci.listdir(f"/sys/bus/pci/devices/{'9' * 400}") == []
    assert pci.readlink(rel) is None
    assert pci.realpath(rel) is None
