"""Kernel log records with numbers no kernel prints: a header, an Xid code or a dmesg timestamp of
hundreds or thousands of digits (a garbled line, or any program writing to /dev/kmsg). Such a record
is not parsed as one (or its time is not taken); nothing raises. Before, int() refused 5000 digits
with ValueError, which ended the thread that pushes Xid events; 400 digits went into the frame."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft
from rigmon.collectors.kernel_log import KernelLogCollector
from rigmon.collectors.kernel_log_formats import parse_kmsg_record, parse_log_record
from rigmon.collectors.sysfs_values import U64_MAX
from rigmon.collectors.kernel_messages import parse_xid
from tests.collectors.test_kernel_log import FixedClock, _append, _tree

LONG = "9" * 400
TOO_LONG = "9" * 5000
XID_79 = "NVRM: Xid (PCI:0000:1d:00): 79, GPU has fallen off the bus."


@pytest.mark.parametrize("header", [f"4,{LONG},1", f"4,1,{TOO_LONG}", f"{TOO_LONG},1,1", f"4,{U64_MAX + 1},1"],
                         ids=["seq-400-digits", "time-5000-digits", "prefix-5000-digits", "seq-past-u64"])
def test_a_kmsg_header_number_past_64_bits_is_no_record(header: str) -> None:
    assert parse_kmsg_record(f"{header},-;{XID_79}\n") is None


def test_a_kmsg_header_of_64_bits_is_a_record() -> None:
    record = parse_kmsg_record(f"4,{U64_MAX},{U64_MAX},-;{XID_79}\n")
    assert record is not None and (record.seq, record.ts_us) == (U64_MAX, U64_MAX)


@pytest.mark.parametrize("code", [LONG, TOO_LONG], ids=["400-digits", "5000-digits"])
def test_an_xid_code_of_hundreds_of_digits_is_no_xid(code: str) -> None:
    assert parse_xid(f"NVRM: Xid (PCI:0000:1d:00): {code}, pid=1, name=python, text") is None


@pytest.mark.parametrize("raw", [f"[{TOO_LONG}.000001] {XID_79}\n",
                                 f"Nov 27 16:00:00 node01 kernel: [{TOO_LONG}.5] {XID_79}\n"],
                         ids=["dmesg", "journal"])
def test_a_timestamp_of_thousands_of_digits_is_no_time(raw: str) -> None:
    fmt = "journal" if raw.startswith("Nov") else "dmesg"
    record = parse_log_record(raw, fmt, 1)  # type: ignore[arg-type]
    assert record is not None and record.ts_us is None


def test_the_pushing_thread_reads_on_past_a_garbled_record(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    pushed: list[object] = []
    arrived = threading.Event()

    def push(records: Sequence[object]) -> None:
        pushed.extend(records)
        if any(isinstance(r, EventDraft) and (r.data or {}).get("xid") == 79 for r in records):
            arrived.set()

    collector = KernelLogCollector(root, FixedClock())
    collector.start(push)
    try:
        _append(root, f"4,3,{TOO_LONG},-;{XID_79}\n4,4,50000000,-;NVRM: Xid (PCI:0000:1b:00): {TOO_LONG}, x\n")
        _append(root, f"4,5,50000100,-;{XID_79}\n")
        assert arrived.wait(10)
    finally:
        collector.close()
    # The garbled Xid is no Xid (the record with a garbled header is rejected whole: a gap in the sequence).
    assert [(e.data or {}).get("xid") for e in pushed if isinstance(e, EventDraft) and e.kind == "xid"] == [79]


def test_a_record_rejected_for_its_header_is_not_said_overwritten(tmp_path: Path) -> None:
    # Its sequence number was in the garbled header: the gap it leaves was said as records "overwritten
    # before rigmon read", which sends an operator to the ring buffer's size for a record that was read.
    from rigmon.schema import KernelLogReading

    root = _tree(tmp_path)
    collector = KernelLogCollector(root, FixedClock())
    try:
        collector.collect()
        _append(root, f"4,3,{TOO_LONG},-;{XID_79}\n4,4,50000000,-;next record\n")
        first = collector.collect()
        # A real overrun after it still is one: 5..7 never came, 8 is garbled, 9 is read.
        _append(root, f"4,{LONG},1,-;garbled\n4,9,50000200,-;after a gap\n")
        second = collector.collect()
    finally:
        collector.close()

    def said(records: Sequence[object]) -> list[tuple[str, dict[str, object] | None]]:
        return [(r.kind, r.data) for r in records if isinstance(r, EventDraft)]

    assert said(first) == [("kernel_log_garbled", {"garbled": 1, "garbled_total": 1})]
    [event] = [r for r in first if isinstance(r, EventDraft)]
    assert "could not read" in event.message and "overwritten" not in event.message
    assert said(second) == [("kernel_log_overrun", {"lost": 3, "lost_total": 3}),
                            ("kernel_log_garbled", {"garbled": 1, "garbled_total": 2})]
    assert [r.lost_total for r in second if isinstance(r, KernelLogReading)] == [3]
