"""A fake agent behind ``httpx.MockTransport``: seeded frames, a controllable stream, failures on demand."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Sequence

import httpx
from msgspec.structs import replace

from rigmon.cluster.chart import history_from_frames
from rigmon.schema import (
    SCHEMA_VERSION,
    Alarm,
    AlarmList,
    CollectorStatus,
    Event,
    Frame,
    HostReading,
    Info,
    NetInterfaceReading,
    Readings,
    TemperatureReading,
    encode,
)
from rigmon.summary import summary_record
from rigmon.typed import to_data

#: Unix time of every fake agent's first frame.
START_AT = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start_s: float = 1000.0) -> None:
        self.t = start_s

    def time(self) -> float:
        return START_AT + self.t

    def monotonic(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def make_frame(node: str, run_id: str, seq: int, rng: random.Random, start_at: float = START_AT) -> Frame:
    """One plausible host-only frame, deterministic from ``rng``."""
    cpu = round(20 + 70 * rng.random(), 1)
    rx = round(1e8 + 9e8 * rng.random(), 1)
    events: tuple[Event, ...] = ()
    if seq == 1:
        events = (Event(id=f"{run_id}-1", at=start_at, kind="agent_started", severity="info",
                        subject=f"node:{node}", message=f"agent started on {node}"),)
    return Frame(
        schema=SCHEMA_VERSION,
        node=node,
        run_id=run_id,
        seq=seq,
        taken_at=start_at + seq,
        agent_start=start_at,
        collectors={"host": CollectorStatus(state="ok", ok=True, duration_s=0.0007, sampled_at=start_at + seq)},
        readings=Readings(
            host=HostReading(cpu_pct=cpu, cpu_count=32, load_1=3.5, load_5=3.1, load_15=2.8,
                             mem_total_bytes=256 << 30, mem_available_bytes=180 << 30,
                             swap_total_bytes=8 << 30, swap_free_bytes=8 << 30, uptime_s=86400.0 + seq,
                             boot_id="b00710d0-0000-4000-8000-000000000001"),
            temperatures=(TemperatureReading(sensor="hwmon0/temp1", label="k10temp Tctl", temp_c=55.0),),
            net=(NetInterfaceReading(
                name="enp65s0f0", operstate="up", carrier=True, speed_mbps=100000, mtu=9000,
                rx_bytes_total=int(rx) * seq, tx_bytes_total=int(rx) * seq, rx_packets_total=seq,
                tx_packets_total=seq, rx_errors_total=0, tx_errors_total=0, rx_dropped_total=0,
                tx_dropped_total=0, carrier_changes_total=1, rx_bytes_per_s=rx, tx_bytes_per_s=rx * 0.97,
                rx_packets_per_s=1000.0, tx_packets_per_s=1000.0),),
        ),
        events=events,
    )


def _sse(frame: Frame, summary: bool = False) -> bytes:
    if summary:
        return f"id: {frame.seq}\nevent: summary\ndata: ".encode() + encode(summary_record(frame)) + b"\n\n"
    return f"id: {frame.seq}\nevent: frame\ndata: ".encode() + encode(frame) + b"\n\n"


class FakeAgent:
    """Serves /v1/info, /v1/latest, /v1/samples and /v1/stream from frames it makes itself.

    Attributes:
        down: every request fails with a connection error.
        status: answer every request with this HTTP status instead (401, 500...).
        error: the words of that answer (``{"error": ...}``; default: a 401's, else "agent failed").
        body: answer every request with these bytes instead (garbage, another schema).
        requests: every request seen, for assertions on headers and parameters.
        alarms: the /v1/alarms answer (``None``: 404, alarms not enabled).
        control_token: token an acknowledgement needs (``None``: read-only, 403).
        journal: answer /v1/history (series and events, not frames) from the frames held, as
            the journal would (``False``: 404, no journal).
        summaries: stream summary records (`rigmon.summary.summary_record`) to a ``view=summary``
            subscription, as a real agent does (``False``: frames, as an agent without them).

    With ``recorded`` frames (a fixture of `record_frames`) the agent publishes those in
    order, renamed to its node and run, instead of making host-only frames.
    """

    def __init__(self, node: str, seed: int = 1, frames: int = 0, run: int = 1,
                 recorded: Sequence[Frame] = ()) -> None:
        self.node = node
        self.recorded = list(recorded)
        self.rng = random.Random(f"{node}:{seed}")
        self.run = run
        self.run_id = f"{node}-run{run}"
        self.frames: list[Frame] = []
        self.down = False
        self.status: int | None = None
        self.error: str | None = None
        self.body: bytes | None = None
        self.requests: list[httpx.Request] = []
        self.alarms: AlarmList | None = None
        self.control_token: str | None = None
        self.journal = False
        self.summaries = False
        self._changed: asyncio.Event | None = None
        self._version = 0
        self._generation = 0
        self.publish(frames)

    @property
    def url(self) -> str:
        return f"http://{self.node}.test:9871"

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def publish(self, count: int = 1) -> None:
        """Sample ``count`` more frames and wake the streams."""
        for _ in range(count):
            seq = self.frames[-1].seq + 1 if self.frames else 1
            if self.recorded:
                frame = self.recorded[(seq - 1) % len(self.recorded)]
                # On this agent's clock, like its host-only frames (the cluster rules compare clocks).
                shift = START_AT + seq - frame.taken_at
                events = tuple(replace(e, at=e.at + shift) for e in frame.events)
                procs = tuple(replace(p, started_at=p.started_at + shift) if p.started_at is not None else p
                              for p in frame.readings.gpu_processes)
                frame = replace(frame, readings=replace(frame.readings, gpu_processes=procs))
                self.frames.append(replace(frame, node=self.node, run_id=self.run_id, seq=seq, taken_at=START_AT + seq,
                                           agent_start=START_AT, events=events))
            else:
                self.frames.append(make_frame(self.node, self.run_id, seq, self.rng))
        self._wake()

    def drop_streams(self) -> None:
        """End every open stream (the connection breaks)."""
        self._generation += 1
        self._wake()

    def restart(self) -> None:
        """A new agent run: new run id, seq from 1 again, the old frames gone."""
        self.run += 1
        self.run_id = f"{self.node}-run{self.run}"
        self.frames = []
        self.drop_streams()

    def _wake(self) -> None:
        self._version += 1
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _wait(self, version: int) -> None:
        """Wait for a change after ``version`` (returns at once if one already happened)."""
        if self._version != version:
            return
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()

    def info(self) -> Info:
        collectors = tuple(sorted(self.recorded[0].collectors)) if self.recorded else ("host",)
        agent_start = self.recorded[0].agent_start if self.recorded else START_AT
        return Info(schema=SCHEMA_VERSION, node=self.node, run_id=self.run_id, agent_version="0.1.0",
                    agent_start=agent_start, interval_s=1.0, collectors=collectors, buffer_frames=3600)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.down:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if self.status is not None:
            words = self.error or ("missing or wrong bearer token" if self.status == 401 else "agent failed")
            return httpx.Response(self.status, json={"error": words})
        if self.body is not None:
            return httpx.Response(200, content=self.body, headers={"content-type": "application/json"})
        path = request.url.path
        if path == "/v1/info":
            return httpx.Response(200, content=encode(self.info()))
        if path == "/v1/latest":
            if not self.frames:
                return httpx.Response(503, json={"error": "no frame sampled yet"})
            return httpx.Response(200, content=encode(self.frames[-1]))
        if path == "/v1/samples":
            since = int(request.url.params.get("since", "0"))
            limit = int(request.url.params.get("limit", "1000"))
            frames = [f for f in self.frames if f.seq > since][:limit]
            more = bool(frames) and frames[-1].seq < self.frames[-1].seq
            body = {"run_id": self.run_id, "frames": [to_data(f) for f in frames], "gap": None, "more": more}
            return httpx.Response(200, content=json.dumps(body).encode())
        if path == "/v1/stream":
            last = request.headers.get("last-event-id")
            if last is not None and request.url.params.get("run_id") not in (None, self.run_id):
                last = "0"
            after = int(last) if last is not None else (self.frames[-1].seq - 1 if self.frames else 0)
            summary = self.summaries and request.url.params.get("view") == "summary"
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  stream=_Stream(self, after, self._generation, summary))
        if path == "/v1/history" and self.journal and request.url.params.get("frames", "0") == "0":
            params = request.url.params
            to_at = float(params.get("to", str(self.frames[-1].taken_at if self.frames else START_AT)))
            from_at = float(params.get("from", str(to_at - 3600)))
            names = params["series"].split(",") if "series" in params else None
            return httpx.Response(200, content=encode(history_from_frames(self.frames, self.node, from_at, to_at,
                                                                          names)))
        if path == "/v1/alarms" and self.alarms is not None:
            return httpx.Response(200, content=encode(self.alarms))
        if path.startswith("/v1/alarms/") and path.endswith("/ack") and self.alarms is not None:
            return self._ack(request, path.split("/")[3])
        return httpx.Response(404, json={"error": "not found"})

    def _ack(self, request: httpx.Request, alarm_id: str) -> httpx.Response:
        if self.control_token is None:
            return httpx.Response(403, json={"error": "this agent is read-only: no control token is configured"})
        if request.headers.get("authorization") != f"Bearer {self.control_token}":
            return httpx.Response(401, json={"error": "missing or wrong control token"})
        assert self.alarms is not None
        found = next((a for a in self.alarms.active if a.id == alarm_id), None)
        if found is None:
            return httpx.Response(404, json={"error": f"no alarm {alarm_id}"})
        by = json.loads(request.content or b"{}").get("by", "operator")
        acked = replace(found, acknowledged_at=found.updated_at + 1, acknowledged_by=by)
        self.alarms = replace(self.alarms, active=tuple(acked if a.id == alarm_id else a for a in self.alarms.active))
        return httpx.Response(200, content=encode(acked))


def make_alarm(node: str, n: int, rule: str, severity: str, subject: str, message: str, *,
               state: str = "firing", at: float = START_AT + 100, resolved: bool = False) -> Alarm:
    """An alarm as an agent's /v1/alarms lists it, at fixed times."""
    return Alarm(id=f"{node}-run1-a{n}", rule=rule, rule_kind="threshold", severity=severity,  # type: ignore[arg-type]
                 node=node, subject=subject, state="resolved" if resolved else state,  # type: ignore[arg-type]
                 message=message, started_at=at, updated_at=at + (30 if resolved else 0),
                 fired_at=at if state == "firing" or resolved else None,
                 resolved_at=at + 30 if resolved else None, labels={})


class _Stream(httpx.AsyncByteStream):
    def __init__(self, agent: FakeAgent, after: int, generation: int, summary: bool = False) -> None:
        self.agent = agent
        self.after = after
        self.generation = generation
        self.summary = summary

    async def __aiter__(self) -> AsyncIterator[bytes]:
        cursor = self.after
        while True:
            version = self.agent._version
            if self.agent.down or self.agent._generation != self.generation:
                return
            for frame in [f for f in self.agent.frames if f.seq > cursor]:
                yield _sse(frame, self.summary)
                cursor = frame.seq
            await self.agent._wait(version)


def other_schema(frame: Frame) -> bytes:
    """``frame`` as a agent of the next schema version would send it."""
    return encode(replace(frame, schema=SCHEMA_VERSION + 1))
