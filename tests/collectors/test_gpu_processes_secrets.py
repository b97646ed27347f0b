"""GPU processes collector: the secrets on a job's command line never reach its reading or its events."""

from __future__ import annotations

from pathlib import Path

from rigmon.collectors.base import EventDraft
from rigmon.collectors.gpu_processes import GpuProcessCollector
from rigmon.hw.nvml import open_nvml_processes
from rigmon.hw.root import HostRoot
from rigmon.schema import GpuProcessReading
from rigmon.sim.job import PASSWD, SimProcess, proc_stat_line, proc_status
from rigmon.sim.nvml import FakeGpuProcess, FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.sim.tree import Tree, write_tree
from rigmon.typed import to_data
from tests.collectors.gpu_helpers import StepClock

HF = "hf_" + "Zq8Lm2Rt6Yw1Ux4Ip7Oa3Sd5Fg9Hj0Kk"
SECRETS = (HF, "w4ndbK3y", "hunter2", "pr0xyPw", "s3cr3tEnv")
#: A job started with its credentials on the command line (env(1) in front, as a launcher writes it).
ARGV = ("/usr/bin/env", "WANDB_API_KEY=s3cr3tEnv", "/opt/conda/bin/python3", "train.py", f"--hf-token={HF}",
        "--wandb-key", "w4ndbK3y", "--db-password=hunter2", "--data", "https://me:pr0xyPw@data.lan/shards",
        "--tokenizer", "gpt2", "--max-tokens", "512")
SHOWN = ("/usr/bin/env WANDB_API_KEY=<redacted> /opt/conda/bin/python3 train.py --hf-token=<redacted> "
         "--wandb-key <redacted> --db-password=<redacted> --data https://<redacted>@data.lan/shards "
         "--tokenizer gpt2 --max-tokens 512")
BUS = "0000:c3:00.0"


def _proc(tree: Tree, pid: int, argv: tuple[str, ...]) -> None:
    proc = SimProcess(pid=pid, ppid=1, uid=1000, argv=argv, start_ticks=123_400)
    tree.write(f"/proc/{pid}/stat", proc_stat_line(proc))
    tree.write(f"/proc/{pid}/status", proc_status(proc, "alice"))
    tree.write(f"/proc/{pid}/cmdline", "\0".join(argv).encode() + b"\0")


def _leaks(records: list[object]) -> list[str]:
    text = repr([to_data(r) for r in records])
    return [s for s in SECRETS if s in text]


def test_nvidia_and_amd_processes_keep_their_command_but_not_its_secrets(tmp_path: Path) -> None:
    # Before: the reading's cmdline (frames, journal, dashboard, snapshots) held the token and passwords whole,
    # and its short command ("env WANDB_API_KEY=...": /metrics' command label, the events' messages) the key.
    tree = write_tree(tmp_path, {"/proc/stat": "btime 1699990000\n", f"/sys/bus/pci/devices/{BUS}/vendor": "0x1002\n",
                                 "/etc/passwd": PASSWD + "alice:x:1000:1000::/home/alice:/bin/bash\n"})
    tree.symlink("/sys/class/drm/card0/device", f"../../../bus/pci/devices/{BUS}")
    machine = FakeNvmlMachine(v100_sxm2_gpus(1))
    clock = StepClock()
    with serving(tmp_path, machine):
        collector = GpuProcessCollector(open_nvml_processes(HostRoot(tmp_path), timeout_s=10.0), HostRoot(tmp_path),
                                        clock)
        try:
            first = list(collector.collect())  # nothing yet: the jobs start after the agent
            _proc(tree, 4242, ARGV)
            machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
            _proc(tree, 6001, ARGV)
            tree.symlink("/proc/6001/fd/5", "/dev/dri/renderD128")
            tree.write("/proc/6001/fdinfo/5", f"drm-driver:\tamdgpu\ndrm-client-id:\t3\ndrm-pdev:\t{BUS}\n")
            clock.t_s = 1.0
            records = list(collector.collect())
        finally:
            collector.close()
    assert first == []
    readings = [r for r in records if isinstance(r, GpuProcessReading)]
    events = [r for r in records if isinstance(r, EventDraft)]
    assert sorted((r.vendor, r.pid) for r in readings) == [("amd", 6001), ("nvidia", 4242)]
    assert [e.kind for e in events] == ["gpu_process_started"] * 2
    assert _leaks(records) == []
    for reading in readings:
        assert reading.cmdline == SHOWN
        assert reading.command == "env WANDB_API_KEY=<redacted>"
