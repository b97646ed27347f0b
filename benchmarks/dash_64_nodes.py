"""Benchmark: the dashboard following N nodes (64 by default), headless; its CPU, peak memory and frame-to-screen latency.

The agents run in a separate process, so CPU and memory are the dashboard's own. Two sources:

- ``--source replay`` (default): `benchmarks/frame_replay.py` first records frames of one
  simulated ``bench-node`` (8 V100-SXM2 behind the fake NVML, the RM1 ADC, PMBus PSUs, md
  arrays of NVMe, Thunderbolt links, NICs, kernel log) sampled by a real agent with every
  collector, then serves them from N real agent HTTP endpoints, one re-stamped frame a second
  each. One simulator process cannot run 64 such nodes on a 2-core machine; the replay can.
- ``--source sim``: ``rigmon sim --scenario NAME --nodes N`` (real simulated nodes and agents).

Frame-to-screen latency: every frame's ``taken_at`` is set by the replaying endpoint just
before it hands the frame to the agent's HTTP layer (same machine, same clock). The dashboard
here is `RigmonApp` with three hooks, none changing what it does: it notes when each frame
is filed in the node store, which `refresh_screen` call first drew the store with it, and when
the screen's next update after that was rendered and written (`App._display`; headless, so the
script renders the update to terminal output itself, as the terminal driver would). The
latency covers the HTTP transfer, decoding, filing, waiting for the screen's refresh, the
widgets' update and the render. Only frames of nodes whose row was on the screen at that
render count (at 200x60 the cluster screen shows about 29 of 64 rows); the others are counted
as off-screen. With ``--screen node`` the node screen of one node is shown instead. With
``--source sim`` the agents' own ``taken_at`` (the start of their sample, before collecting) is
the start, so the latency includes the agent's collecting.

Nodes not on screen follow ``/v1/stream?view=summary`` where the dashboard does that (a
dashboard before it follows full frames); the script counts which arrived how. It refuses to
report (exit 1) unless every node had a fresh frame (whole or summary) filed for at least 90 %
of the seconds measured.

    python benchmarks/dash_64_nodes.py [--nodes 64] [--warmup 20] [--seconds 60] [--source replay|sim]
        [--scenario NAME] [--screen cluster|node] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import RenderableType

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from textual.screen import Screen  # noqa: E402

from benchmarks.common import percentile, rigmon_env, stop  # noqa: E402
from rigmon.cli_sim import _read_urls  # noqa: E402
from rigmon.cluster.config import NodeTarget  # noqa: E402
from rigmon.tui import app as tui_app  # noqa: E402
from rigmon.tui.app import RigmonApp  # noqa: E402
from rigmon.tui.messages import NodeSampled  # noqa: E402
from rigmon.tui.screens.cluster import ClusterScreen  # noqa: E402
from rigmon.tui.screens.node import NodeScreen  # noqa: E402
from rigmon.tui.widgets.node_row import NodeRow  # noqa: E402


#: Share of the seconds measured for which every node must have had a fresh frame filed.
FRESH_SHARE = 0.9


class GcPauses:
    """Wall time of each garbage collection, by generation (a full collection stops the event loop)."""

    def __init__(self) -> None:
        self.pauses_s: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses_s[info["generation"]].append(time.perf_counter() - self._started)

    def clear(self) -> None:
        for pauses in self.pauses_s.values():
            pauses.clear()


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class TimedApp(RigmonApp):
    """The dashboard, timing each frame from its ``taken_at`` to the render of the screen showing it.

    ``since`` (wall time) is where counting starts: frames taken before it (back-fill,
    warm-up) are not timed.
    """

    # Textual resolves a relative CSS_PATH against the subclass's module.
    CSS_PATH = str(REPO / "rigmon" / "tui" / "rigmon.tcss")
    since: float = float("inf")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # (node key, taken_at, filed at): frames filed in the node store since the last refresh.
        self.filed: list[tuple[str, float, float]] = []
        # (node key, taken_at, filed at, drawn at): given to the widgets, waiting for the render.
        self.drawn: list[tuple[str, float, float, float]] = []
        self.latencies_s: list[float] = []
        # Per frame on screen: agent -> filed, filed -> given to the widgets, widgets -> rendered.
        self.stages_s: list[tuple[float, float, float]] = []
        self.off_screen = 0
        self.renders = 0
        # Frames filed while measuring, whole and as summary records.
        self.whole = 0
        self.summaries = 0

    def on_node_sampled(self, message: NodeSampled) -> None:
        super().on_node_sampled(message)
        now = time.time()
        self.filed.extend((message.key, f.taken_at, now) for f in message.frames if f.taken_at >= self.since)
        self.whole += sum(1 for f in message.frames if f.taken_at >= self.since)

    def on_node_summarized(self, message: Any) -> None:
        # Dashboards before the summary stream have no such message (and never call this).
        super().on_node_summarized(message)
        now = time.time()
        taken = [r.frame.taken_at for r in message.records if r.frame.taken_at >= self.since]
        self.filed.extend((message.key, at, now) for at in taken)
        self.summaries += len(taken)

    def _given_to_widgets(self) -> None:
        now = time.time()
        self.drawn.extend((key, taken_at, filed_at, now) for key, taken_at, filed_at in self.filed)
        self.filed.clear()

    def refresh_screen(self) -> None:
        # Dashboards before `draw_screen` drew only here.
        super().refresh_screen()
        self._given_to_widgets()

    def draw_screen(self, *args: object, **kwargs: object) -> None:
        super().draw_screen(*args, **kwargs)  # type: ignore[arg-type]
        self._given_to_widgets()

    def _display(self, screen: Screen[object], renderable: RenderableType | None) -> None:
        super()._display(screen, renderable)
        if renderable is None or self._batch_count or screen is not self.screen:
            return
        if self.is_headless and hasattr(renderable, "render_segments"):
            # What the terminal driver does with an update; headless drivers skip it.
            renderable.render_segments(self.console)
        now = time.time()
        self.renders += 1
        if not self.drawn:
            return
        if isinstance(screen, NodeScreen):
            shown = {self.selected}
        elif isinstance(screen, ClusterScreen):
            shown = {w.view.key for w in screen._compositor.visible_widgets
                     if isinstance(w, NodeRow) and w.view is not None}
        else:
            shown = set()
        for key, taken_at, filed_at, drawn_at in self.drawn:
            if key in shown:
                self.latencies_s.append(now - taken_at)
                self.stages_s.append((filed_at - taken_at, drawn_at - filed_at, now - drawn_at))
            else:
                self.off_screen += 1
        self.drawn.clear()


async def measure(urls: list[str], warmup_s: float, seconds: float, screen: str) -> dict[str, Any]:
    app = TimedApp([NodeTarget(u) for u in urls])
    async with app.run_test(size=(200, 60)) as pilot:
        await asyncio.sleep(warmup_s)
        if screen == "node":
            app.open_node(urls[0])
        live_before = app.cluster.counts()["live"]
        cpu0, wall0 = cpu_s(), time.monotonic()
        app.since = time.time()
        seqs0 = {k: s.history.seqs()[-1] if len(s.history) else 0 for k, s in app.cluster.nodes.items()}
        renders0 = app.renders
        gc_pauses = GcPauses()
        gc.callbacks.append(gc_pauses)
        await asyncio.sleep(seconds)
        cpu1, wall1 = cpu_s(), time.monotonic()
        app.since = float("inf")
        seqs1 = {k: s.history.seqs()[-1] if len(s.history) else 0 for k, s in app.cluster.nodes.items()}
        renders1 = app.renders
        gc.callbacks.remove(gc_pauses)
        live_after = app.cluster.counts()["live"]
        await pilot.press("q")
    elapsed = wall1 - wall0
    return {
        "cpu_per_s": (cpu1 - cpu0) / elapsed,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "frames_per_s": sum(seqs1[k] - seqs0[k] for k in seqs1) / elapsed,
        # Fewest new frames of one node (each endpoint publishes one a second).
        "slowest_node": min((seqs1[k] - seqs0[k] for k in seqs1), default=0),
        "elapsed_s": elapsed,
        "whole": app.whole,
        "summaries": app.summaries,
        "renders_per_s": (renders1 - renders0) / elapsed,
        "live_before": live_before,
        "live_after": live_after,
        "latencies_s": app.latencies_s,
        "off_screen": app.off_screen,
        "stages_s": app.stages_s,
        "gc_pauses_s": gc_pauses.pauses_s,
    }


def start_source(args: argparse.Namespace, work: Path) -> subprocess.Popen[str] | None:
    """Start the agents' process; ``None`` if it could not (after saying why)."""
    env = rigmon_env()
    if args.source == "sim":
        cmd = [sys.executable, "-m", "rigmon", "sim", "--scenario", args.scenario, "--nodes", str(args.nodes),
               "--base-port", "0"]
    else:
        frames = work / "frames.jsonl.gz"
        recorded = subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "frame_replay.py"), "record", str(frames),
             "--seconds", str(args.record_seconds), "--gpus", str(args.gpus)],
            capture_output=True, text=True, env=env, timeout=300,
        )
        if recorded.returncode != 0:
            print(f"recording failed:\n{recorded.stderr[-3000:]}", file=sys.stderr)
            return None
        print(recorded.stdout.strip())
        cmd = [sys.executable, str(REPO / "benchmarks" / "frame_replay.py"), "serve", str(frames),
               "--nodes", str(args.nodes)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds before measuring")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds measured")
    parser.add_argument("--source", choices=("replay", "sim"), default="replay",
                        help="replay: recorded frames of real collectors served by N agent endpoints (default); "
                             "sim: rigmon sim with --scenario")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs of the recorded bench-node (replay)")
    parser.add_argument("--record-seconds", type=float, default=20.0, help="frames recorded (replay)")
    parser.add_argument("--scenario", default="undervolt-bus-drop", help="simulator scenario (sim)")
    parser.add_argument("--screen", choices=("cluster", "node"), default="cluster",
                        help="screen shown while measuring (node: the first node's)")
    parser.add_argument("--smoke", action="store_true", help="2 nodes for a few seconds (CI; no figures claimed)")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.warmup, args.seconds, args.gpus, args.record_seconds = 2, 3.0, 3.0, 2, 3.0
        args.scenario = "healthy"
    if hasattr(tui_app, "tune_gc"):
        tui_app.tune_gc()  # as `rigmon dash` does (dashboards before it kept Python's default)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="rigmon-dash-") as tmp:
        source = start_source(args, Path(tmp))
        if source is None:
            return 1
        try:
            urls = _read_urls(source, args.nodes, 120)
            if urls is None:
                print("agents did not start", file=sys.stderr)
                return 1
            result = asyncio.run(measure(urls, args.warmup, args.seconds, args.screen))
        finally:
            # 64 simulated agents with their GPUs and ADC threads can take a while to stop.
            stop(source)  # type: ignore[arg-type]
    load_after = os.getloadavg()
    if result["slowest_node"] < int(FRESH_SHARE * result["elapsed_s"]) or result["live_after"] < args.nodes:
        print(f"refused: a node had only {result['slowest_node']} fresh frames in {result['elapsed_s']:.0f} s "
              f"({result['live_after']:.0f} of {args.nodes} live at the end); the load did not reach the "
              f"dashboard as claimed", file=sys.stderr)
        return 1
    what = (f"replay of {args.gpus}-GPU bench-node frames" if args.source == "replay"
            else f"rigmon sim {args.scenario}")
    print(f"nodes: {args.nodes} ({what}), {args.screen} screen, measured {args.seconds:.0f} s "
          f"after {args.warmup:.0f} s warm-up")
    print(f"load average (1 min) before/after: {load[0]:.2f} / {load_after[0]:.2f}")
    print(f"live nodes: {result['live_before']:.0f} before, {result['live_after']:.0f} after")
    print(f"frames filed: {result['frames_per_s']:.1f} per second (slowest node {result['slowest_node']} in {result['elapsed_s']:.0f} s); "
          f"screen updates rendered: {result['renders_per_s']:.1f} per second")
    print(f"filed while measuring: {result['whole']} whole frames, {result['summaries']} summary records")
    print(f"dashboard CPU: {result['cpu_per_s'] * 100:.1f} % of one core")
    print(f"dashboard peak RSS: {result['peak_rss_mb']:.0f} MB")
    gc_line = ", ".join(f"gen {g}: {len(p)}, longest {1000 * max(p, default=0.0):.0f} ms"
                        for g, p in result["gc_pauses_s"].items())
    print(f"garbage collections while measuring: {gc_line}")
    latencies = [1000 * v for v in result["latencies_s"]]
    if latencies:
        print(f"frame-to-screen latency: median {percentile(latencies, 0.5):.0f} ms, "
              f"p99 {percentile(latencies, 0.99):.0f} ms, max {max(latencies):.0f} ms "
              f"over {len(latencies)} frames on screen ({result['off_screen']} more off-screen)")
        stages = result["stages_s"]
        parts = ("agent -> filed in the store", "filed -> drawn (screen refresh)", "drawn -> rendered")
        print("| part of the latency | median ms | p99 ms | max ms |")
        print("|---|---:|---:|---:|")
        for index, name in enumerate(parts):
            values = [1000 * s[index] for s in stages]
            print(f"| {name} | {percentile(values, 0.5):.0f} | {percentile(values, 0.99):.0f} | {max(values):.0f} |")
    else:
        print(f"frame-to-screen latency: no frame on screen ({result['off_screen']} off-screen)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
