"""Benchmark: incident 1 (`undervolt-bus-drop`, fixed seed) without the guard, in dry-run and enforcing.

Each configuration runs the same simulated rig (seed 1, the same simulated time) with a real
agent on loopback, its real collectors reading the fake hardware, and the fake NVML the guard
writes to. Reported per configuration: GPUs lost (and when, in simulated seconds), the lowest
rail minimum over the training part of the run and after the ramp the guard engaged on, the guard's
actions, and the simulated job's throughput: mean samples/s while training and samples trained
over the whole run (a lost GPU kills the data-parallel job: 0 from then on), both from the
simulator's own count (`SimNvidiaGpus.samples_total`, `job_s`).

    python benchmarks/guard_undervolt.py [--sim-s 120] [--speed 4] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine  # noqa: E402
from rigmon.schema import Frame, decode_data  # noqa: E402
from rigmon.sim.gpu import SimNvidiaGpus  # noqa: E402
from rigmon.sim.rig import running_rig  # noqa: E402

SCENARIO = "undervolt-bus-drop"
SEED = 1
#: Training starts here in the scenario; rail figures cover the time after it.
TRAINING_S = 10.0
CONFIGS: dict[str, dict[str, object] | None] = {
    "no guard": None,
    "guard dry-run": {"guard": {"enabled": True, "mode": "dry-run", "rail_count": 1}},
    "guard enforce": {"guard": {"enabled": True, "mode": "enforce", "rail_count": 1}},
}


@dataclass
class Result:
    lost: dict[int, float] = field(default_factory=dict)
    #: (simulated s when pulled, the frame's own time, its rail minimum): what came after the guard engaged is
    #: judged on the frame's time, as a frame pulled late (a loaded machine) was sampled before it was pulled.
    rail: list[tuple[float, float, float]] = field(default_factory=list)
    #: The guard_engaged event's own time (the agent's clock, as a frame's ``taken_at``).
    engaged_at: float | None = None
    actions: list[str] = field(default_factory=list)
    samples_total: float = 0.0
    job_s: float = 0.0


async def run_one(extra: dict[str, object] | None, sim_s: float, speed: float) -> Result:
    out = Result()
    async with running_rig(SCENARIO, 1, seed=SEED, base_port=0, speed=speed, interval_s=0.25,
                           extra_config=extra) as rr, httpx.AsyncClient(base_url=rr.urls[0], timeout=10) as client:
        node = rr.rig.nodes[0]
        gpus = next(d for d in node.devices if isinstance(d, SimNvidiaGpus))
        since = 0
        deadline = time.monotonic() + sim_s / speed * 3 + 30
        while time.monotonic() < deadline:
            done = node.t_s >= sim_s
            body = (await client.get("/v1/samples", params={"since": since})).json()
            for raw in body["frames"]:
                frame = decode_data(Frame, raw)
                since = max(since, frame.seq)
                sim_t = node.t_s
                for g in frame.readings.gpus:
                    if g.state == "lost" and g.index not in out.lost:
                        out.lost[g.index] = sim_t
                rail = frame.readings.psu_rail
                if rail is not None and rail.volts is not None and sim_t >= TRAINING_S:
                    out.rail.append((sim_t, frame.taken_at, rail.volts.min_volts))
                for e in frame.events:
                    if e.kind.startswith("guard_"):
                        out.actions.append(e.kind.removeprefix("guard_"))
                        if e.kind == "guard_engaged" and out.engaged_at is None:
                            out.engaged_at = e.at
            if done:
                break
            await asyncio.sleep(0.1)
        out.samples_total, out.job_s = gpus.samples_total, gpus.job_s
    return out


#: The rail's critical level (V): the ramp the guard engaged on has ended once a frame reads above it.
RECOVERED_VOLTS = 11.5


def after_engaging_ramp(r: Result) -> list[float]:
    """The rail minima of the frames after the ramp the guard engaged on (from the first frame after the
    ``guard_engaged`` event whose minimum is above `RECOVERED_VOLTS`), by each frame's own time: what every
    later ramp did. Judged by the rail, not by a delay after the event: the simulator runs on wall time, so
    on a loaded machine the engaging ramp lasts longer in simulated seconds before the caps bite."""
    if r.engaged_at is None:
        return []
    later = [v for _, at, v in r.rail if at > r.engaged_at]
    start = next((i for i, v in enumerate(later) if v > RECOVERED_VOLTS), len(later))
    return later[start:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim-s", type=float, default=120.0, help="simulated seconds per configuration")
    parser.add_argument("--speed", type=float, default=4.0, help="simulated seconds per real second")
    parser.add_argument("--smoke", action="store_true", help="a short run, for CI (no claims)")
    args = parser.parse_args()
    sim_s = 25.0 if args.smoke else args.sim_s
    print(f"# Undervolt guard on `{SCENARIO}`, seed {SEED}, {sim_s:g} simulated s per configuration, "
          f"speed {args.speed:g}")
    print(f"machine: {machine()}\n")
    print("| configuration | GPUs lost (at sim s) | rail min while training (V) | rail min after the engaging ramp (V) "
          "| guard actions | samples/s while the job ran | samples trained |")
    print("|---|---|---|---|---|---|---|")
    base_rate: float | None = None
    for name, extra in CONFIGS.items():
        r = asyncio.run(run_one(extra, sim_s, args.speed))
        lost = ", ".join(f"GPU {i} ({t:.1f})" for i, t in sorted(r.lost.items())) or "none"
        rail_min = min((v for _, _, v in r.rail), default=float("nan"))
        after = after_engaging_ramp(r)
        after_min = f"{min(after):.3f}" if after else "-"
        total, rate = r.samples_total, r.samples_total / max(r.job_s, 1e-9)
        if name == "no guard":
            base_rate = rate
        cost = f" ({(rate / base_rate - 1) * 100:+.0f} % vs no guard)" if base_rate and name != "no guard" else ""
        actions = ", ".join(r.actions) or "-"
        print(f"| {name} | {lost} | {rail_min:.3f} | {after_min} | {actions} | {rate:.0f}{cost} | {total:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
