"""Benchmark (not a test): the journal writer's CPU per frame of a full node, by part.

    PYTHONPATH=. python benchmarks/journal_cpu.py [--minutes 20] [--frames-cache F]
    PYTHONPATH=. python benchmarks/journal_cpu.py --smoke   # 2 minutes of frames, figures say nothing

Frames: real frames of the full rig of `benchmarks/journal.py` (8 V100-SXM2 behind the fake
NVML, RM1 ADC, two md arrays on USB4, NIC, kernel log; about 27 kB of JSON each), generated
once (600 of them, reused in a loop with their times moved on) or read from
``--frames-cache``. They go through `JournalStore` as the writer thread sends them: one
``write_encoded`` per frame (the writer commits every ``commit_interval_s``, at 1 Hz one frame
per commit), and maintenance every 15 frames (the writer's `MAINTAIN_EVERY_S`), timed part by
part: the tiers' catch-up (`JournalStore.catch_up_tiers`: once the stored 60 s and 900 s
tiers are caught up, writes keep them, so "write" includes the tiers' open buckets), retention,
and moving frames older than a minute into blocks. CPU is the thread's own (``time.thread_time``); the frames'
wire JSON is encoded, and the `Frame` records the writer holds with it are decoded from it, before timing
starts (in the agent it is encoded once for all readers).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine  # noqa: E402
from benchmarks.journal import FakeClock, real_frames, shifted  # noqa: E402
from rigmon.agent.journal.store import JournalStore  # noqa: E402
from rigmon.agent.journal.upkeep import Retention  # noqa: E402
from rigmon.schema import Frame, decode  # noqa: E402

#: Distinct frames generated (then reused with their times moved on).
DISTINCT_FRAMES = 600
SMOKE_DISTINCT_FRAMES = 20
#: Frames between two maintenance passes, as the writer thread's 15 s at 1 Hz.
MAINTAIN_EVERY_FRAMES = 15


def frames_of(count: int, workdir: Path, t0: float, cache: Path | None) -> list[dict[str, object]]:
    if cache is not None and cache.exists():
        data: list[dict[str, object]] = json.loads(cache.read_text())
        return data
    frames = real_frames(count, workdir, t0)
    if cache is not None:
        cache.write_text(json.dumps(frames))
    return frames


def measure(distinct: list[dict[str, object]], minutes: int, workdir: Path, t0: float) -> dict[str, float]:
    clock = FakeClock(t0)
    store = JournalStore(workdir / "journal.sqlite", clock, Retention())
    store.begin_run("bench", "bench", t0)
    shift0 = t0 - float(distinct[0]["taken_at"])  # type: ignore[arg-type]
    total = minutes * 60
    raws = [shifted(distinct[i % len(distinct)], shift0 + (i // len(distinct)) * len(distinct), i + 1, "bench")
            for i in range(total)]
    spent = {"write": 0.0, "downsample": 0.0, "retain": 0.0, "compact": 0.0}
    # The writer holds each frame (its records) with its wire JSON: decoded here, before timing.
    frames = [decode(Frame, raw) for raw in raws]
    for seq, (raw, frame) in enumerate(zip(raws, frames), start=1):
        taken_at = frame.taken_at
        clock.t = taken_at
        a = time.thread_time()
        store.write_encoded([(frame, raw)])
        b = time.thread_time()
        spent["write"] += b - a
        if seq % MAINTAIN_EVERY_FRAMES == 0:
            # `downsample` on a checkout before format 3 (run this script there for "before").
            getattr(store, "catch_up_tiers", store.downsample)()
            c = time.thread_time()
            store.retain()
            d = time.thread_time()
            store.compact()
            e = time.thread_time()
            spent["downsample"] += c - b
            spent["retain"] += d - c
            spent["compact"] += e - d
    in_blocks, block_bytes = store.conn.execute("SELECT COALESCE(SUM(frames), 0), COALESCE(SUM(LENGTH(body)), 0) "
                                                "FROM blocks").fetchone()
    store.close()
    return {name: 1000.0 * s / total for name, s in spent.items()} | {
        "frames": float(total), "frame_bytes": float(len(raws[-1])),
        "block_bytes_per_frame": float(block_bytes) / in_blocks if in_blocks else 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=20)
    parser.add_argument("--frames-cache", type=Path, help="keep the generated frames here (JSON) and reuse them")
    parser.add_argument("--smoke", action="store_true", help="2 minutes of 20 distinct frames: shape only")
    args = parser.parse_args()
    t0 = 1_700_000_000.0 - 1_700_000_000.0 % 900
    minutes = 2 if args.smoke else args.minutes
    with tempfile.TemporaryDirectory(prefix="rigmon-journal-cpu-") as tmp:
        work = Path(tmp)
        distinct = frames_of(SMOKE_DISTINCT_FRAMES if args.smoke else DISTINCT_FRAMES, work, t0,
                             None if args.smoke else args.frames_cache)
        r = measure(distinct, minutes, work, t0)
    print(f"journal writer CPU per frame of a full node ({int(r['frames'])} frames, {minutes} min at 1 Hz, "
          f"{r['frame_bytes'] / 1000:.1f} kB of JSON each); {machine()}")
    print()
    print("| part | CPU ms per frame |")
    print("|---|---:|")
    for name in ("write", "downsample", "retain", "compact"):
        print(f"| {name} | {r[name]:.3f} |")
    print(f"| **total** | **{sum(r[n] for n in ('write', 'downsample', 'retain', 'compact')):.3f}** |")
    print()
    print(f"stored in blocks: {r['block_bytes_per_frame']:.0f} bytes per frame")
    return 0


if __name__ == "__main__":
    sys.exit(main())
