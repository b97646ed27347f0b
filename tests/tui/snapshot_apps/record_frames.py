"""Record frames of a simulated scenario through real agents into a fixture (JSON lines, gzip).

The dashboard's summary, Pilot and snapshot tests replay these files, so they see the
frames the real collectors produce from the simulator's trees (fake NVML, RM1 over a pty,
md/NVMe/Thunderbolt sysfs) and stay deterministic. Re-record deliberately, from the
repository root:

    PYTHONPATH=$PWD python -m tests.tui.snapshot_apps.record_frames undervolt-bus-drop 75 \
        tests/fixtures/frames/v100-gpu-lost-rail-sag.jsonl.gz
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from rigmon.schema import Frame, decode_data
from rigmon.sim.rig import running_rig

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "frames"


def load_frames(name: str) -> list[Frame]:
    """Frames of the fixture ``tests/fixtures/frames/<name>.jsonl.gz``, oldest first."""
    with gzip.open(FIXTURES / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [decode_data(Frame, json.loads(line)) for line in f if line.strip()]


async def record(scenario: str, sim_seconds: float, speed: float, seed: int) -> list[dict[str, Any]]:
    """Frames of node01 from agent start until ``sim_seconds`` of simulated time.

    The agent samples every ``1 / speed`` real seconds: one frame per simulated second.
    """
    frames: list[dict[str, Any]] = []
    async with running_rig(scenario, 1, seed=seed, speed=speed, base_port=0,
                           interval_s=1.0 / speed) as rr, \
            httpx.AsyncClient(base_url=rr.urls[0], timeout=10) as client:
        since = 0
        while rr.rig.clock.elapsed() < sim_seconds:
            await asyncio.sleep(0.5)
            response = await client.get("/v1/samples", params={"since": since})
            response.raise_for_status()
            for raw in response.json()["frames"]:
                since = max(since, raw["seq"])
                frames.append(raw)
    return frames


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("sim_seconds", type=float)
    parser.add_argument("out", type=Path)
    parser.add_argument("--speed", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    frames = asyncio.run(record(args.scenario, args.sim_seconds, args.speed, args.seed))
    with gzip.open(args.out, "wt", encoding="utf-8", compresslevel=9) as f:
        for raw in frames:
            f.write(json.dumps(raw, separators=(",", ":")) + "\n")
    print(f"{len(frames)} frames -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
