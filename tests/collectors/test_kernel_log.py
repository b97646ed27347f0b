"""Kernel log: /dev/kmsg record parsing, NVRM Xid, fallen-off-the-bus and AER lines, and the collector."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.base import CollectorError, EventDraft, NoData
from rigmon.collectors.kernel_log_formats import detect_log_format, parse_dmesg_record, parse_journal_record
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
        # Old drivers print the bus id without a PCI domain: domain 0.
        ("18:00.0", "0000:18:00.0", "00000000:18:00.0", "0000:18:00"),
    ],
)
def test_bus_id_spellings_join(text: str, sysfs: str, nvml: str, xid: str) -> None:
    ids = parse_pci_bus_id(text)
    assert ids is not None and (ids.sysfs, ids.nvml, ids.xid) == (sysfs, nvml, xid)


@pytest.mark.parametrize("text", ["", "1a:00", "0000:1g:00.0", "123456789:1a:00.0", "0000:1a:20.0"])
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


# -- Every form drivers and kernels have printed (issue 22) ---------------------------------

@pytest.mark.parametrize(("message", "bus", "xid", "pid", "process", "text"), [
    # R3xx and earlier: no "PCI:" in the parenthesis.
    ("NVRM: Xid (0000:03:00): 13, 0003 00000000 00008297 00001098 00000000 00000044",
     "0000:03:00.0", 13, None, None, "0003 00000000 00008297 00001098 00000000 00000044"),
    ("NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.", "0000:03:00.0", 79, None, None,
     "GPU has fallen off the bus."),
    # The process name without pid=, and pid= without a name.
    ("NVRM: Xid (PCI:0000:3b:00): 13, name=python, Graphics Exception", "0000:3b:00.0", 13, None, "python",
     "Graphics Exception"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "0000:3b:00.0", 79, "1234", None,
     "GPU has fallen off the bus."),
    ("NVRM: Xid (0000:01:00): 16, ", "0000:01:00.0", 16, None, None, ""),
])
def test_xid_forms(message: str, bus: str, xid: int, pid: str | None, process: str | None, text: str) -> None:
    line = parse_xid(message)
    assert line is not None
    assert (line.pci_bus_id, line.xid, line.pid, line.process, line.text) == (bus, xid, pid, process, text)


@pytest.mark.parametrize(("message", "bus"), [
    ("NVRM: GPU 0000:29:00.0: GPU has fallen off the bus.", "0000:29:00.0"),
    # No PCI domain (older drivers): domain 0.
    ("NVRM: GPU 18:00.0: GPU has fallen off the bus.", "0000:18:00.0"),
    # Bumblebee-Project/Bumblebee#554
    ("NVRM: GPU at 0000:01:00.0 has fallen off the bus.", "0000:01:00.0"),
])
def test_fallen_off_bus_forms(message: str, bus: str) -> None:
    assert parse_off_bus(message) == bus


def test_aer_old_format_keeps_who_reported_it() -> None:
    # Ubuntu Forums, 'Creating image file of SD card' (kernel 4.15): id = bus << 8 | devfn.
    old = parse_aer("pcieport 0000:00:1c.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, "
                    "id=00e0(Transmitter ID)")
    assert old is not None
    assert (old.pci_bus_id, old.severity, old.error_type, old.agent, old.requester_id) == (
        "0000:00:1c.0", "Corrected", "Data Link Layer", "Transmitter ID", "0000:00:1c.0")
    fatal = parse_aer("pcieport 0000:00:01.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
                      "id=0010(Receiver ID)")
    assert fatal is not None and (fatal.agent, fatal.requester_id) == ("Receiver ID", "0000:00:02.0")
    new = parse_aer("nvme 0000:34:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Data Link Layer, "
                    "(Receiver ID)")
    assert new is not None and (new.agent, new.requester_id) == ("Receiver ID", None)


@pytest.mark.parametrize(("raw", "fmt"), [
    ("4,51235,1843221988,-;NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.\n", "kmsg"),
    ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n", "dmesg"),
    ("[Sun Feb 23 16:24:18 2025] NVRM: GPU Board Serial Number: 1650124014249\n", "dmesg"),
    ("syslog:err   : 2025-05-27T04:18:56,089671+00:00 NVRM: Xid (PCI:0000:04:00): 79, x\n", "dmesg"),
    ("<4>[    5.140900] NVRM: loading\n", "dmesg"),
    ("Feb 14 05:03:41 gpu-1 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link INIT\n", "journal"),
    ("Feb 14 05:03:41 gpu-1 systemd[1]: Started systemd-journald.service - Journal Service.\n", "journal"),
    ("2025-01-17T17:10:43+0000 host kernel: IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready\n", "journal"),
    ("NVRM: Xid (0000:01:00): 16, \n", None),
    ("Personalities : [raid1]\n", None),
])
def test_log_format_detection(raw: str, fmt: str | None) -> None:
    assert detect_log_format(raw) == fmt


def test_dmesg_and_journal_records() -> None:
    rec = parse_dmesg_record("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
                             "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n", 7)
    assert rec is not None and (rec.seq, rec.ts_us, rec.wall_at, rec.level) == (7, 1843308145, None, 4)
    assert rec.message == "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has"
    iso = parse_dmesg_record("syslog:err   : 2025-05-27T04:18:56,089671+00:00 hello\n", 1)
    assert iso is not None and (iso.level, iso.wall_at, iso.message) == (3, 1748319536.089671, "hello")
    assert parse_dmesg_record("no timestamp\n", 1) is None
    plain = parse_dmesg_record("no timestamp\n", 1, require_time=False)
    assert plain is not None and (plain.message, plain.ts_us) == ("no timestamp", None)
    j = parse_journal_record("May 10 22:25:01 jambi kernel: [176830.774761] NVRM: Xid (0000:03:00): 13, 0003\n", 3)
    assert j is not None and (j.ts_us, j.message) == (176830774761, "NVRM: Xid (0000:03:00): 13, 0003")
    assert parse_journal_record("May 10 22:24:49 jambi mtp-probe: checking bus 2\n", 4) is None
    k = parse_journal_record("2025-01-17T17:10:43+0000 h kernel: text\n", 5)
    assert k is not None and k.wall_at == 1737133843.0


def test_text_log_lines_appended_later_become_events(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/var/log/dmesg": "[   10.000000] Linux version 6.8.0\n"})
    collector = KernelLogCollector(HostRoot(tmp_path), FixedClock(), path="/var/log/dmesg")
    collector.collect()
    with open(tmp_path / "var/log/dmesg", "a") as fh:
        fh.write("[ 1843.308145] pcieport 0000:00:1c.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, "
                 "id=00e0(Transmitter ID)\n"
                 "[ 1844.000000] NVRM: Xid (0000:03:00): 79, GPU has fallen off the bus.\n")
    events = [r for r in collector.collect() if isinstance(r, EventDraft)]
    aer, xid = events
    assert (aer.kind, aer.subject, aer.data and aer.data["agent"], aer.data and aer.data["requester_id"]) == (
        "pcie_aer", "pci:0000:00:1c.0", "Transmitter ID", "0000:00:1c.0")
    assert aer.message == "PCIe Corrected error on 0000:00:1c.0: Data Link Layer (Transmitter ID 0000:00:1c.0)"
    assert (xid.kind, xid.subject, xid.data and xid.data["source"]) == ("xid", "pci:0000:03:00.0", "dmesg")
    collector.close()


@pytest.mark.parametrize(("text", "fmt", "why"), [
    ("Personalities : [raid1]\nmd0 : active raid1 sda1[0]\n", "auto", "not a kernel log rigmon knows"),
    ("[   10.000000] Linux version 6.8.0\n", "journal", "kernel_log.format is 'journal'"),
])
def test_a_log_in_a_format_rigmon_does_not_know_is_an_error(tmp_path: Path, text: str, fmt: str, why: str) -> None:
    write_tree(tmp_path, {"/var/log/kern": text})
    collector = KernelLogCollector(HostRoot(tmp_path), FixedClock(), path="/var/log/kern", fmt=fmt)  # type: ignore[arg-type]
    with pytest.raises(CollectorError) as info:
        collector.collect()
    assert why in str(info.value) and "/var/log/kern" in str(info.value)
    collector.close()


def test_dmesg_without_timestamps_is_read_when_configured(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/var/log/kern": "NVRM: Xid (0000:01:00): 16, \nHead 00000000 Count 00006e2e\n"})
    with pytest.raises(CollectorError):
        KernelLogCollector(HostRoot(tmp_path), FixedClock(), path="/var/log/kern").collect()
    reading = KernelLogCollector(HostRoot(tmp_path), FixedClock(), path="/var/log/kern", fmt="dmesg").collect()[0]
    assert isinstance(reading, KernelLogReading)
    assert (reading.records_total, reading.matched_total) == (2, 1)


class CountingReader(KmsgReader):
    """A KmsgReader that counts how often the collector looked at the log."""

    looks = 0

    def read_records(self) -> list[bytes]:
        self.looks += 1
        return super().read_records()


def test_an_idle_log_does_not_wake_the_thread_and_close_wakes_it(tmp_path: Path) -> None:
    import time

    root = _tree(tmp_path)
    collector = KernelLogCollector(root, FixedClock())
    reader = CountingReader(root)
    collector._reader = reader
    collector.start(lambda records: None)
    # The history at open, then one look right after the thread set its watch up.
    deadline = time.monotonic() + 10
    while reader.looks < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    if getattr(reader, "_notify_fd", 0) is None:
        collector.close()
        pytest.skip("no inotify here: the file is polled")
    try:
        at_start = reader.looks
        # A poll every 50 ms looked about ten times in this half second; blocked on the
        # file's inotify watch, the thread does not look until the log changes.
        time.sleep(0.5)
        idle_looks = reader.looks - at_start
    finally:
        thread = collector._thread
        collector.close()
    assert idle_looks == 0
    # close() interrupts the wait (IDLE_WAIT_S is longer than close's join).
    assert thread is not None and not thread.is_alive()


def test_a_gpu_seen_at_open_keeps_its_index_after_its_sysfs_entry_is_gone(tmp_path: Path) -> None:
    import shutil

    root = _tree(tmp_path)
    # Nothing in the log at open matches: the GPUs are read at open all the same.
    (tmp_path / "dev" / "kmsg").write_text("6,1,1000000,-;Linux version 6.8.0-49-generic\n")
    collector = KernelLogCollector(root, FixedClock())
    try:
        collector.collect()
        shutil.rmtree(root.path("/sys/bus/pci/devices/0000:1c:00.0"))
        _append(root, "4,2,50000000,-;NVRM: Xid (PCI:0000:1c:00): 79, GPU has fallen off the bus.\n")
        events = [r for r in collector.collect() if isinstance(r, EventDraft)]
    finally:
        collector.close()
    assert [(e.kind, e.subject) for e in events] == [("xid", "gpu:2")]


def test_a_reader_that_is_only_read_takes_no_inotify_watch(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    reader = KmsgReader(root)
    reader.open(from_end=True)
    try:
        _append(root, "6,3,3000000,-;later\n")
        assert reader.read_records() == [b"6,3,3000000,-;later\n"]
        assert reader._notify_fd is None
    finally:
        reader.close()
