"""Devices the kernel names in bytes that are not UTF-8 (md arrays and members, block devices,
RDMA devices and counters, NVMe controllers): read as their directories are listed, so their
paths are found, and carried in records as `rigmon.hw.names.text_name` gives them, so that two
names that differ only in such bytes stay two records and two series (U+FFFD made them one)."""

from __future__ import annotations

from pathlib import Path

from rigmon.agent.frame_json import frame_json
from rigmon.collectors.disks import DiskCollector
from rigmon.collectors.infiniband import InfinibandCollector
from rigmon.collectors.nvme import NvmeCollector
from rigmon.collectors.raid import RaidCollector
from rigmon.hw.root import HostRoot
from rigmon.schema import (
    SCHEMA_VERSION,
    CollectorStatus,
    DiskReading,
    Frame,
    InfinibandPortReading,
    NvmeReading,
    RaidArrayReading,
    Readings,
)
from tests.alarms.helpers import FakeClock
from tests.collectors.root_helpers import write_byte_tree

DISKSTATS = b" 8 %d %s %d 0 %d 5 0 0 0 0 0 10 15\n"


def _md_tree(root: Path) -> None:
    """Two raid1 arrays named ``md_a`` + one bad byte, linked from /dev/md under two names that
    differ the same way; each has a member named so, with its own slot and error count."""
    mdstat = b"Personalities : [raid1] \n"
    files: dict[bytes, bytes] = {}
    for n, bad in enumerate((b"\xf6", b"\xfc")):
        md, member = b"md_a" + bad, b"sd" + bad
        mdstat += b"%s : active raid1 %s[1] sdz%d[0]\n      1000 blocks super 1.2 [2/2] [UU]\n\n" % (md, member, n)
        files[b"/dev/md/mirr" + bad + b"r"] = b"-> ../" + md
        files[b"/sys/block/" + md + b"/md/level"] = b"raid1\n"
        files[b"/sys/block/" + md + b"/md/uuid"] = b"0000000%d-0000-0000-0000-000000000000\n" % n
        files[b"/sys/block/" + md + b"/md/dev-" + member + b"/state"] = b"in_sync\n"
        files[b"/sys/block/" + md + b"/md/dev-" + member + b"/slot"] = b"1\n"
        files[b"/sys/block/" + md + b"/md/dev-" + member + b"/errors"] = b"%d\n" % (3 + n)
        files[b"/sys/block/" + member + b"/size"] = b"1\n"
        files[b"/sys/block/sdz%d/size" % n] = b"1\n"
    files[b"/proc/mdstat"] = mdstat + b"unused devices: <none>\n"
    write_byte_tree(root, files)


def test_md_arrays_and_members_differing_only_in_a_bad_byte_stay_apart(tmp_path: Path) -> None:
    # Read with U+FFFD, "md_a\ufffd" was no array header md prints (the collector failed), the
    # /dev/md names became one, and the members named no sysfs directory.
    _md_tree(tmp_path)
    arrays = [r for r in RaidCollector(HostRoot(tmp_path), FakeClock()).collect() if isinstance(r, RaidArrayReading)]
    assert [(a.name, a.md_name, a.uuid) for a in arrays] == [
        ("md_a\\xf6", "mirr\\xf6r", "00000000-0000-0000-0000-000000000000"),
        ("md_a\\xfc", "mirr\\xfcr", "00000001-0000-0000-0000-000000000000")]
    members = [(m.name, m.slot, m.role, m.errors_total) for a in arrays for m in a.members if m.name.startswith("sd\\")]
    assert members == [("sd\\xf6", 1, "in_sync", 3), ("sd\\xfc", 1, "in_sync", 4)]
    for a in arrays:
        assert a.name.encode("utf-8") and all(m.name.encode("utf-8") for m in a.members)


def test_block_devices_differing_only_in_a_bad_byte_are_two_disks_with_their_rates(tmp_path: Path) -> None:
    # Read with U+FFFD, neither name was in /sys/block's listing: no disk was reported at all.
    write_byte_tree(tmp_path, {
        b"/proc/diskstats": DISKSTATS % (0, b"sd\xf6", 100, 1000) + DISKSTATS % (16, b"sd\xfc", 200, 2000),
        b"/sys/block/sd\xf6/size": b"1\n", b"/sys/block/sd\xfc/size": b"1\n",
    })
    clock = FakeClock()
    collector = DiskCollector(HostRoot(tmp_path), clock)
    first = [r for r in collector.collect() if isinstance(r, DiskReading)]
    assert [(d.name, d.read_bytes_total) for d in first] == [("sd\\xf6", 1000 * 512), ("sd\\xfc", 2000 * 512)]
    clock.t += 1.0
    write_byte_tree(tmp_path, {b"/proc/diskstats": DISKSTATS % (0, b"sd\xf6", 100, 1010)
                               + DISKSTATS % (16, b"sd\xfc", 200, 2020)})
    second = [r for r in collector.collect() if isinstance(r, DiskReading)]
    assert [(d.name, d.read_bytes_per_s) for d in second] == [("sd\\xf6", 10 * 512.0), ("sd\\xfc", 20 * 512.0)]


def test_rdma_devices_and_counters_differing_only_in_a_bad_byte_stay_two_series(tmp_path: Path) -> None:
    files: dict[bytes, bytes] = {}
    for n, bad in enumerate((b"\xe8", b"\xe9")):
        port = b"/sys/class/infiniband/mlx5_" + bad + b"/ports/1"
        files[port + b"/state"] = b"4: ACTIVE\n"
        files[port + b"/rate"] = b"100 Gb/sec (4X EDR)\n"
        files[port + b"/counters/symbol_error"] = b"0\n"
        files[port + b"/hw_counters/out_of_b\xf6ffer"] = b"%d\n" % (10 + n)
        files[port + b"/hw_counters/out_of_b\xfcffer"] = b"%d\n" % (20 + n)
    write_byte_tree(tmp_path, files)
    ports = [r for r in InfinibandCollector(HostRoot(tmp_path), FakeClock()).collect()
             if isinstance(r, InfinibandPortReading)]
    got = {(p.name, p.device): [(c.name, c.value_total) for c in p.hw_counters] for p in ports}
    assert got == {("mlx5_\\xe8/1", "mlx5_\\xe8"): [("out_of_b\\xf6ffer", 10), ("out_of_b\\xfcffer", 20)],
                   ("mlx5_\\xe9/1", "mlx5_\\xe9"): [("out_of_b\\xf6ffer", 11), ("out_of_b\\xfcffer", 21)]}
    frame = Frame(schema=SCHEMA_VERSION, node="n1", run_id="r", seq=1, taken_at=1.0, agent_start=1.0,
                  collectors={"infiniband": CollectorStatus(state="ok", ok=True)}, readings=Readings(infiniband=ports))
    assert frame_json(frame)  # plain text: no lone surrogate for the frame to mend


def test_nvme_controllers_differing_only_in_a_bad_byte_stay_two_with_their_state_followed(tmp_path: Path) -> None:
    files = {b"/sys/class/nvme/nvme" + bad + b"/" + attr: value for bad in (b"\xf6", b"\xfc")
             for attr, value in ((b"model", b"Disk " + bad + b"\n"), (b"state", b"live\n"))}
    write_byte_tree(tmp_path, files)
    collector = NvmeCollector(HostRoot(tmp_path))
    assert [(r.name, r.state) for r in collector.collect() if isinstance(r, NvmeReading)] == [
        ("nvme\\xf6", "live"), ("nvme\\xfc", "live")]
    write_byte_tree(tmp_path, {b"/sys/class/nvme/nvme\xfc/state": b"resetting\n"})
    events = [r for r in collector.collect() if not isinstance(r, NvmeReading)]
    assert [(e.kind, e.subject) for e in events] == [("nvme_state_changed", "nvme:nvme\\xfc")]
