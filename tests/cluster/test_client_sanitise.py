"""Terminal control characters from an agent stop at the client (issue 15, item 3).

An agent's frames, gaps, info, alarm lists, acknowledgements, history and error answers, and
a replayed bundle, carry ``ESC]0;...BEL`` title changes, OSC 52 clipboard writes, ``ESC[2J``,
C1 controls, bidi overrides and line separators, sent raw (UTF-8) or as JSON escapes (lower
or upper case). Whatever the client hands on has them made visible, and nothing else changed.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from rigmon.cluster.client import AgentClient, Backoff, Failed, GapReported, Sampled
from rigmon.cluster.replay import Replay
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Alarm, AlarmList, Event, Frame, Gap, History, HistorySeries, Info
from rigmon.snapshot.bundle import NodePart, frames_gzip, write_bundle
from rigmon.typed import record_field_names, to_data
from tests.tui.snapshot_apps.fake_agent import START_AT, FakeClock, make_alarm, make_frame

ESC, BEL = "\x1b", "\x07"
NODE = f"rig{ESC}]0;pwned{BEL}01"
BY = f"mallory{ESC}]52;c;ZXZpbA=={BEL}"
MESSAGE = f"rail low{ESC}[2J\x9b31m\u202eevil\u2066x\u2069\u2028end\x00\x7f"
SUBJECT = "gpu:[/]\t3\r\n"
REASON = f"go away{ESC}]0;x{BEL}"

VISIBLE = {
    NODE: r"rig\x1b]0;pwned\x0701",
    BY: r"mallory\x1b]52;c;ZXZpbA==\x07",
    MESSAGE: r"rail low\x1b[2J\x9b31m\u202eevil\u2066x\u2069\u2028end\x00\x7f",
    SUBJECT: "gpu:[/] 3  ",
    REASON: r"go away\x1b]0;x\x07",
}
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]")
RUN = "run1"


def strings(value: Any) -> Iterator[str]:
    """Every string in a record, dict keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif record_field_names(type(value)) is not None:
        for name in record_field_names(type(value)) or ():
            yield from strings(getattr(value, name))


def assert_clean(record: Any) -> None:
    for text in strings(record):
        assert UNSAFE.search(text) is None, repr(text)


def hostile_frame(seq: int) -> Frame:
    frame = make_frame(NODE, RUN, seq, random.Random(seq))
    event = Event(id=f"{RUN}-e{seq}", at=START_AT + seq, kind="xid", severity="critical", subject=SUBJECT,
                  message=MESSAGE, data={"source" + ESC: "kmsg" + ESC})
    collectors = {**frame.collectors, "psu" + ESC: msgspec.structs.replace(frame.collectors["host"], error=MESSAGE)}
    return msgspec.structs.replace(frame, events=(event,), collectors=collectors)


def hostile_alarm(n: int = 1, by: str | None = BY) -> Alarm:
    alarm = msgspec.structs.replace(make_alarm("node", n, "rule" + ESC, "critical", SUBJECT, MESSAGE), node=NODE,
                                labels={"rack" + ESC: "r1\x9b"})
    return msgspec.structs.replace(alarm, acknowledged_at=START_AT + 200, acknowledged_by=by) if by else alarm


def info() -> Info:
    return Info(schema=1, node=NODE, run_id=RUN, agent_version="0.1" + ESC, agent_start=START_AT, interval_s=1.0,
                collectors=("host", "psu" + ESC), kernel="6.8\x9b", alarm_rules=("rule" + ESC,))


def as_json(data: Any, style: str) -> bytes:
    """JSON as an agent might send it: escaped (as rigmon's agent does), raw UTF-8, or with
    upper-case hex escapes."""
    if style == "raw":
        return json.dumps(data, ensure_ascii=False).encode()
    text = json.dumps(data)
    if style == "upper":
        text = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), text)
    return text.encode()


class HostileAgent:
    """/v1 answers full of terminal controls, in one JSON ``style``."""

    def __init__(self, style: str) -> None:
        self.style = style
        self.frames = [hostile_frame(seq) for seq in range(1, 6)]

    def body(self, record: Any) -> bytes:
        return as_json(to_data(record), self.style)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/info":
            return httpx.Response(200, content=self.body(info()))
        if path == "/v1/latest":
            return httpx.Response(200, content=self.body(self.frames[-1]))
        if path == "/v1/samples":
            page = {"run_id": RUN, "frames": [to_data(f) for f in self.frames], "gap": None, "more": False}
            return httpx.Response(200, content=as_json(page, self.style))
        if path == "/v1/stream":
            gap = Gap(run_id=RUN, from_seq=6, to_seq=9, reason=MESSAGE)
            frame = msgspec.structs.replace(hostile_frame(10), seq=10)
            sse = (b"event: gap\ndata: " + self.body(gap) + b"\n\n"
                   + b"id: 10\nevent: frame\ndata: " + self.body(frame) + b"\n\n")
            return httpx.Response(200, content=sse, headers={"content-type": "text/event-stream"})
        if path == "/v1/history":
            history = History(schema=1, node=NODE, from_at=START_AT, to_at=START_AT + 10, tier="frames", step_s=1.0,
                              series={"gpus[0].power_w" + ESC: HistorySeries(at=(), min=(), mean=(), max=())},
                              events=(self.frames[0].events[0],), frames=tuple(self.frames))
            return httpx.Response(200, content=self.body(history))
        if path == "/v1/alarms":
            alarms = AlarmList(node=NODE, active=(hostile_alarm(),), recent=(hostile_alarm(2),), control=True)
            return httpx.Response(200, content=self.body(alarms))
        if path.endswith("/ack"):
            return httpx.Response(200, content=self.body(hostile_alarm()))
        return httpx.Response(404, content=as_json({"error": REASON}, self.style))


@pytest.fixture(params=["escaped", "raw", "upper"])
def agent(request: pytest.FixtureRequest) -> HostileAgent:
    return HostileAgent(request.param)


def client(agent: HostileAgent) -> AgentClient:
    return AgentClient("http://hostile.test", control_token="ctl", transport=httpx.MockTransport(agent.handle),
                       backoff=Backoff(0.01, 0.01))


async def test_every_answer_is_cleaned(agent: HostileAgent) -> None:
    c = client(agent)
    try:
        got_info = await c.info()
        assert got_info.node == VISIBLE[NODE]
        assert_clean(got_info)

        latest = await c.latest()
        assert latest is not None
        assert latest.node == VISIBLE[NODE]
        assert latest.events[0].message == VISIBLE[MESSAGE] and latest.events[0].subject == VISIBLE[SUBJECT]
        assert latest.collectors[r"psu\x1b"].error == VISIBLE[MESSAGE]
        assert latest.events[0].data == {r"source\x1b": r"kmsg\x1b"}
        assert_clean(latest)

        page = await c.samples(0, RUN)
        assert [f.seq for f in page.frames] == [1, 2, 3, 4, 5]
        assert_clean(page)

        alarms = await c.alarms()
        assert alarms.active[0].acknowledged_by == VISIBLE[BY]
        assert alarms.active[0].message == VISIBLE[MESSAGE]
        assert_clean(alarms)

        acked = await c.acknowledge("node-run1-a1", "ops")
        assert acked.acknowledged_by == VISIBLE[BY]
        assert_clean(acked)

        frames = await c.history_frames(START_AT, START_AT + 10)
        assert len(frames) == 5
        assert_clean(frames)

        streamed = [item async for item in c.stream(None, None)]
        assert [type(i) for i in streamed] == [Gap, Frame]
        assert streamed[0].reason == VISIBLE[MESSAGE]  # type: ignore[union-attr]
        assert_clean(streamed)
    finally:
        await c.aclose()


async def test_follow_hands_on_only_clean_updates(agent: HostileAgent) -> None:
    c = client(agent)
    updates = []
    try:
        async for update in c.follow():
            updates.append(update)
            if isinstance(update, Sampled) and update.frames[-1].seq == 10:
                break
    finally:
        await c.aclose()
    assert any(isinstance(u, GapReported) for u in updates)
    assert_clean(updates)


async def test_a_refusal_quoting_the_agent_is_cleaned() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, content=json.dumps({"error": REASON}).encode(),
                              extensions={"reason_phrase": b"No\x9b"})

    c = AgentClient("http://hostile.test", transport=httpx.MockTransport(refuse), backoff=Backoff(0.01, 0.01))
    try:
        update = await anext(aiter(c.follow()))
    finally:
        await c.aclose()
    assert isinstance(update, Failed)
    assert update.reason.startswith("401 unauthorized: " + VISIBLE[REASON] + "; no token was sent: ")


def test_a_replayed_bundle_is_cleaned(tmp_path: Path) -> None:
    frames = [hostile_frame(seq) for seq in range(1, 30)]
    part = NodePart(node=NODE, source=f"http://x.test/{ESC}[2J", from_at=frames[0].taken_at,
                    to_at=frames[-1].taken_at, info=info(), latest=frames[-1], frames_gz=frames_gzip(frames),
                    frame_count=len(frames))
    path = write_bundle(tmp_path / f"evil{ESC}]0;t{BEL}.tar.gz", [part], 600.0, "# report\n",
                        created_at=START_AT + 100)
    replay = Replay.open(path)
    assert replay.position().source == r"evil\x1b]0;t\x07.tar.gz"
    cluster = ClusterStore(FakeClock())
    replay.attach(cluster)
    replay.seek(cluster, replay.end_at)
    (store,) = cluster.nodes.values()
    assert store.name == VISIBLE[NODE]
    assert store.url == r"http://x.test/\x1b[2J"
    assert store.latest is not None and store.latest.events[0].message == VISIBLE[MESSAGE]
    assert_clean(store.latest)
    assert_clean(store.info)
    assert_clean(list(store.events))
    # What the screens and the export draw from; captures, configuration and inventory are not drawn.
    assert_clean([(n.node, n.info, n.history, n.events, n.frames) for n in replay.bundle.nodes])
