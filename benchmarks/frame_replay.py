"""Load source for the dashboard benchmark: frames recorded from real collectors, replayed by many agent endpoints.

One simulator process cannot run 64 full nodes (64 fake NVMLs, 64 ADC ptys, 64 agents) on a
small machine. This script does it in two steps:

``record``: one simulated node of scenario ``bench-node`` (8 V100-SXM2 behind the fake NVML,
two md RAID0 arrays of two NVMe on USB4, so two Thunderbolt links, two NICs, the RM1 ADC on a
pty, PMBus PSUs, a kernel log) sampled by a real `rigmon.agent.agent.Agent` with every
collector for some seconds; the frames it publishes are written as their wire JSON, one per
line (gzip).

``serve``: N agent endpoints in this process, each the real agent HTTP app
(`rigmon.agent.api.build_app` over a `rigmon.agent.buffer.FrameBuffer`, served by uvicorn as
the agent serves it) publishing one recorded frame a second into its buffer. Each frame is
re-stamped before it is published: its own node name, run id and seq, and ``taken_at`` set to
the wall time just before the frame is handed to the HTTP layer (so a reader on the same
machine can time the frame from there); events get the endpoint's ids and the same time.
Endpoints publish at staggered phases across the second, as independent agents do. Only the
sampling is replaced: readings are those the real collectors produced on the simulator;
/v1/info, /v1/latest, /v1/samples, /v1/stream (SSE), /v1/alarms (no rules) are the agent's.
Prints ``NAME URL`` per endpoint, as ``rigmon sim`` does.

    python benchmarks/frame_replay.py record OUT.jsonl.gz [--seconds 20] [--gpus 8]
    python benchmarks/frame_replay.py serve FRAMES.jsonl.gz [--nodes 64] [--interval 1]
    python benchmarks/frame_replay.py --smoke    # record 3 s of 2 GPUs, serve 2 endpoints, read them back
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import random
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec  # noqa: E402
import uvicorn  # noqa: E402

from benchmarks.common import PhysicsThread  # noqa: E402
from rigmon import __version__  # noqa: E402
from rigmon.agent.agent import Agent  # noqa: E402
from rigmon.agent.alarming import AlarmService  # noqa: E402
from rigmon.agent.api import ApiState, build_app  # noqa: E402
from rigmon.agent.buffer import FrameBuffer  # noqa: E402
from rigmon.agent.connections import ConnectionLimits, guarded_protocol, h11_buffer_limit  # noqa: E402
from rigmon.agent.frame_json import frame_json  # noqa: E402
from rigmon.agent.quiet_server import QuietServer  # noqa: E402
from rigmon.agent.server import max_connections  # noqa: E402
from rigmon.agent.ratelimit import RateLimiter  # noqa: E402
from rigmon.alarms.engine import AlarmEngine  # noqa: E402
from rigmon.clock import SystemClock  # noqa: E402
from rigmon.config import AgentSection  # noqa: E402
from rigmon.schema import SCHEMA_VERSION, Event, Frame, Info, decode  # noqa: E402
from rigmon.sim.clock import SimClock  # noqa: E402
from rigmon.sim.node import SimNode  # noqa: E402
from rigmon.sim.rig import STEP_REAL_S, node_agent_config  # noqa: E402
from rigmon.sim.scenarios.bench_node import BenchNode  # noqa: E402
from rigmon.sim.tree import Tree  # noqa: E402

#: Frames of the recording's first seconds left out (rates need two reads; start-up events).
SKIP_FIRST_FRAMES = 3


# --- record -------------------------------------------------------------------------------


async def record(out: Path, seconds: float, gpus: int) -> list[Frame]:
    """Run one `bench-node` with ``gpus`` GPUs under a real agent (every collector) for
    ``seconds`` after the first frames; write its frames to ``out``; return them."""
    with tempfile.TemporaryDirectory(prefix="rigmon-record-") as tmp:
        scenario = BenchNode(gpus=gpus)
        clock = SimClock(1.0)
        node = SimNode(name="node01", tree=Tree(Path(tmp) / "node01"), rng=random.Random("1:0"))
        scenario.build(node, 0)
        scenario.drive(node, 0, 0.0)
        node.step(0.0)
        physics = PhysicsThread(node, scenario, clock, STEP_REAL_S)
        physics.start()
        agent = Agent(node_agent_config(node, "127.0.0.1:0", 1.0), clock=clock)
        agent.start()
        try:
            buffer = agent.buffer
            assert buffer is not None
            while len(buffer) < SKIP_FIRST_FRAMES + max(1, round(seconds)):
                await asyncio.sleep(0.1)
            frames = buffer.since(0)[SKIP_FIRST_FRAMES:]
        finally:
            await agent.stop()
            physics.stopping.set()
            physics.join(5)
            node.close()
    out.write_bytes(gzip.compress(b"".join(frame_json(f) + b"\n" for f in frames)))
    return frames


def load_frames(path: Path) -> list[Frame]:
    """The frames of a recording."""
    return [decode(Frame, line) for line in gzip.decompress(path.read_bytes()).splitlines() if line]


# --- serve --------------------------------------------------------------------------------


def _no_events(*args: object) -> Event:
    raise AssertionError("an endpoint without alarm rules emits no alarm events")


class ReplayEndpoint:
    """One agent endpoint: the real agent API over a buffer into which recorded frames are published.

    Args:
        name: node name of this endpoint's frames.
        frames: the recording, replayed in a loop starting at ``offset``.
        offset: index of the first frame replayed (so endpoints do not all show the same one).
        interval_s: the interval announced on /v1/info.
    """

    def __init__(self, name: str, frames: list[Frame], offset: int, interval_s: float) -> None:
        self.name = name
        self.frames = frames
        self.index = offset
        self.interval_s = interval_s
        self.run_id = uuid.uuid4().hex[:16]
        self.agent_start = time.time()
        self.seq = 0
        self.events = 0
        section = AgentSection(node=name)
        self.buffer = FrameBuffer(section.buffer_frames)
        clock = SystemClock()
        self.alarms = AlarmService(AlarmEngine((), name, clock, id_prefix=self.run_id), _no_events)
        self.collectors = tuple(sorted(frames[0].collectors))
        self.state = ApiState(
            buffer=self.buffer, info=self.info, token=None, max_streams=section.max_streams,
            max_request_bytes=section.max_request_bytes, alarms=self.alarms, interval_s=interval_s,
            now=clock.time, rate_limiter=RateLimiter(section.rate_limit_per_s, section.rate_limit_burst),
        )
        self.section = section

    def info(self) -> Info:
        return Info(schema=SCHEMA_VERSION, node=self.name, run_id=self.run_id, agent_version=__version__,
                    agent_start=self.agent_start, interval_s=self.interval_s, collectors=self.collectors,
                    kernel="replay", buffer_frames=self.section.buffer_frames, alarm_rules=())

    def server(self) -> uvicorn.Server:
        """A uvicorn server for this endpoint on a free loopback port, configured as `make_server` does.

        Same connection guard and parser choice (httptools when installed, else h11), no proxy
        headers, no websockets: a replayed endpoint answers as an agent's server does.
        """
        section = self.section
        limits = ConnectionLimits(
            head_timeout_s=section.head_timeout_s, max_per_client=section.max_connections_per_client,
            max_total=max_connections(section.max_streams), max_head_bytes=section.max_request_bytes, tokens=(),
        )
        config = uvicorn.Config(
            build_app(self.state), host="127.0.0.1", port=0, log_level="warning", log_config=None,
            access_log=False, lifespan="off", proxy_headers=False, http=guarded_protocol(limits), ws="none",
            h11_max_incomplete_event_size=h11_buffer_limit(section.max_request_bytes), timeout_graceful_shutdown=1,
        )
        server = QuietServer(config)
        server.ssl_handshake_timeout_s = section.head_timeout_s
        server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
        return server

    def publish(self) -> Frame:
        """Re-stamp the next recorded frame and hand it to the HTTP layer (the buffer wakes the streams)."""
        recorded = self.frames[self.index % len(self.frames)]
        self.index += 1
        self.seq += 1
        now = time.time()
        events = []
        for event in recorded.events:
            self.events += 1
            events.append(msgspec.structs.replace(event, id=f"{self.run_id}-{self.events}", at=now))
        frame = msgspec.structs.replace(recorded, node=self.name, run_id=self.run_id, seq=self.seq, taken_at=now,
                                    agent_start=self.agent_start, events=tuple(events))
        self.buffer.append(frame)
        return frame


def _bound_port(server: uvicorn.Server) -> int:
    for s in server.servers:
        for sock in s.sockets:
            return int(sock.getsockname()[1])
    raise RuntimeError("server has no socket")


async def serve(frames: list[Frame], nodes: int, interval_s: float, stop: asyncio.Event,
                started: asyncio.Future[list[str]] | None = None) -> int:
    """Serve ``nodes`` replaying endpoints until ``stop``; print ``NAME URL`` lines; return frames published."""
    endpoints = [ReplayEndpoint(f"node{i + 1:02d}", frames, i * 7, interval_s) for i in range(nodes)]
    servers = [e.server() for e in endpoints]
    tasks = [asyncio.create_task(s.serve(), name=f"http-{e.name}") for e, s in zip(endpoints, servers)]
    published = 0
    try:
        for server, task in zip(servers, tasks):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("endpoint server stopped during start-up")
                await asyncio.sleep(0.01)
        urls = [f"http://127.0.0.1:{_bound_port(s)}" for s in servers]
        for endpoint in endpoints:
            endpoint.publish()
            published += 1
        for endpoint, url in zip(endpoints, urls):
            print(f"{endpoint.name} {url}", flush=True)
        if started is not None:
            started.set_result(urls)
        # Endpoint i publishes at phase i/N of each interval: independent agents' ticks are spread.
        start = time.monotonic() + interval_s
        due = [start + interval_s * i / nodes for i in range(nodes)]
        while not stop.is_set():
            i = min(range(nodes), key=due.__getitem__)
            delay = due[i] - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
                continue
            endpoints[i].publish()
            published += 1
            due[i] += interval_s
            if due[i] < time.monotonic():
                # Fell behind by more than an interval (a starved process): skip, as a late agent tick does.
                due[i] = time.monotonic() + interval_s * i / nodes
    finally:
        for server in servers:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
    return published


async def _serve_until_signalled(frames: list[Frame], nodes: int, interval_s: float) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return await serve(frames, nodes, interval_s, stop)


async def _smoke() -> int:
    import httpx

    with tempfile.TemporaryDirectory(prefix="rigmon-replay-") as tmp:
        path = Path(tmp) / "frames.jsonl.gz"
        recorded = await record(path, 3.0, 2)
    stop = asyncio.Event()
    started: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(recorded, 2, 1.0, stop, started))
    urls = await started
    async with httpx.AsyncClient() as client:
        for url in urls:
            latest = decode(Frame, (await client.get(f"{url}/v1/latest")).content)
            print(f"{latest.node}: seq {latest.seq}, GPUs {len(latest.readings.gpus)}, "
                  f"collectors {','.join(sorted(latest.collectors))}")
    stop.set()
    await task
    print(f"recorded frames: {len(recorded)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="record briefly, serve 2 endpoints, read them (CI)")
    sub = parser.add_subparsers(dest="command")
    rec = sub.add_parser("record", help="record frames of a real agent on a simulated bench-node")
    rec.add_argument("out", type=Path)
    rec.add_argument("--seconds", type=float, default=20.0, help="frames recorded (one a second)")
    rec.add_argument("--gpus", type=int, default=8)
    srv = sub.add_parser("serve", help="serve recorded frames from N agent endpoints")
    srv.add_argument("frames", type=Path)
    srv.add_argument("--nodes", type=int, default=64)
    srv.add_argument("--interval", type=float, default=1.0, help="seconds between frames of one endpoint")
    args = parser.parse_args()
    if args.smoke:
        return asyncio.run(_smoke())
    if args.command == "record":
        frames = asyncio.run(record(args.out, args.seconds, args.gpus))
        sizes = sorted(len(frame_json(f)) for f in frames)
        print(f"recorded {len(frames)} frames to {args.out} (JSON {sizes[0]}-{sizes[-1]} bytes); "
              f"GPUs {len(frames[-1].readings.gpus)}; collectors "
              + ", ".join(f"{k}={v.state}" for k, v in sorted(frames[-1].collectors.items())), flush=True)
        return 0
    if args.command == "serve":
        published = asyncio.run(_serve_until_signalled(load_frames(args.frames), args.nodes, args.interval))
        print(f"published {published} frames", file=sys.stderr)
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
