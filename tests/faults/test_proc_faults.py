"""Fault matrix, /proc and the kernel log: /proc/mdstat malformed or cut short while an agent
samples it; the kernel log overrunning the reader (sequence gaps, the log starting over, junk
records). The agent keeps sampling, counts what it lost, and is back to normal on its own."""

from __future__ import annotations

import shutil
from pathlib import Path

from rigmon.sim.tree import Tree, write_tree
from tests.faults.harness import agent_config, only, running_agent, seqs_contiguous

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
MALFORMED = (
    "",
    "Personalities : [raid1]\n",
    "md1 : \n",
    "md1 : active raid1\n      [4/4] [UUUU]\n",
    "\x00\xff garbage " * 50,
    "md1 : active raid5 " + "sda[0] " * 5000 + "\n",
    "md0 : active raid1 sdf1[x] sdg1[1](Q)\n      blocks super [2/1] [U_]\n      [==>....]  recovery = nan% (1/0)\n",
)


async def test_mdstat_malformed_or_truncated(tmp_path: Path) -> None:
    root = tmp_path / "node"
    shutil.copytree(FIXTURES / "raid1-degraded-recovering", root, symlinks=True)
    tree = Tree(root)
    good = (root / "proc/mdstat").read_text()
    # Hung only after the harness's 5 s: a call on the 5000-member line takes ~15 ms, and a busy CI
    # machine once stretched one past 0.5 s. A parser stuck on bad text still shows as hung.
    config = agent_config(root, {"collectors": only("raid"), "agent": {"interval_s": 0.01}})
    async with running_agent(config) as h:
        first = await h.wait_for(lambda f: len(f.readings.raid) == 2, "both arrays")
        cuts = [good[:i] for i in range(0, len(good), 9)]
        for text in (*cuts, *MALFORMED):
            tree.write("/proc/mdstat", text)
            seq = h.latest.seq if h.latest else 0
            await h.wait_for(lambda f, s=seq: f.seq > s + 1, "a frame of this content")
        tree.write("/proc/mdstat", good)
        back = await h.wait_for(lambda f: len(f.readings.raid) == 2 and f.collectors["raid"].state == "ok",
                                "both arrays again")
        await h.api_alive()
    # Text that is not mdstat is a collector error naming the line (issue 22), never made-up
    # arrays; the agent keeps sampling and the collector is ok again with the good file.
    assert {f.collectors["raid"].state for f in h.frames} <= {"ok", "absent", "pending", "error"}
    errors = [f for f in h.frames if f.collectors["raid"].state == "error"]
    assert all(not f.readings.raid and "not /proc/mdstat" in (f.collectors["raid"].error or "") for f in errors)
    assert [a.name for a in back.readings.raid] == [a.name for a in first.readings.raid]
    kinds = [e.kind for f in h.frames for e in f.events]
    assert "raid_array_removed" in kinds and "raid_array_added" in kinds
    assert seqs_contiguous(h.frames)


KMSG_BOOT = "6,1,1000000,-;Linux version 6.8.0\n"
GPUS = {f"/sys/bus/pci/devices/0000:{bus}:00.0/{name}": value for bus in ("1a", "1b")
        for name, value in (("vendor", "0x10de\n"), ("class", "0x030200\n"))}


def xid(seq: int, bus: str, code: int) -> str:
    return f"4,{seq},{seq * 1000},-;NVRM: Xid (PCI:0000:{bus}:00): {code}, pid=1, name=python, test\n"


async def test_kernel_log_overrun(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/dev/kmsg": KMSG_BOOT, "/proc/uptime": "100.00 50.00\n", **GPUS})
    log = tmp_path / "dev/kmsg"
    config = agent_config(tmp_path, {"collectors": only("kernel_log")})

    def append(text: str | bytes) -> None:
        with open(log, "ab") as fh:
            fh.write(text.encode() if isinstance(text, str) else text)

    async with running_agent(config) as h:
        await h.wait_for(lambda f: f.readings.kernel_log is not None, "the kernel log reader")
        # The reader fell behind: records 3..99 were overwritten before it read them.
        append(xid(2, "1a", 13) + xid(100, "1b", 79))
        gap = await h.wait_for(lambda f: f.readings.kernel_log is not None and f.readings.kernel_log.lost_total > 0,
                               "the lost records counted")
        assert gap.readings.kernel_log is not None and gap.readings.kernel_log.lost_total == 97
        # Junk between records: not UTF-8, NUL, a header without a message, a very long line.
        append(b"\xff\xfe\x00 not a record\n" + b"4,101,1,-\n" + b"6,102,1,-;" + b"x" * 100_000 + b"\n")
        append(xid(103, "1a", 48))
        await h.wait_for(lambda f: any(e.kind == "xid" and e.data.get("xid") == 48 for e in f.events), "Xid 48")
        # The log starts over (a new file, lower sequence numbers): read from its start.
        log.write_text(KMSG_BOOT + xid(2, "1a", 74))
        await h.wait_for(lambda f: any(e.kind == "xid" and e.data.get("xid") == 74 for e in f.events),
                         "Xid 74 from the new log")
        await h.api_alive()
    xids = [(e.subject, e.data.get("xid")) for f in h.frames for e in f.events if e.kind == "xid"]
    assert xids == [("gpu:0", 13), ("gpu:1", 79), ("gpu:0", 48), ("gpu:0", 74)]
    assert {f.collectors["kernel_log"].state for f in h.frames} <= {"ok", "pending"}
    assert seqs_contiguous(h.frames)
