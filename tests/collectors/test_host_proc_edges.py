"""Edge cases of the /proc parsers the host collector runs every tick (/proc/stat, /proc/net/dev):
what a line must hold to be read, what is skipped, what is counted."""

from __future__ import annotations

import pytest

from rigmon.collectors.host_proc import parse_net_dev, parse_proc_stat
from rigmon.collectors.sysfs_values import U64_MAX
from tests.collectors.test_host import NET_DEV_HEAD

GOOD_FIELDS = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16"]


def _net_line(name: str, fields: list[str]) -> str:
    return f"  {name}: {' '.join(fields)}\n"


@pytest.mark.parametrize("field", [
    "-5", "+5", "1_0", "0x10", "1.5", "²", "٣",  # a sign, Python's own syntax, no integer, no ASCII digit
    "0" * 20 + "1",  # 21 digits: no u64 is printed so, whatever its value
    str(U64_MAX + 1),
])
@pytest.mark.parametrize("index", [0, 4, 8, 15])  # used (rx bytes, tx bytes) or not (fifo, tx compressed)
def test_a_net_dev_line_with_a_field_that_is_no_counter_is_skipped(field: str, index: int) -> None:
    fields = list(GOOD_FIELDS)
    fields[index] = field
    parsed = parse_net_dev(NET_DEV_HEAD + _net_line("eth0", fields) + _net_line("eth1", GOOD_FIELDS))
    assert list(parsed.interfaces) == ["eth1"]
    assert parsed.skipped == (_net_line("eth0", fields).strip(),)


def test_a_net_dev_line_reads_its_first_sixteen_fields_only() -> None:
    # The largest counter, and leading zeros within 20 digits, are counters; a 17th field is not looked at.
    fields = [str(U64_MAX), "0" * 19 + "7"] + GOOD_FIELDS[2:] + ["garbage"]
    parsed = parse_net_dev(NET_DEV_HEAD + _net_line("eth0", fields))
    eth0 = parsed.interfaces["eth0"]
    assert (eth0.rx_bytes, eth0.rx_packets, eth0.rx_errors, eth0.rx_dropped) == (U64_MAX, 7, 3, 4)
    assert (eth0.tx_bytes, eth0.tx_packets, eth0.tx_errors, eth0.tx_dropped) == (9, 10, 11, 12)
    assert parsed.skipped == ()


@pytest.mark.parametrize("text", [
    "",  # read empty
    NET_DEV_HEAD,  # no interface
    NET_DEV_HEAD + "  no colon here 1 2 3\n",  # not an interface line at all: neither read nor skipped
])
def test_a_net_dev_without_interface_lines_reads_none(text: str) -> None:
    assert parse_net_dev(text).interfaces == {} and parse_net_dev(text).skipped == ()


def test_a_net_dev_line_cut_short_is_skipped() -> None:
    parsed = parse_net_dev(NET_DEV_HEAD + _net_line("eth0", GOOD_FIELDS[:15]))
    assert parsed.interfaces == {} and parsed.skipped == (_net_line("eth0", GOOD_FIELDS[:15]).strip(),)


@pytest.mark.parametrize(("text", "count"), [
    ("cpu  1 2 3 4\n", 0),  # no per-CPU line
    ("cpu  1 2 3 4", 0),  # the aggregate line ends the text
    ("cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 3 4", 2),  # the last per-CPU line ends the text
    ("cpu  1 2 3 4\n\ncpu0 1 2 3 4\n", 0),  # not right after the aggregate line
    ("cpu  1 2 3 4\ncpu0 1 2 3 4\nintr 0\ncpu1 1 2 3 4\n", 1),  # only those right after it
    ("cpu  1 2 3 4\ncpux 1 2 3 4\ncpu0 1 2 3 4\n", 0),  # no CPU number
    ("intr 0\ncpu  1 2 3 4\ncpu0 1 2 3 4\n", 1),  # wherever the aggregate line is
    ("cpu  1 2 3 4\r\ncpu0 1 2 3 4\r\ncpu1 1 2 3 4\r\n", 2),  # CRLF
])
def test_parse_proc_stat_counts_the_cpu_lines_right_after_the_aggregate(text: str, count: int) -> None:
    cpu = parse_proc_stat(text)
    assert (cpu.busy, cpu.total, cpu.cpu_count) == (6, 10, count)


@pytest.mark.parametrize("text", [
    "cpu  1 2 ³ 4\ncpu0 1 2 3 4\n",  # a digit that is not ASCII
    "cpu  1 2 -3 4\n",
    "cpu  1 2 " + "0" * 21 + " 4\n",  # longer than any u64
    "cpu0 1 2 3 4\n",  # per-CPU lines without the aggregate
])
def test_parse_proc_stat_refuses_a_garbled_aggregate_line(text: str) -> None:
    with pytest.raises(ValueError):
        parse_proc_stat(text)
