"""/proc files with a number no kernel prints (past 64 bits: a garbled read). A diskstats or net/dev
line or a meminfo key with one is dropped, the rest read; /proc/mdstat and /proc/stat, parsed
strictly, say which line is not theirs. Before, such a number went into the frame (400 digits: the
frame could not be encoded) or failed int() (5000 digits: Python's digit limit as the message)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rigmon.collectors.disks import parse_diskstats
from rigmon.collectors.host_proc import parse_meminfo, parse_net_dev, parse_proc_stat
from rigmon.collectors.mdstat import MdstatError, parse_mdstat
from rigmon.collectors.sysfs_values import U64_MAX
from tests.collectors.test_fixture_hosts import HOSTS, run_collector

NUMBERS = ["9" * 400, "9" * 5000, str(U64_MAX + 1)]
IDS = ["400-digits", "5000-digits", "2**64"]
SDA = "   8       0 sda 9172 1234 1034642 5523 2071 1876 123464 9381 0 11720 14904\n"
MDSTAT = (HOSTS / "raid0-two-arrays-loading" / "proc" / "mdstat").read_text()
NET_DEV_HEAD = "Inter-|   Receive\n face |bytes    packets\n"


@pytest.mark.parametrize("number", NUMBERS, ids=IDS)
def test_a_diskstats_line_with_a_number_past_64_bits_is_skipped(number: str) -> None:
    garbled = f"   8       1 sda1 {number} 13 2818 52 11 8 152 0 0 80 120\n"
    parsed = parse_diskstats(SDA + garbled + f"{number} 2 sda2 1 2 3 4 5 6 7 8 9 10 11\n")
    assert [d.name for d in parsed.disks] == ["sda"]
    assert len(parsed.skipped) == 2


@pytest.mark.parametrize("number", NUMBERS, ids=IDS)
def test_an_mdstat_number_past_64_bits_is_not_mdstat(number: str) -> None:
    with pytest.raises(MdstatError, match="number of"):
        parse_mdstat(MDSTAT.replace("3906764800", number, 1))
    assert parse_mdstat(MDSTAT.replace("3906764800", str(U64_MAX), 1))[0].blocks_kib == U64_MAX


@pytest.mark.parametrize("number", NUMBERS, ids=IDS)
def test_a_meminfo_value_past_64_bits_is_skipped(number: str) -> None:
    assert parse_meminfo(f"MemTotal:       16384 kB\nMemAvailable:   {number} kB\n") == {"MemTotal": 16384 * 1024}


@pytest.mark.parametrize("number", NUMBERS, ids=IDS)
def test_a_net_dev_line_with_a_number_past_64_bits_is_skipped(number: str) -> None:
    parsed = parse_net_dev(NET_DEV_HEAD + "  eth0: " + " ".join([number] + ["1"] * 15) + "\n"
                           "  eth1: " + " ".join(["2"] * 16) + "\n")
    assert list(parsed.interfaces) == ["eth1"] and len(parsed.skipped) == 1


@pytest.mark.parametrize("number", NUMBERS[:2], ids=IDS[:2])
def test_proc_stat_names_the_garbled_line(number: str) -> None:
    with pytest.raises(ValueError, match="bad cpu line") as stat:
        parse_proc_stat(f"cpu  {number} 1 2 3 4 5 6 7 0 0\n")
    assert len(str(stat.value)) < 300


def test_the_md_collector_says_which_line_is_garbled(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(HOSTS / "raid0-two-arrays-loading", root, symlinks=True)
    (root / "proc" / "mdstat").write_text(MDSTAT.replace("3906764800", "9" * 400, 1))
    got = run_collector("raid", root)
    assert got["state"] == "error"
    assert "not /proc/mdstat (number of 400 digits)" in str(got["error"])
