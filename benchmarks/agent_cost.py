"""Benchmark: agent CPU per sample and peak RSS of rigmon, node_exporter and glances on one simulated node.

One simulated node (scenario ``bench-node``: 4 V100-SXM2 as PCI devices in sysfs, two md
RAID0 arrays of two NVMe each behind two Thunderbolt/USB4 links, 10 and 100 GbE NICs, an
RM1 ADC on a pty, PMBus PSUs in hwmon) is written by ``rigmon sim --tree-only`` in a
process of its own. Every tool runs at once, as its own process, on that tree, for the
same window, and one client in this process pulls from each of them once a second:

- rigmon agent with the collectors whose sources node_exporter also reads (host, disks,
  raid, nvme, psu_hwmon), journal off; polled on ``/v1/latest``;
- rigmon agent as deployed (every collector, alarms, journal); polled on ``/v1/latest``;
- prometheus-node-exporter with ``--path.procfs``/``--path.sysfs`` on the tree and only the
  comparable collectors; scraped on ``/metrics``;
- glances in server mode (``-s -t 1 --cached-time 0``) with psutil's ``PROCFS_PATH`` set to the
  tree's ``/proc`` and the plugins without a counterpart switched off (the process list cannot run
  on a tree: psutil finds no PIDs there and glances fails); polled with XML-RPC ``getAll``.
  ``--cached-time 0`` matters: by default glances' XML-RPC server answers a pull that arrives
  within ``--cached-time`` (1 s) of its last refresh from its cache, so a pull a second would
  count about half the samples as fresh;
- glances as installed (every default plugin) on this machine's own files, for what glances costs
  where it can read everything it usually reads (a different input: not counted against the goals).

CPU is each process's own user+system time (/proc/PID/stat) over the window, divided by the
fresh samples it produced in the window: for rigmon the frames it published (``seq`` advanced),
for node_exporter the scrapes (it reads its files on every scrape), for glances the pulls whose
answer differed from the pull before (a cached answer is byte-identical). The script refuses to
report (exit 1) when any tool produced fresh samples for fewer than 90 % of the window's seconds
(``--smoke`` only warns). Memory is peak RSS (VmHWM). Ratios compare tools measured in
this same run. Missing tools are installed (apt-get prometheus-node-exporter, pip glances)
unless ``--no-install``; with ``--smoke`` (a few seconds, used by CI) a missing one is skipped.

    python benchmarks/agent_cost.py [--seconds 60] [--smoke] [--no-install]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import xmlrpc.client
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    cpu_seconds,
    free_port,
    machine,
    peak_rss_mb,
    rigmon_cmd,
    rigmon_env,
    stop,
)

#: node_exporter collectors reading what rigmon's host, disks, raid, nvme and psu_hwmon collectors read.
NODE_EXPORTER_COLLECTORS = ("cpu", "stat", "loadavg", "meminfo", "netdev", "netclass", "diskstats", "mdadm",
                            "nvme", "thermal_zone", "hwmon")
#: rigmon collectors whose sources node_exporter also reads.
RIGMON_COMMON = ("host", "disks", "raid", "nvme", "psu_hwmon")
#: glances plugins with no counterpart in rigmon or node_exporter (processes, containers, file systems...).
GLANCES_OFF = ("processlist,processcount,programlist,connections,containers,vms,ports,wifi,cloud,irq,folders,ip,"
               "amps,smart,alert,fs,quicklook,npu,now,psutilversion,version,help,mpp")
#: glances as installed (every default plugin, processes included) on this machine's own /proc and /sys: not the
#: tree, so a different input; it shows what running glances on a node costs, which the tree cannot.
GLANCES_DEFAULT = "glances (as installed, this machine)"
#: Runs glances with psutil reading the simulated /proc (argv[1]); the rest are glances' arguments.
GLANCES_ON_TREE = ("import sys, psutil\n"
                   "psutil.PROCFS_PATH = sys.argv[1]\n"
                   "sys.argv = ['glances'] + sys.argv[2:]\n"
                   "from glances import main\n"
                   "sys.exit(main())\n")


@dataclass
class Tool:
    """One measured process and the client that pulls from it."""

    name: str
    proc: subprocess.Popen[bytes]
    pull: Callable[[], object]
    log: Path
    pulls_ok: int = 0
    pulls_failed: int = 0
    last_error: str = ""
    last: object = None
    cpu0: float = 0.0
    cpu_s: float = 0.0
    rss_mb: float = 0.0
    seen: dict[str, str] = field(default_factory=dict)
    #: What makes an answer a new sample: rigmon's ``seq``, otherwise the whole answer.
    fresh_key: Callable[[object], object] = lambda answer: answer
    last_key: object = None
    fresh: int = 0
    fresh0: int = 0
    samples: int = 0


def node_exporter_binary() -> str | None:
    return shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def ensure_tools(install: bool) -> tuple[str | None, bool]:
    """Find node_exporter and glances, installing them when allowed."""
    binary = node_exporter_binary()
    if binary is None and install and shutil.which("apt-get"):
        print("installing prometheus-node-exporter with apt-get...", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=False)
        subprocess.run(["apt-get", "install", "-y", "-qq", "prometheus-node-exporter"], check=False,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        binary = node_exporter_binary()
    has_glances = importlib.util.find_spec("glances") is not None
    if not has_glances and install:
        print("installing glances with pip...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "glances"], check=False)
        importlib.invalidate_caches()
        has_glances = importlib.util.find_spec("glances") is not None
    return binary, has_glances


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read()  # type: ignore[no-any-return]


def start_sim(work: Path) -> tuple[subprocess.Popen[bytes], Path]:
    sim = subprocess.Popen(rigmon_cmd("sim", "--scenario", "bench-node", "--tree-only", str(work / "tree")),
                           env=rigmon_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert sim.stdout is not None
    line = sim.stdout.readline().decode().split()
    if len(line) != 2:
        raise SystemExit(f"simulator did not start: {sim.stderr.read().decode() if sim.stderr else ''}")
    tree = Path(line[1])
    deadline = time.monotonic() + 20
    while not ((tree / "proc/stat").exists() and (tree / "proc/mdstat").exists()
               and (tree / "dev/serial/by-id").is_dir()):
        if time.monotonic() > deadline:
            raise SystemExit("simulator wrote no tree")
        time.sleep(0.1)
    return sim, tree


def start_rigmon(name: str, work: Path, tree: Path, common_only: bool) -> Tool:
    port = free_port()
    lines = [f'[agent]\nnode = "bench"\nlisten = "127.0.0.1:{port}"\nroot = "{tree}"\n'
             f'state_dir = "{work / name}"\n']
    if common_only:
        lines.append("[journal]\nenabled = false\n")
        from rigmon.collectors import REGISTRY
        lines += [f"[collectors.{c}]\nenabled = false\n" for c in REGISTRY if c not in RIGMON_COMMON]
    else:
        lines.append('[psu]\nport = "/dev/serial/by-id/usb-rigmon_rm1-if00"\nprotocol = "rm1"\nbaud = 115200\n')
    config = work / f"{name}.toml"
    config.write_text("\n".join(lines))
    # --state-dir on the command line: it wins over a RIGMON_AGENT_STATE_DIR in the environment
    # (the test suite sets one), and two agents never share a state directory (it is locked).
    proc = subprocess.Popen(rigmon_cmd("agent", "--config", str(config), "--state-dir", str(work / name)),
                            env=rigmon_env(),
                            stdout=subprocess.DEVNULL, stderr=log_file(work, name))
    url = f"http://127.0.0.1:{port}/v1/latest"
    return Tool(name, proc, lambda: json.loads(http_get(url)), work / f"{name}.log", fresh_key=rigmon_seq)


def rigmon_seq(answer: object) -> object:
    """The frame's ``seq``: a frame already pulled is no new sample."""
    return answer.get("seq") if isinstance(answer, dict) else None


def log_file(work: Path, name: str) -> IO[bytes]:
    """A tool's stderr goes to a file: a pipe nobody drains would block a chatty tool mid-scrape."""
    return open(work / f"{name}.log", "wb")  # noqa: SIM115 - the child holds it; closed with the temp dir


def node_exporter_args(binary: str, tree: Path, port: int) -> list[str]:
    """node_exporter reading the simulated tree with the collectors comparable to rigmon's, on 127.0.0.1:port."""
    return [binary, "--collector.disable-defaults", f"--path.procfs={tree / 'proc'}",
            f"--path.sysfs={tree / 'sys'}", f"--path.rootfs={tree}", f"--path.udev.data={tree / 'run/udev/data'}",
            f"--web.listen-address=127.0.0.1:{port}", *(f"--collector.{c}" for c in NODE_EXPORTER_COLLECTORS)]


def start_node_exporter(binary: str, work: Path, tree: Path) -> Tool:
    port = free_port()
    args = node_exporter_args(binary, tree, port)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log_file(work, "node_exporter"))
    url = f"http://127.0.0.1:{port}/metrics"
    return Tool("node_exporter", proc, lambda: http_get(url).decode(), work / "node_exporter.log")


def start_glances(name: str, work: Path, tree: Path | None) -> Tool:
    """glances on the tree with the comparable plugins, or (``tree=None``) as installed, on this machine."""
    port = free_port()
    # --cached-time 0: refresh on every pull (the default 1 s serves a pull arriving within a second
    # of the last refresh from the cache, and a pull a second would then get about every other
    # answer stale). Freshness is still counted per pull, see `poller`.
    server_args = ["-s", "-B", "127.0.0.1", "-p", str(port), "-t", "1", "--cached-time", "0"]
    if tree is None:
        args = [sys.executable, "-m", "glances", *server_args]
    else:
        args = [sys.executable, "-c", GLANCES_ON_TREE, str(tree / "proc"), *server_args,
                "--disable-plugin", GLANCES_OFF]
    log = "glances-default" if tree is None else "glances"
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log_file(work, log))
    server = xmlrpc.client.ServerProxy(f"http://127.0.0.1:{port}/RPC2")
    lock = threading.Lock()

    def pull() -> object:
        # The raw answer: an answer served from glances' cache is the same string as the last.
        with lock:
            return server.getAll()

    return Tool(name, proc, pull, work / f"{log}.log")


def poller(tool: Tool, stop_event: threading.Event) -> None:
    """Pull once a second until told to stop; keep the last answer."""
    next_at = time.monotonic()
    while not stop_event.is_set():
        try:
            tool.last = tool.pull()
            tool.pulls_ok += 1
            key = tool.fresh_key(tool.last)
            if key != tool.last_key:
                tool.fresh += 1
                tool.last_key = key
        except Exception as exc:  # noqa: BLE001 - counted and shown
            tool.pulls_failed += 1
            tool.last_error = f"{type(exc).__name__}: {exc}"
        next_at += 1.0
        stop_event.wait(max(0.0, next_at - time.monotonic()))


def wait_up(tool: Tool, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if tool.proc.poll() is not None:
            err = tool.log.read_text(errors="replace")
            raise SystemExit(f"{tool.name} exited: {err[-2000:]}")
        try:
            tool.last = tool.pull()
            return
        except Exception:  # noqa: BLE001 - not listening yet
            if time.monotonic() > deadline:
                raise SystemExit(f"{tool.name} did not answer within {timeout_s:.0f} s") from None
            time.sleep(0.2)


def what_was_read(tool: Tool) -> dict[str, str]:
    """Memory total, NICs, block devices and md arrays as the tool reported them (read check)."""
    data = tool.last
    if tool.name.startswith("rigmon") and isinstance(data, dict):
        r = data["readings"]
        host = r.get("host") or {}
        return {"mem_total": str(host.get("mem_total_bytes")), "nics": str(len(r["net"])),
                "disks": str(len(r["disks"])), "md": str(len(r["raid"])), "gpus": str(len(r["gpus"])),
                "adc": "yes" if r.get("psu_rail") else "no"}
    if tool.name == "node_exporter" and isinstance(data, str):
        lines = data.splitlines()

        def count(prefix: str) -> str:
            return str(sum(1 for line in lines if line.startswith(prefix)))
        mem = next((line.split()[-1] for line in lines if line.startswith("node_memory_MemTotal_bytes")), "None")
        return {"mem_total": str(int(float(mem))) if mem != "None" else mem,
                "nics": count("node_network_receive_bytes_total{"),
                "disks": count("node_disk_read_bytes_total{"), "md": count("node_md_disks_required{"),
                "gpus": "-", "adc": "no"}
    glances = json.loads(data) if isinstance(data, str) else data  # glances' raw XML-RPC answer, or decoded
    if isinstance(glances, dict):  # glances
        memory = glances.get("mem") or {}
        return {"mem_total": str(memory.get("total")), "nics": str(len(glances.get("network") or [])),
                "disks": str(len(glances.get("diskio") or [])), "md": str(len(glances.get("raid") or [])),
                "gpus": str(len(glances.get("gpu") or [])), "adc": "no"}
    return {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window")
    parser.add_argument("--warmup", type=float, default=8.0, help="seconds before the window opens")
    parser.add_argument("--smoke", action="store_true", help="a few seconds, skip missing tools (CI)")
    parser.add_argument("--no-install", action="store_true", help="do not install missing tools")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.warmup = 2.0, 2.0
    binary, has_glances = ensure_tools(install=not (args.no_install or args.smoke))
    if not args.smoke and (binary is None or not has_glances):
        raise SystemExit("node_exporter or glances missing (install prometheus-node-exporter and glances)")
    tools: list[Tool] = []
    with tempfile.TemporaryDirectory(prefix="rigmon-bench-") as tmp:
        work = Path(tmp)
        sim, tree = start_sim(work)
        stop_event = threading.Event()
        threads: list[threading.Thread] = []
        try:
            tools.append(start_rigmon("rigmon (node_exporter's sources)", work, tree, common_only=True))
            tools.append(start_rigmon("rigmon (all, as deployed)", work, tree, common_only=False))
            if binary:
                tools.append(start_node_exporter(binary, work, tree))
            if has_glances:
                tools.append(start_glances("glances (comparable plugins)", work, tree))
                if not args.smoke:
                    tools.append(start_glances(GLANCES_DEFAULT, work, None))
            for tool in tools:
                wait_up(tool, 60)
            for tool in tools:
                thread = threading.Thread(target=poller, args=(tool, stop_event), daemon=True)
                thread.start()
                threads.append(thread)
            time.sleep(args.warmup)
            sim_cpu0 = cpu_seconds(sim.pid)
            for tool in tools:
                tool.cpu0 = cpu_seconds(tool.proc.pid)
                tool.fresh0 = tool.fresh
                # rigmon: the seq of the last pull (no extra request inside the window).
                tool.samples = -tool.last_key if isinstance(tool.last_key, int) else 0
            t0 = time.monotonic()
            time.sleep(args.seconds)
            elapsed = time.monotonic() - t0
            for tool in tools:
                tool.cpu_s = cpu_seconds(tool.proc.pid) - tool.cpu0
                tool.rss_mb = peak_rss_mb(tool.proc.pid)
                if tool.name.startswith("rigmon"):
                    # Frames the agent published in the window, within one (pushed ADC sags would add some).
                    tool.samples += tool.last_key if isinstance(tool.last_key, int) else 0
                else:
                    tool.samples = tool.fresh - tool.fresh0
            sim_cpu = cpu_seconds(sim.pid) - sim_cpu0
            stop_event.set()
            for thread in threads:
                thread.join(10)
            for tool in tools:
                tool.seen = what_was_read(tool)
        finally:
            stop_event.set()
            for tool in tools:
                stop(tool.proc)
            stop(sim)
    stale = [t for t in tools if t.samples < FRESH_SHARE * elapsed]
    report(tools, elapsed, sim_cpu, args)
    if stale:
        names = ", ".join(f"{t.name} ({t.samples} fresh samples in {elapsed:.0f} s)" for t in stale)
        if not args.smoke:
            print(f"\nREFUSED: not every tool produced a fresh sample a second: {names}; the figures above "
                  "are not comparable", file=sys.stderr)
            return 1
        print(f"\nwarning (smoke run, too short to judge): fewer fresh samples than seconds: {names}")
    return 0


#: Share of the window's seconds a tool must have produced fresh samples for (else the run is refused).
FRESH_SHARE = 0.9


def report(tools: list[Tool], elapsed: float, sim_cpu: float, args: argparse.Namespace) -> None:
    by_name = {t.name: t for t in tools}
    print(f"agent cost on one simulated node (bench-node), {elapsed:.0f} s window, one pull a second; "
          f"glances with --cached-time 0; CPU per fresh sample; {machine()}")
    print(f"simulator (separate process, not counted): {1000 * sim_cpu / elapsed:.1f} ms CPU per second\n")
    print("| tool | CPU ms per sample | % of one core | peak RSS MiB | pulls ok/failed | fresh samples / s |")
    print("|---|---:|---:|---:|---:|---:|")
    for t in tools:
        print(f"| {t.name} | {1000 * t.cpu_s / max(1, t.samples):.2f} | {100 * t.cpu_s / elapsed:.2f} | "
              f"{t.rss_mb:.1f} | {t.pulls_ok}/{t.pulls_failed} | {t.samples}/{elapsed:.0f} |")
    for t in tools:
        if t.pulls_failed:
            print(f"{t.name}: last failed pull: {t.last_error[:300]}")
    print()
    ratios = [("rigmon (node_exporter's sources)", "node_exporter", "<= 1"),
              ("rigmon (all, as deployed)", "node_exporter", "-"),
              ("rigmon (node_exporter's sources)", "glances (comparable plugins)", "-"),
              ("rigmon (all, as deployed)", "glances (comparable plugins)", "<= 0.1"),
              ("rigmon (all, as deployed)", GLANCES_DEFAULT, "(other input)")]
    print("| ratio (CPU per fresh sample) | value | goal | ratio (peak RSS) |")
    print("|---|---:|---:|---:|")
    for a, b, goal in ratios:
        if a in by_name and b in by_name and by_name[b].cpu_s > 0 and by_name[a].samples and by_name[b].samples:
            ta, tb = by_name[a], by_name[b]
            per_a, per_b = ta.cpu_s / ta.samples, tb.cpu_s / tb.samples
            print(f"| {a} / {b} | {per_a / per_b:.2f} | {goal} | {ta.rss_mb / tb.rss_mb:.2f} |")
    print()
    print("| what each tool reported (read check; the tree has 256 GiB = 274877906944, 3 NICs with lo, "
          "6 block devices, 2 md) | mem_total | nics | disks | md | gpus | adc |")
    print("|---|---|---|---|---|---|---|")
    for t in tools:
        s = t.seen
        print(f"| {t.name} | {s.get('mem_total')} | {s.get('nics')} | {s.get('disks')} | {s.get('md')} | "
              f"{s.get('gpus')} | {s.get('adc')} |")


if __name__ == "__main__":
    sys.exit(main())
