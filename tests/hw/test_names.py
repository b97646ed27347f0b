"""Names the kernel gives in bytes as text (`rigmon.hw.names`), and files of such names read whole."""

from __future__ import annotations

import os
from pathlib import Path

from rigmon.hw.names import TextNames, text_name
from rigmon.hw.root import HostRoot


def test_text_names_are_worked_out_once_per_name_and_bounded() -> None:
    names = TextNames(limit=2)
    bad = b"sd\xf6".decode("utf-8", "surrogateescape")
    assert names(bad) == "sd\\xf6" == text_name(bad)
    assert names(bad) is names(bad)  # the memo's own string, not worked out again
    assert [names("sda"), names("sdb")] == ["sda", "sdb"]  # the third name emptied the memo first
    assert names(bad) == "sd\\xf6"


def test_a_parse_is_shared_only_by_readers_that_decode_the_same_way(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "diskstats").write_bytes(b"8 0 sd\xf6 1\n")
    os.makedirs(os.fsencode(tmp_path / "sys" / "block") + b"/sd\xf6")
    root = HostRoot(tmp_path)

    def names(text: str) -> list[str]:
        return [line.split()[2] for line in text.splitlines()]

    assert root.read_parsed("/proc/diskstats", names) == ["sd\ufffd"]
    escaped = root.read_parsed("/proc/diskstats", names, errors="surrogateescape")
    assert escaped == ["sd\udcf6"] == root.listdir("/sys/block")  # the name as its directory is listed
    assert root.read_parsed("/proc/diskstats", names) == ["sd\ufffd"]
