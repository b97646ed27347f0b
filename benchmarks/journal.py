"""Benchmark (not a test): journal bytes per node per day at 1 Hz, and the time to export an hour of 8 nodes.

    PYTHONPATH=. python benchmarks/journal.py [--hours 24] [--nodes 8] [--skip-export]

Frames: the simulator's `healthy` node read by every collector registered on this branch,
widened to a full V100 rig (8 GPUs with 6 NVLinks each, a PSU rail with two channels, 4
NVMe, 2 md arrays, 3 Thunderbolt routers) with records shaped like the GPU, PSU and storage
branches' schema; values move every frame with full float precision (the worst case for
compression). One hour of such frames is generated and replayed, shifted in time, through
`JournalStore` (what the writer thread calls) with a fake clock and maintenance every 15
minutes of frames, for ``--hours`` hours; the file is measured after the last checkpoint.
Nothing is extrapolated when ``--hours 24``; with fewer hours bytes scale linearly (frames
and buckets are appended at a constant rate; dictionaries add one row per ten minutes).

Export: ``--nodes`` journals holding the last hour of frames, each served by a real
``rigmon agent`` process on loopback; the time of ``take_snapshot`` over all of them
(pull concurrently, report, write the .tar.gz) is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from rigmon.agent.agent import build_collectors
from rigmon.agent.journal import JournalStore, Retention
from rigmon.agent.sampler import ROUTES
from rigmon.config import AgentConfig, AgentSection
from rigmon.hw.root import HostRoot
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame, Readings
from rigmon.sim.rig import SimRig, get_scenario
from rigmon.snapshot.command import take_snapshot
from rigmon.typed import to_data

REPO = Path(__file__).resolve().parent.parent


class FakeClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


def real_frames(n: int, workdir: Path, t0: float) -> list[dict[str, Any]]:
    """``n`` frames of a simulated node read by every registered collector, as wire data."""
    rig = SimRig(get_scenario("healthy"), 1, workdir, seed=1)
    clock = FakeClock(t0)
    config = AgentConfig(agent=AgentSection(node="bench", root=str(rig.nodes[0].tree.root)))
    collectors = build_collectors(config, HostRoot(rig.nodes[0].tree.root), clock)
    out: list[dict[str, Any]] = []
    for i in range(n):
        clock.t = t0 + i
        rig.step(float(i))
        fields: dict[str, Any] = {}
        status: dict[str, CollectorStatus] = {}
        for name, c in collectors.items():
            try:
                records = c.collect()
                status[name] = CollectorStatus(state="ok", ok=True, duration_s=0.0012, sampled_at=clock.t)
            except Exception as exc:  # noqa: BLE001 - absent hardware on this tree
                records = []
                status[name] = CollectorStatus(state="absent", ok=True, error=str(exc), duration_s=0.0001)
            for r in records:
                if type(r) in ROUTES:
                    field, many = ROUTES[type(r)]
                    fields[field] = (*fields.get(field, ()), r) if many else r
        frame = Frame(schema=SCHEMA_VERSION, node="bench", run_id="0123456789abcdef", seq=i + 1, taken_at=clock.t,
                      agent_start=t0, collectors=status, readings=Readings(**fields))
        out.append(to_data(frame))
    rig.close()
    return out


def widen(frame: dict[str, Any], i: int, rng: random.Random) -> dict[str, Any]:
    """Add a V100 rig's GPUs, PSU rail and storage, shaped like the other branches' records."""
    load = 1.0 if (i % 12) < 10 else 0.35
    r = frame["readings"]
    gpus = []
    for g in range(8):
        power = 60 + 240 * load + rng.uniform(-15, 15)
        gpus.append({
            "index": g, "uuid": f"GPU-1b2c3d4e-0000-1111-2222-33334444{g:04d}", "name": "Tesla V100-SXM2-32GB",
            "serial": f"03231180{g:05d}", "pci_bus_id": f"0000:{0x1a + g:02x}:00.0",
            "pci_bus_id_nvml": f"00000000:{0x1a + g:02X}:00.0", "pci_bus_id_xid": f"0000:{0x1a + g:02x}:00",
            "state": "ok", "lost_at": None, "lost_reason": None,
            "power_w": round(power, 3), "power_peak_w": round(power * 1.18, 3), "power_min_w": round(power * 0.8, 3),
            "power_samples": 50, "power_instant_w": None, "energy_j_total": 1.0e7 + i * power,
            "power_limit_w": 300.0, "power_limit_enforced_w": 300.0, "power_limit_default_w": 300.0,
            "clock_sm_mhz": 1530 if load > 0.5 else 1380, "clock_mem_mhz": 877, "clock_graphics_mhz": 1530,
            "clock_app_graphics_mhz": 1290, "clock_app_mem_mhz": 877, "clock_max_sm_mhz": 1530,
            "clock_max_mem_mhz": 877, "clock_max_graphics_mhz": 1530,
            "clock_reasons": ["sw_power_cap"] if power > 280 else [],
            "violation_power_s_total": i * 0.05, "violation_thermal_s_total": 0.0,
            "temp_c": round(55 + 20 * load + rng.uniform(-1, 1), 1), "fan_pct": None,
            "util_pct": float(round(100 * load)), "mem_util_pct": float(round(60 * load)),
            "mem_total_bytes": 34359738368, "mem_used_bytes": 30000000000 + rng.randrange(0, 1 << 24),
            "pstate": 0, "pcie_gen": 3, "pcie_width": 16, "pcie_gen_max": 3, "pcie_width_max": 16,
            "pcie_replay_total": 0, "pcie_replay_per_s": 0.0,
            "nvlinks": [{"link": n, "active": True, "replay_total": 0, "recovery_total": 0, "crc_flit_total": 0,
                         "crc_data_total": 0, "replay_per_s": 0.0, "crc_flit_per_s": 0.0} for n in range(6)],
            "ecc_corrected_total": 0, "ecc_uncorrected_total": 0,
        })
    r["gpus"] = gpus
    watts = sum(g["power_w"] for g in gpus) + 400
    volts = 12.05 - watts / 12.0 * 0.0004
    env = {"mean_volts": volts, "min_volts": volts - rng.uniform(0.05, 0.3), "max_volts": volts + rng.uniform(0, 0.05)}
    amps = {"mean_amps": watts / 12.0, "min_amps": watts / 12.5, "max_amps": watts / 11.2}
    r["psu"] = [{
        "port": "/dev/ttyACM0", "protocol": "rm1", "connected": True, "stale": False, "envelope_source": "device",
        "windows": 10, "volts": env, "amps": amps, "channels_volts": {"psu": env, "load": env},
        "channels_amps": {"load": amps}, "samples": 10000, "window_s": 0.1, "flags": 0,
        "under_voltage_latched": False, "sag": False, "seq": 100000 + i * 10, "device_id": "rm1-00a3",
        "firmware": "1.4.2", "sensor": "ina228", "last_window_at": frame["taken_at"],
        "counters": {"lines_total": i * 10, "windows_total": i * 10, "ignored_lines_total": 3},
        "power_w": None, "energy_wh_total": None,
    }]
    r["path_resistance"] = [{"path": "psu-load", "method": "two_point", "resistance_mohm": 4.8 + rng.uniform(-0.1, 0.1),
                             "uncertainty_mohm": 0.05, "points": 600, "current_span_amps": 40.0}]
    rate = (1.07e9 if (i // 300) % 4 == 0 else 2e6) * rng.uniform(0.9, 1.1)
    r["disks"] = [{"name": n, "major": 259, "minor": k, "reads_total": i * 900 + k, "writes_total": i * 20,
                   "read_bytes_total": int(i * rate), "write_bytes_total": i * 4096, "in_flight": 1,
                   "discards_total": 0, "flushes_total": 10, "read_bytes_per_s": rate / 2 + k, "write_bytes_per_s": 4096.0,
                   "read_iops": rate / 131072, "write_iops": 1.0, "util_pct": 87.5 * load, "read_await_ms": 0.31,
                   "write_await_ms": 0.02} for k, n in enumerate(["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1", "md0", "md1"])]
    r["raid"] = [{"name": f"md{a}", "md_name": f"models{a}", "level": "raid0", "health": "ok", "mdstat_state": "active",
                  "array_state": "clean", "read_only": False, "raid_disks": 2, "working_disks": 2, "degraded": None,
                  "sync_action": None, "sync_progress_pct": None, "sync_speed_bytes_per_s": None, "sync_eta_s": None,
                  "size_bytes": 4000787030016, "chunk_bytes": 524288, "uuid": f"a1b2c3d4:0000111{a}:22223333:44445555",
                  "members": [{"name": f"nvme{2 * a + m}n1", "slot": m, "role": "in_sync", "present": True,
                               "write_mostly": False, "replacement": False, "flags": ["in_sync"], "errors_total": 0,
                               "read_bytes_per_s": rate / 2, "write_bytes_per_s": 2048.0} for m in range(2)],
                  "read_bytes_per_s": rate, "write_bytes_per_s": 4096.0, "member_imbalance_pct": rng.uniform(0, 3),
                  "vs_fastest_array_pct": 100.0 - a * rng.uniform(0, 4)} for a in range(2)]
    r["nvme"] = [{"name": f"nvme{k}", "model": "Samsung SSD 990 PRO 2TB", "serial": f"S6Z2NJ0W{k:06d}", "firmware": "4B2QJXD7",
                  "state": "live", "transport": "pcie", "address": f"0000:0{k + 3}:00.0", "namespaces": [f"nvme{k}n1"],
                  "link_speed_gts": 16.0, "link_width": 4, "max_link_speed_gts": 16.0, "max_link_width": 4,
                  "link_gen": 4, "max_link_gen": 4, "link_lost": False, "temp_c": 45.0 + rng.randrange(0, 20),
                  "temp_max_c": 82.0, "temp_crit_c": 85.0} for k in range(4)]
    r["thunderbolt"] = [{"name": f"0-{k}", "kind": "device" if k else "host", "domain": 0, "vendor": "Intel",
                         "device_name": "JHL7440", "generation": 3, "authorized": True, "unique_id": f"d2010000-{k:04d}",
                         "nvm_version": "36.0", "rx_speed_gbps": 20.0, "tx_speed_gbps": 20.0, "rx_lanes": 2,
                         "tx_lanes": 2, "rx_gbps": 40.0, "tx_gbps": 40.0, "expected_gbps": 40.0,
                         "expected_source": "generation", "link_state": "ok", "degraded_reason": None} for k in range(3)]
    for name in ("gpu", "psu", "disks", "raid", "nvme", "thunderbolt"):
        frame["collectors"][name] = {"state": "ok", "ok": True, "error": None, "duration_s": 0.0031,
                                     "sampled_at": frame["taken_at"]}
    return frame


def hour_of_frames(t0: float) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="rigmon-bench-") as tmp:
        base = real_frames(3600, Path(tmp), t0)
    rng = random.Random(1)
    return [widen(f, i, rng) for i, f in enumerate(base)]


def fill_journal(path: Path, hour: list[dict[str, Any]], t0: float, hours: int, run_id: str) -> JournalStore:
    clock = FakeClock(t0)
    store = JournalStore(path, clock, Retention())
    store.begin_run(run_id, "bench", t0)
    seq = 0
    for h in range(hours):
        batch: list[tuple[Frame, bytes]] = []
        for i, data in enumerate(hour):
            seq += 1
            t = t0 + h * 3600 + i
            data = {**data, "taken_at": t, "seq": seq, "run_id": run_id, "events": []}
            # Frame only carries the keys the store looks at; the body is the wire JSON.
            meta = Frame(schema=SCHEMA_VERSION, node="bench", run_id=run_id, seq=seq, taken_at=t, agent_start=t0,
                         collectors={}, readings=Readings())
            batch.append((meta, json.dumps(data, separators=(",", ":")).encode()))
            if len(batch) == 60:
                store.write_encoded(batch)
                batch = []
            if seq % 900 == 0:
                clock.t = t
                store.maintain()
        if batch:
            store.write_encoded(batch)
    clock.t = t0 + hours * 3600
    for _ in range(20):
        store.maintain()
    return store


def bench_size(hour: list[dict[str, Any]], hours: int) -> dict[str, float]:
    t0 = 1_700_000_000.0 - 1_700_000_000.0 % 900
    with tempfile.TemporaryDirectory(prefix="rigmon-bench-") as tmp:
        started = time.perf_counter()
        store = fill_journal(Path(tmp), hour, t0, hours, "bench-size")
        elapsed = time.perf_counter() - started
        frames_bytes = store.conn.execute("SELECT SUM(LENGTH(body)) FROM frames").fetchone()[0]
        bucket_bytes = store.conn.execute("SELECT SUM(LENGTH(body)) FROM buckets").fetchone()[0] or 0
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
    raw_json = sum(len(json.dumps(f, separators=(",", ":"))) for f in hour) / len(hour)
    return {"hours": hours, "file_bytes": size, "bytes_per_day": size * 24 / hours,
            "frame_json_bytes": raw_json, "stored_frame_bytes": frames_bytes / (hours * 3600),
            "bucket_bytes_per_day": bucket_bytes * 24 / hours, "write_s": elapsed}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_export(hour: list[dict[str, Any]], nodes: int) -> dict[str, float]:
    now = time.time()
    t0 = now - 3600
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
            started = time.perf_counter()
            path, parts = take_snapshot(urls, [], 3600.0, tmpdir / "snap.tar.gz", None, open(os.devnull, "w"))
            elapsed = time.perf_counter() - started
            frames = sum(len(p.frames) for p in parts)
            errors = [p.error for p in parts if p.error]
            size = path.stat().st_size
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(10)
    return {"nodes": nodes, "frames": frames, "export_s": elapsed, "bundle_bytes": size, "errors": len(errors)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--skip-export", action="store_true")
    args = parser.parse_args()
    t_gen = time.perf_counter()
    hour = hour_of_frames(1_700_000_000.0)
    print(f"generated 3600 frames in {time.perf_counter() - t_gen:.1f} s", flush=True)
    size = bench_size(hour, args.hours)
    print(json.dumps(size, indent=1), flush=True)
    print(f"journal: {size['bytes_per_day'] / 1e6:.1f} MB per node per day at 1 Hz "
          f"(frame JSON {size['frame_json_bytes'] / 1e3:.1f} kB, stored {size['stored_frame_bytes']:.0f} B)", flush=True)
    if not args.skip_export:
        export = bench_export(hour, args.nodes)
        print(json.dumps(export, indent=1), flush=True)
        print(f"export: an hour of {args.nodes} nodes ({export['frames']} frames) in {export['export_s']:.2f} s")


if __name__ == "__main__":
    main()
