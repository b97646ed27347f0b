"""Benchmark (not a test): journal bytes per node per day at 1 Hz, and the time to export an hour of 8 nodes.

    PYTHONPATH=. python benchmarks/journal.py [--hours 24] [--nodes 8] [--skip-export] [--frames-cache F]
    PYTHONPATH=. python benchmarks/journal.py --smoke   # seconds: 60 frames, 2 nodes, one export

``--smoke`` runs every step on a tiny input (`SMOKE_FRAMES` frames in place of the hour,
written `SMOKE_REPEATS` times over, enough for one block; `SMOKE_NODES` agents; one export)
and prints the same lines: its figures show the output's shape and say nothing about size or
speed.

Frames: a simulated full rig, read by the real collectors of the registry. One node holds
8 V100-SXM2 (fake NVML under pynvml, training load with DDP steps and evaluations), a 12 V
rail of 4 paralleled PSUs with an RM1 ADC and PMBus hwmon, two md RAID0 arrays of two NVMe
each behind USB4 enclosures (Thunderbolt routers), a 10 GbE NIC and the kernel log. Each
second the simulator steps, the ADC's RM1 lines of that second go to the PSU collector's
reader thread (through a serial-port stand-in instead of a pty, so no real time passes), and
every collector's ``collect()`` runs; the frame is put together as the sampler does, with
each collector's measured ``duration_s`` and its ``sampled_at`` at full precision (plus the
journal's own status entry). Nothing is widened or made up.

Size: one hour of such frames (3600, generated once, or read from ``--frames-cache``) is
replayed, shifted in time, through `JournalStore` for ``--hours`` hours with a fake clock:
one frame per commit (what the writer does at 1 Hz), maintenance (downsampling, retention,
block recompression) every 15 frames, as the writer thread every 15 s. The size is the file
after a final checkpoint: measured, not extrapolated, when ``--hours 24``. Replaying does not
flatter the blocks: a gzip block sees only its own frames (32 KiB window), never an hour
earlier. ``dbstat`` splits the file by table and index.

Export: ``--nodes`` journals holding the last hour of such frames, each served by a real
``rigmon agent`` process on loopback (all on this machine's cores); the time of
``take_snapshot`` over all of them (pull concurrently, report, write the .tar.gz) is measured
three times in a row, and the median is reported with every run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import queue
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rigmon.agent.agent import build_collectors  # noqa: E402
from rigmon.agent.journal import JournalStore, Retention  # noqa: E402
from rigmon.agent.sampler import ROUTES  # noqa: E402
from rigmon.collectors.base import EventDraft, NoData, PushFn  # noqa: E402
from rigmon.collectors.psu import PsuCollector  # noqa: E402
from rigmon.hw.root import HostRoot  # noqa: E402
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Event, Frame, Readings  # noqa: E402
from rigmon.sim.gpu import SimNvidiaGpus  # noqa: E402
from rigmon.sim.host import SimHost, SimInterface  # noqa: E402
from rigmon.sim.kmsg import SimKernelLog  # noqa: E402
from rigmon.sim.load import training_load  # noqa: E402
from rigmon.sim.node import SimNode  # noqa: E402
from rigmon.sim.nvml import v100_sxm2_gpus  # noqa: E402
from rigmon.sim.psu import SimPsuRail  # noqa: E402
from rigmon.sim.rig import SimRig, get_scenario, node_agent_config  # noqa: E402
from rigmon.sim.storage import strix_enclosure_rig  # noqa: E402
from rigmon.sim.tree import Tree  # noqa: E402
from rigmon.snapshot.command import take_snapshot  # noqa: E402
from rigmon.typed import to_data  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RUN_ID = "0123456789abcdef"
#: The simulator replaces a file per attribute every step: tmpfs keeps that from dominating.
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None
#: Frames (1 Hz) standing in for the hour, how often they are written over (the size part:
#: 360 frames make one block), and agents exported, in a ``--smoke`` run.
SMOKE_FRAMES = 60
SMOKE_REPEATS = 6
SMOKE_NODES = 2


class FakeClock:
    def __init__(self, t: float) -> None:
        self.t = t
        self.t0 = t

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t - self.t0


class RailPort:
    """A serial port whose bytes the benchmark hands over; `feed` returns once they are read."""

    def __init__(self) -> None:
        self._chunks: queue.Queue[bytes] = queue.Queue()
        self._idle = threading.Event()

    def read(self, max_bytes: int) -> bytes:
        try:
            return self._chunks.get_nowait()
        except queue.Empty:
            self._idle.set()
        try:
            return self._chunks.get(timeout=0.05)
        except queue.Empty:
            return b""

    def write(self, data: bytes) -> None:
        pass

    def reset_input(self) -> None:
        pass

    def close(self) -> None:
        pass

    def feed(self, data: bytes) -> None:
        self._idle.clear()
        self._chunks.put(data)
        # Set once the reader asks for more: the chunk has been parsed.
        self._idle.wait(5.0)


def full_rig_node(root: Path) -> tuple[SimNode, SimPsuRail]:
    """8 V100-SXM2, a 4-PSU rail with an RM1 ADC and PMBus, 2 RAID0 arrays of NVMe behind USB4, 10 GbE."""
    node = SimNode(name="bench", tree=Tree(root), rng=random.Random(1))
    kernel_log = SimKernelLog()
    node.devices.append(kernel_log)
    node.devices.append(SimHost(interfaces=[SimInterface("eth0", 10000)]))
    node.devices.append(SimNvidiaGpus(v100_sxm2_gpus(8), kernel_log=kernel_log, load_fn=training_load))
    rail = SimPsuRail(pty=False, psus=4)
    node.devices.append(rail)
    storage, tb = strix_enclosure_rig(node)
    node.devices.extend([tb, storage])
    node.step(0.0)
    return node, rail


def real_frames(n: int, workdir: Path, t0: float) -> list[dict[str, Any]]:
    """``n`` frames (1 Hz) of the full rig read by every registered collector, as wire data."""
    node, rail = full_rig_node(workdir / "bench")
    clock = FakeClock(t0)
    config = node_agent_config(node, "127.0.0.1:0", 1.0)
    root = HostRoot(node.tree.root)
    collectors = build_collectors(config, root, clock)
    port = RailPort()
    collectors["psu"] = PsuCollector(config.psu, root, clock, open_port=lambda path, baud: port)
    records: dict[str, dict[type, list[object]]] = {name: {} for name in collectors}
    drafts: list[EventDraft] = []

    def file_records(name: str, recs: list[object], replace_all: bool) -> None:
        grouped: dict[type, list[object]] = {}
        for r in recs:
            if isinstance(r, EventDraft):
                drafts.append(r)
            elif type(r) in ROUTES:
                grouped.setdefault(type(r), []).append(r)
        if replace_all:
            records[name] = grouped
        else:
            records[name].update(grouped)

    def pushed_to(name: str) -> PushFn:
        return lambda recs: file_records(name, list(recs), False)

    for name, c in collectors.items():
        c.start(pushed_to(name))
    rng = random.Random(2)
    out: list[dict[str, Any]] = []
    events_n = 0
    try:
        for i in range(n):
            t = t0 + i
            clock.t = t
            node.step(float(i))
            lines = rail.take_lines()
            if lines:
                port.feed("".join(line + "\r\n" for line in lines).encode())
            status: dict[str, CollectorStatus] = {}
            for k, (name, c) in enumerate(collectors.items()):
                started = time.perf_counter()
                try:
                    recs = list(c.collect())
                    state, error = "ok", None
                except NoData as exc:
                    recs, state, error = [], "absent", str(exc) or "not present"
                except Exception as exc:  # noqa: BLE001 - reported like the sampler does
                    recs, state, error = [], "error", f"{type(exc).__name__}: {exc}"
                duration_s = time.perf_counter() - started
                file_records(name, recs, True)
                # The sampler stamps each collector when its thread finishes: a little after the tick.
                status[name] = CollectorStatus(state=state, ok=state != "error", error=error,  # type: ignore[arg-type]
                                               duration_s=round(duration_s, 6),
                                               sampled_at=t + duration_s + 0.0003 * k + rng.uniform(0, 0.002))
            status["journal"] = CollectorStatus(state="ok", ok=True, duration_s=round(rng.uniform(0.001, 0.004), 6),
                                                sampled_at=t - 1 + rng.uniform(0.4, 0.6))
            fields: dict[str, Any] = {}
            for name in collectors:
                for tp, recs in records[name].items():
                    field_name, many = ROUTES[tp]
                    fields[field_name] = (*fields.get(field_name, ()), *recs) if many else recs[-1]
            events = []
            for d in drafts:
                events_n += 1
                events.append(Event(id=f"{RUN_ID}-{events_n}", at=d.at or t, kind=d.kind, severity=d.severity,  # type: ignore[arg-type]
                                    subject=d.subject, message=d.message, data=dict(d.data or {})))
            drafts.clear()
            frame = Frame(schema=SCHEMA_VERSION, node="bench", run_id=RUN_ID, seq=i + 1, taken_at=t, agent_start=t0,
                          collectors=status, readings=msgspec.structs.replace(Readings(), **fields), events=tuple(events))
            out.append(to_data(frame))
    finally:
        for c in collectors.values():
            c.close()
        node.close()
    return out


def hour_of_frames(t0: float, cache: Path | None, frames: int = 3600) -> list[dict[str, Any]]:
    if cache is not None and cache.exists():
        return [json.loads(line) for line in gzip.decompress(cache.read_bytes()).splitlines()]
    with tempfile.TemporaryDirectory(prefix="rigmon-bench-", dir=SCRATCH) as tmp:
        hour = real_frames(frames, Path(tmp), t0)
    if cache is not None:
        cache.write_bytes(gzip.compress(b"".join(json.dumps(f, separators=(",", ":")).encode() + b"\n"
                                                 for f in hour), 6))
    return hour


def shifted(data: dict[str, Any], shift_s: float, seq: int, run_id: str) -> bytes:
    """A frame of the hour moved ``shift_s`` later: its time, its collectors' times, seq and run."""
    collectors = {name: {**s, "sampled_at": None if s["sampled_at"] is None else s["sampled_at"] + shift_s}
                  for name, s in data["collectors"].items()}
    events = [{**e, "at": e["at"] + shift_s} for e in data["events"]]
    moved = {**data, "taken_at": data["taken_at"] + shift_s, "agent_start": data["agent_start"] + shift_s,
             "seq": seq, "run_id": run_id, "collectors": collectors, "events": events}
    return json.dumps(moved, separators=(",", ":")).encode()


def fill_journal(path: Path, hour: list[dict[str, Any]], t0: float, hours: int, run_id: str) -> JournalStore:
    """Write ``hour`` ``hours`` times over at 1 Hz from ``t0`` as the writer thread does: a commit per frame.

    ``hour`` is 3600 frames, or `SMOKE_FRAMES` in a smoke run (each repetition follows the last).
    """
    clock = FakeClock(t0)
    store = JournalStore(path, clock, Retention())
    store.begin_run(run_id, "bench", t0)
    seq = 0
    shift0 = t0 - hour[0]["taken_at"]
    for h in range(hours):
        for data in hour:
            seq += 1
            raw = shifted(data, shift0 + h * len(hour), seq, run_id)
            meta = json.loads(raw)
            # Frame only carries the keys the store looks at; the body is the wire JSON.
            frame = Frame(schema=SCHEMA_VERSION, node="bench", run_id=run_id, seq=seq, taken_at=meta["taken_at"],
                          agent_start=t0, collectors={}, readings=Readings(),
                          events=tuple(Event(**{k: v for k, v in e.items()}) for e in meta["events"]))
            clock.t = meta["taken_at"]
            store.write_encoded([(frame, raw)])
            if seq % 15 == 0:
                store.maintain()
    clock.t = t0 + hours * len(hour)
    for _ in range(20):
        store.maintain()
    return store


def bench_size(hour: list[dict[str, Any]], hours: int) -> dict[str, Any]:
    t0 = 1_700_000_000.0 - 1_700_000_000.0 % 900
    with tempfile.TemporaryDirectory(prefix="rigmon-bench-") as tmp:
        cpu0 = time.process_time()
        store = fill_journal(Path(tmp), hour, t0, hours, "bench-size")
        cpu = time.process_time() - cpu0
        conn = store.conn
        # The same script measures the journal before blocks existed (the "before" numbers).
        has_blocks = conn.execute("SELECT COUNT(*) FROM sqlite_schema WHERE name = 'blocks'").fetchone()[0]
        block_bytes, block_frames = (conn.execute("SELECT SUM(LENGTH(body)), SUM(frames) FROM blocks").fetchone()
                                     if has_blocks else (0, 0))
        recent_bytes, recent_frames = conn.execute("SELECT SUM(LENGTH(body)), COUNT(*) FROM frames").fetchone()
        bucket_bytes = conn.execute("SELECT SUM(LENGTH(body)) FROM buckets").fetchone()[0] or 0
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        tables = {name: size for name, size in conn.execute(
            "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")}
        unused = conn.execute("SELECT SUM(unused) FROM dbstat").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        store.close()
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
    raw_json = sum(len(json.dumps(f, separators=(",", ":"))) for f in hour) / len(hour)
    # Per frame at 1 Hz; the same as size * 24 / hours when the "hour" is 3600 frames.
    per_day = 86400 / (hours * len(hour))
    return {"hours": hours, "file_bytes": size, "bytes_per_day": size * per_day,
            "frame_json_bytes": raw_json, "block_frames": block_frames,
            "block_bytes_per_frame": (block_bytes or 0) / max(1, block_frames or 0),
            "recent_frames": recent_frames, "recent_bytes_per_frame": (recent_bytes or 0) / max(1, recent_frames),
            "bucket_bytes_per_day": bucket_bytes * per_day, "dbstat_bytes": tables,
            "dbstat_unused_in_pages": unused, "free_pages_bytes": free, "write_cpu_s": cpu}


def cpu_s(pids: list[int]) -> float:
    """User plus system CPU seconds of processes so far (``/proc/<pid>/stat``)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_export(hour: list[dict[str, Any]], nodes: int, repeat: int = 3, settle_s: float = 2.0) -> dict[str, Any]:
    now = time.time()
    t0 = now - len(hour)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="rigmon-bench-") as tmp:
        tmpdir = Path(tmp)
        root = tmpdir / "root"
        SimRig(get_scenario("healthy"), 1, root, seed=1)
        procs = []
        urls = []
        try:
            for n in range(nodes):
                state = tmpdir / f"state{n}"
                fill_journal(state, hour, t0, 1, f"bench-{n}").close()
                port = free_port()
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "rigmon", "agent", "--root", str(root / "node01"), "--state-dir", str(state),
                     "--listen", f"127.0.0.1:{port}", "--node", f"node{n + 1:02d}"],
                    stdout=subprocess.DEVNULL, env=env, cwd=REPO))
                urls.append(f"http://127.0.0.1:{port}")
            for url in urls:
                for _ in range(200):
                    try:
                        if httpx.get(f"{url}/v1/latest").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.05)
            time.sleep(settle_s)  # let the agents' first maintenance pass finish
            runs: list[float] = []
            cpu: list[float] = []
            for k in range(repeat):
                # CPU seconds too: the machine is shared, and 2 cores give 6 CPU seconds in 3 s.
                cpu0 = time.process_time() + cpu_s([p.pid for p in procs])
                started = time.perf_counter()
                with open(os.devnull, "w") as devnull:
                    path, parts = take_snapshot(urls, [], 3600.0, tmpdir / f"snap{k}.tar.gz", None, devnull)
                runs.append(time.perf_counter() - started)
                cpu.append(time.process_time() + cpu_s([p.pid for p in procs]) - cpu0)
            elapsed = sorted(runs)[len(runs) // 2]
            errors = [p.error for p in parts if p.error]
            size = path.stat().st_size
            if hasattr(parts[0], "frames_gz"):
                frames = sum(p.frame_count for p in parts)
                json_bytes = sum(len(gzip.decompress(p.frames_gz)) for p in parts)
            else:  # before: frames as a list of JSON texts
                frames = sum(len(p.frames) for p in parts)  # type: ignore[attr-defined, misc]
                json_bytes = sum(len(f) for p in parts for f in p.frames)  # type: ignore[attr-defined, misc]
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(10)
    return {"nodes": nodes, "frames": frames, "frame_json_bytes": json_bytes, "export_s": elapsed, "runs_s": runs, "cpu_s": cpu,
            "load_average": os.getloadavg(),
            "bundle_bytes": size, "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--skip-export", action="store_true")
    parser.add_argument("--skip-size", action="store_true")
    parser.add_argument("--frames-cache", type=Path, help="keep the generated hour here (gzip JSON lines) and reuse it")
    parser.add_argument("--smoke", action="store_true",
                        help=f"seconds: {SMOKE_FRAMES} frames, {SMOKE_NODES} nodes, one export (output shape only)")
    args = parser.parse_args()
    if args.smoke:
        args.hours, args.nodes, args.frames_cache = SMOKE_REPEATS, SMOKE_NODES, None
        print(f"smoke run: {SMOKE_FRAMES} frames written {SMOKE_REPEATS} times over, {SMOKE_NODES} nodes, one export; "
              "the figures show the output's shape, not the journal's size or speed", flush=True)
    t_gen = time.perf_counter()
    hour = hour_of_frames(1_700_000_000.0, args.frames_cache, SMOKE_FRAMES if args.smoke else 3600)
    print(f"{len(hour)} frames ready in {time.perf_counter() - t_gen:.1f} s", flush=True)
    if not args.skip_size:
        size = bench_size(hour, args.hours)
        print(json.dumps(size, indent=1), flush=True)
        print(f"journal: {size['bytes_per_day'] / 1e6:.1f} MB per node per day at 1 Hz "
              f"(frame JSON {size['frame_json_bytes'] / 1e3:.1f} kB, in blocks {size['block_bytes_per_frame']:.0f} B)",
              flush=True)
    if not args.skip_export:
        export = bench_export(hour, args.nodes, 1, 0.5) if args.smoke else bench_export(hour, args.nodes)
        print(json.dumps(export, indent=1), flush=True)
        span = "an hour" if len(hour) == 3600 else f"{len(hour)} s"
        print(f"export: {span} of {args.nodes} nodes ({export['frames']} frames, "
              f"{export['frame_json_bytes'] / 1e6:.0f} MB of frame JSON) in {export['export_s']:.2f} s "
              f"(median of {len(export['runs_s'])} runs)")


if __name__ == "__main__":
    main()
