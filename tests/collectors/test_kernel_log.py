"""Kernel log: /dev/kmsg record parsing, NVRM Xid, fallen-off-the-bus and AER lines, and the collector."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft, NoData
from rigmon.collectors.kernel_log import (
    KernelLogCollector,
    KernelLogMatcher,
    parse_aer,
    parse_kmsg_record,
    parse_off_bus,
    parse_pci_bus_id,
    parse_xid,
)
from rigmon.hw.kmsg import KmsgReader
from rigmon.hw.root import HostRoot
from rigmon.schema import KernelLogReading
from rigmon.sim.tree import write_tree


class FixedClock:
    def __init__(self, at: float = 1_700_000_000.0) -> None:
        self.at = at

    def time(self) -> float:
        return self.at

    def monotonic(self) -> float:
        return self.at - 1_700_000_000.0


def test_record_header_message_and_dictionary() -> None:
    raw = (
        "4,9001,812345678,-;nvidia 0000:1a:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
        "(Receiver ID)\n SUBSYSTEM=pci\n DEVICE=+pci:0000:1a:00.0\n"
    )
    record = parse_kmsg_record(raw)
    assert record is not None
    assert (record.level, record.facility, record.seq, record.ts_us) == (4, 0, 9001, 812345678)
    assert record.message.startswith("nvidia 0000:1a:00.0: PCIe Bus Error")
    assert record.fields == {"SUBSYSTEM": "pci", "DEVICE": "+pci:0000:1a:00.0"}


def test_record_with_caller_field_and_escapes() -> None:
    record = parse_kmsg_record("30,2081,5144212,-,caller=T412;udevd[80]: path C:\\x5cdata\\x0anext\n")
    assert record is not None
    assert (record.level, record.facility) == (6, 3)
    assert record.message == "udevd[80]: path C:\\data\nnext"


@pytest.mark.parametrize("raw", ["", "not a record", "4,x,1,-;text", "4,1;short header"])
def test_not_a_record(raw: str) -> None:
    assert parse_kmsg_record(raw) is None


@pytest.mark.parametrize(
    ("text", "sysfs", "nvml", "xid"),
    [
        ("00000000:1A:00.0", "0000:1a:00.0", "00000000:1A:00.0", "0000:1a:00"),
        ("0000:1a:00.0", "0000:1a:00.0", "00000000:1A:00.0", "0000:1a:00"),
        ("PCI:0000:1a:00", "0000:1a:00.0", "00000000:1A:00.0", "0000:1a:00"),
        ("0001:3B:00.1", "0001:3b:00.1", "00000001:3B:00.1", "0001:3b:00"),
    ],
)
def test_bus_id_spellings_join(text: str, sysfs: str, nvml: str, xid: str) -> None:
    ids = parse_pci_bus_id(text)
    assert ids is not None and (ids.sysfs, ids.nvml, ids.xid) == (sysfs, nvml, xid)


@pytest.mark.parametrize("text", ["", "1a:00.0", "0000:1g:00.0", "123456789:1a:00.0"])
def test_bad_bus_ids(text: str) -> None:
    assert parse_pci_bus_id(text) is None


def test_xid_79_without_process() -> None:
    xid = parse_xid("NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.")
    assert xid is not None
    assert (xid.pci_bus_id, xid.xid, xid.pid, xid.process, xid.text) == (
        "0000:1a:00.0", 79, None, None, "GPU has fallen off the bus.")


def test_xid_with_process() -> None:
    xid = parse_xid("NVRM: Xid (PCI:0000:1d:00): 13, pid=9911, name=python, Graphics SM Warp Exception on "
                    "(GPC 1, TPC 0, SM 0): Out Of Range Address")
    assert xid is not None
    assert (xid.xid, xid.pid, xid.process) == (13, "9911", "python")
    assert xid.text.startswith("Graphics SM Warp Exception")


@pytest.mark.parametrize(
    "message",
    [
        "NVRM: Xid (PCI:0000:1b:00): 74, pid=<unknown>, name=<unknown>, NVLink: fatal error detected on link 2"
        "(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
        "NVRM: Xid (PCI:0000:1b:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 2"
        "(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
    ],
)
def test_xid_unknown_process_variants(message: str) -> None:
    xid = parse_xid(message)
    assert xid is not None
    assert (xid.pci_bus_id, xid.xid, xid.pid, xid.process) == ("0000:1b:00.0", 74, None, None)
    assert xid.text.startswith("NVLink: fatal error detected on link 2")


def test_xid_on_mig_gpu() -> None:
    xid = parse_xid("NVRM: Xid (PCI:0000:1c:00 GPU-I:01 GPU-CI:00): 48, pid=1, name=x, An uncorrectable DBE")
    assert xid is not None and (xid.pci_bus_id, xid.xid) == ("0000:1c:00.0", 48)


def test_not_an_xid() -> None:
    assert parse_xid("NVRM: GPU at PCI:0000:1a:00: GPU-5e8c2f6a-0b1d-4c4e-9a57-3f0d2b6c91aa") is None


def test_fallen_off_bus_short_form() -> None:
    assert parse_off_bus("NVRM: GPU 0000:1a:00.0: GPU has fallen off the bus.") == "0000:1a:00.0"


def test_fallen_off_bus_multi_line_in_one_record() -> None:
    record = parse_kmsg_record(
        "4,100,1,-;NVRM: The NVIDIA GPU 0000:1d:00.0\\x0aNVRM: (PCI ID: 10de:1db1) installed in this system has"
        "\\x0aNVRM: fallen off the bus and is not responding to commands.\n")
    assert record is not None
    assert parse_off_bus(record.message) == "0000:1d:00.0"


def test_fallen_off_bus_multi_line_over_records() -> None:
    matcher = KernelLogMatcher()
    lines = [
        "4,100,1,-;NVRM: The NVIDIA GPU 0000:1d:00.0",
        "4,101,2,-;NVRM: (PCI ID: 10de:1db1) installed in this system has",
        "4,102,3,-;NVRM: fallen off the bus and is not responding to commands.",
    ]
    matches = [matcher.feed(rec) for rec in (parse_kmsg_record(line) for line in lines) if rec is not None]
    assert [m.kind if m else None for m in matches] == [None, None, "gpu_off_bus"]
    assert matches[2] is not None and matches[2].pci_bus_id == "0000:1d:00.0"


def test_aer_detail_line_old_and_new_kernels() -> None:
    old = parse_aer("nvidia 0000:1a:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)")
    assert old is not None
    assert (old.pci_bus_id, old.severity, old.error_type, old.agent) == (
        "0000:1a:00.0", "Corrected", "Physical Layer", "Receiver ID")
    new = parse_aer("nvidia 0000:1b:00.0: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), "
                    "type=Transaction Layer, (Requester ID)")
    assert new is not None and new.severity == "Uncorrectable (Non-Fatal)"


def test_aer_header_and_bit_lines_are_not_detail_lines() -> None:
    assert parse_aer("pcieport 0000:00:02.0: AER: Corrected error received: 0000:1a:00.0") is None
    assert parse_aer("nvidia 0000:1a:00.0:    [ 0] RxErr                  (First)") is None


# -- the collector on a tree --------------------------------------------------------------

BOOT = (
    "6,1,1000000,-;Linux version 6.8.0-49-generic\n"
    "4,2,2000000,-;NVRM: Xid (PCI:0000:1b:00): 13, pid=1, name=python, Graphics SM Warp Exception\n"
)
GPU_SYSFS = {
    f"/sys/bus/pci/devices/0000:{bus}:00.0/{name}": value
    for bus in ("1a", "1b", "1c", "1d")
    for name, value in (("vendor", "0x10de\n"), ("class", "0x030200\n"))
}


def _tree(tmp_path: Path) -> HostRoot:
    write_tree(tmp_path, {"/dev/kmsg": BOOT, "/proc/uptime": "100.00 50.00\n", **GPU_SYSFS,
                          "/sys/bus/pci/devices/0000:00:03.0/vendor": "0x8086\n",
                          "/sys/bus/pci/devices/0000:00:03.0/class": "0x060400\n"})
    return HostRoot(tmp_path)


def _append(root: HostRoot, text: str) -> None:
    with open(root.path("/dev/kmsg"), "a", encoding="utf-8") as fh:
        fh.write(text)


def test_history_is_kept_without_events_then_new_lines_become_events(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    collector = KernelLogCollector(root, FixedClock(), keep_lines=10)
    try:
        first = collector.collect()
        assert not [r for r in first if isinstance(r, EventDraft)]
        assert [line.text for line in collector.recent_lines()][0].startswith("NVRM: Xid (PCI:0000:1b:00): 13")
        _append(root, "4,3,50000000,-;NVRM: Xid (PCI:0000:1d:00): 79, GPU has fallen off the bus.\n"
                      "4,4,50000100,-;NVRM: GPU 0000:1d:00.0: GPU has fallen off the bus.\n"
                      "4,5,51000000,-;nvidia 0000:1a:00.0: PCIe Bus Error: severity=Corrected, "
                      "type=Physical Layer, (Receiver ID)\n SUBSYSTEM=pci\n DEVICE=+pci:0000:1a:00.0\n"
                      "4,6,52000000,-;pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
                      "type=Transaction Layer, (Requester ID)\n")
        second = collector.collect()
    finally:
        collector.close()
    events = [r for r in second if isinstance(r, EventDraft)]
    assert [(e.kind, e.subject, e.severity) for e in events] == [
        ("xid", "gpu:3", "critical"),
        ("pcie_aer", "gpu:0", "warning"),
        ("pcie_aer", "pci:0000:00:03.0", "critical"),
    ]
    xid = events[0]
    assert xid.data is not None
    assert (xid.data["xid"], xid.data["pci_bus_id"], xid.data["pci_bus_id_nvml"], xid.data["pci_bus_id_xid"]) == (
        79, "0000:1d:00.0", "00000000:1D:00.0", "0000:1d:00")
    # Boot was 100 s before "now"; the record is 50 s after boot.
    assert xid.at == pytest.approx(FixedClock().at - 100 + 50)
    reading = next(r for r in second if isinstance(r, KernelLogReading))
    assert (reading.records_total, reading.matched_total, reading.lost_total) == (6, 5, 0)
    assert [line.kind for line in reading.recent] == ["xid", "xid", "gpu_off_bus", "pcie_aer", "pcie_aer"]


def test_sequence_gaps_count_as_lost(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    collector = KernelLogCollector(root, FixedClock())
    try:
        collector.collect()
        _append(root, "6,10,3000000,-;later record\n")
        reading = next(r for r in collector.collect() if isinstance(r, KernelLogReading))
    finally:
        collector.close()
    assert reading.lost_total == 7
    # Said once, as an event, when it happens; not again on the next read.
    _append(root, "6,11,3000001,-;next record\n")
    collector = KernelLogCollector(root, FixedClock())
    try:
        collector.collect()
        _append(root, "6,20,3000002,-;after a gap\n")
        events = [r for r in collector.collect() if isinstance(r, EventDraft)]
        _append(root, "6,21,3000003,-;no gap\n")
        again = [r for r in collector.collect() if isinstance(r, EventDraft)]
    finally:
        collector.close()
    assert [(e.kind, e.severity, e.data) for e in events] == [
        ("kernel_log_overrun", "warning", {"lost": 8, "lost_total": 15})]
    assert "8 kernel log records overwritten" in events[0].message
    assert again == []


def test_no_kernel_log_is_absent(tmp_path: Path) -> None:
    collector = KernelLogCollector(HostRoot(tmp_path), FixedClock())
    with pytest.raises(NoData):
        collector.collect()
    collector.close()


def test_pushed_events_from_the_thread(tmp_path: Path) -> None:
    import threading

    root = _tree(tmp_path)
    got: list[object] = []
    arrived = threading.Event()

    def push(records: object) -> None:
        assert isinstance(records, list)
        got.extend(records)
        arrived.set()

    collector = KernelLogCollector(root, FixedClock())
    collector.start(push)
    try:
        _append(root, "4,3,50000000,-;NVRM: Xid (PCI:0000:1c:00): 48, pid=4410, name=python, An uncorrectable "
                      "double bit error (DBE) has been detected on GPU in the framebuffer at partition 2.\n")
        assert arrived.wait(10)
    finally:
        collector.close()
    assert [(e.kind, e.subject) for e in got if isinstance(e, EventDraft)] == [("xid", "gpu:2")]


def test_file_reader_joins_continuation_lines_and_waits_for_whole_lines(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/dev/kmsg": "4,1,1,-;first\n SUBSYSTEM=pci\n4,2,2,-;partial"})
    reader = KmsgReader(HostRoot(tmp_path))
    reader.open(from_end=False)
    try:
        assert reader.read_records() == [b"4,1,1,-;first\n SUBSYSTEM=pci\n"]
        _append(HostRoot(tmp_path), " line\n")
        assert reader.read_records() == [b"4,2,2,-;partial line\n"]
    finally:
        reader.close()


def test_file_reader_cuts_a_line_without_newline(tmp_path: Path) -> None:
    from rigmon.hw.kmsg import MAX_FILE_RECORD_BYTES

    write_tree(tmp_path, {"/dev/kmsg": "4,1,1,-;first\n"})
    root = HostRoot(tmp_path)
    reader = KmsgReader(root)
    reader.open(from_end=False)
    try:
        assert reader.read_records() == [b"4,1,1,-;first\n"]
        # A writer that never ends its line: what is held stays bounded.
        for _ in range(5):
            _append(root, "x" * (MAX_FILE_RECORD_BYTES // 2))
            reader.read_records()
            assert len(reader._partial) <= MAX_FILE_RECORD_BYTES
        _append(root, "tail of the long line\n4,2,2,-;second\n")
        assert reader.read_records() == [b"4,2,2,-;second\n"]
    finally:
        reader.close()
    assert reader.truncated == 1
