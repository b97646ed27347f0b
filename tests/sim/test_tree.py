"""The simulator's Tree leaves unchanged files alone and still rewrites what was removed or changed."""

from __future__ import annotations

import os
from pathlib import Path

from rigmon.sim.tree import Tree


def test_unchanged_content_is_not_rewritten(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    tree.write("/sys/class/foo/name", "bar\n")
    inode = os.stat(tmp_path / "sys/class/foo/name").st_ino
    tree.write("/sys/class/foo/name", "bar\n")
    assert os.stat(tmp_path / "sys/class/foo/name").st_ino == inode  # no rename happened
    tree.write("/sys/class/foo/name", "baz\n")
    assert (tmp_path / "sys/class/foo/name").read_text() == "baz\n"


def test_removed_or_appended_files_are_written_again(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    tree.write("/sys/class/foo/name", "bar\n")
    tree.remove("/sys/class/foo")
    tree.write("/sys/class/foo/name", "bar\n")
    assert (tmp_path / "sys/class/foo/name").read_text() == "bar\n"
    (tmp_path / "sys/class/foo/name").unlink()  # gone behind the tree's back (a test, a reset)
    tree.write("/sys/class/foo/name", "bar\n")
    assert (tmp_path / "sys/class/foo/name").read_text() == "bar\n"
    tree.write("/dev/kmsg", "a\n")
    tree.append("/dev/kmsg", "b\n")
    tree.write("/dev/kmsg", "a\n")
    assert (tmp_path / "dev/kmsg").read_text() == "a\n"


def test_a_directory_renewed_is_a_new_empty_one_written_again(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    tree.write("/sys/class/hwmon/hwmon3/name", "pmbus\n")
    tree.write("/sys/class/hwmon/hwmon3/in1_input", "12000\n")
    inode = os.stat(tmp_path / "sys/class/hwmon/hwmon3").st_ino
    tree.renew_dir("/sys/class/hwmon/hwmon3")
    assert os.stat(tmp_path / "sys/class/hwmon/hwmon3").st_ino != inode
    assert os.listdir(tmp_path / "sys/class/hwmon/hwmon3") == []
    assert sorted(os.listdir(tmp_path)) == ["sys"]  # the old one removed, nothing left beside
    tree.write("/sys/class/hwmon/hwmon3/name", "pmbus\n")  # the same content, written again
    assert (tmp_path / "sys/class/hwmon/hwmon3/name").read_text() == "pmbus\n"
    tree.renew_dir("/sys/class/hwmon/hwmon4")  # none before: made
    assert (tmp_path / "sys/class/hwmon/hwmon4").is_dir()
