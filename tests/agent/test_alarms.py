"""Alarms in the agent: a pushed reading fires at once, transitions become events,
/v1/alarms lists them, acknowledgement needs the control token, notifiers get them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.alarms.rules import parse_rules
from rigmon.collectors.base import PolledCollector, PushFn
from rigmon.config import AgentConfig, AgentSection, NotifySection
from rigmon.schema import Alarm, AlarmList, Info, TemperatureReading, decode
from tests.notify.receiver import receiver

READ = "read-token"
CONTROL = "control-token"

RULES = parse_rules("""
[[rule]]
name = "hot"
kind = "threshold"
severity = "critical"
select = "temperatures[sensor=probe].temp_c"
above = 90.0
hysteresis = 5.0
subject = "probe"
message = "probe at {value} C"
""", "test")


class Probe(PolledCollector):
    """Polled every interval; pushes readings from its own thread when told."""

    name = "probe"

    def __init__(self) -> None:
        self.push: PushFn | None = None

    def collect(self) -> Sequence[object]:
        return []

    def start(self, push: PushFn) -> None:
        self.push = push

    def send(self, temp_c: float) -> None:
        assert self.push is not None
        self.push([TemperatureReading(sensor="probe", label="probe", temp_c=temp_c)])


def make_agent(tmp_path: Path, control: str | None = CONTROL, notify: tuple[NotifySection, ...] = ()) -> \
        tuple[Agent, Probe]:
    probe = Probe()
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path), interval_s=30.0), notify=notify)
    agent = Agent(config, token=READ, collectors={"probe": probe}, control_token=control, rules=RULES)
    return agent, probe


async def wait_for(check: object, timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[Agent, Probe, httpx.AsyncClient]]:
    agent, probe = make_agent(tmp_path)
    transport = httpx.ASGITransport(app=agent.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent",
                                 headers={"Authorization": f"Bearer {READ}"}) as client:
        agent.start()
        await wait_for(lambda: probe.push is not None and agent.buffer and agent.buffer.latest)
        yield agent, probe, client
    await agent.stop()


async def test_pushed_reading_fires_without_waiting_for_the_tick(
        running: tuple[Agent, Probe, httpx.AsyncClient]) -> None:
    agent, probe, client = running
    assert agent.buffer is not None and agent.buffer.latest is not None
    seq = agent.buffer.latest.seq
    # The interval is 30 s: only the push can publish a frame within this test.
    probe.send(95.0)
    await wait_for(lambda: agent.alarms.engine.active())
    body = decode(AlarmList, (await client.get("/v1/alarms")).content)
    assert body.node == "t1" and body.rules == ("hot",) and body.control is True
    (alarm,) = body.active
    assert (alarm.state, alarm.severity, alarm.subject, alarm.value, alarm.message) == (
        "firing", "critical", "probe", 95, "probe at 95 C")
    assert alarm.id.startswith(agent.run_id)
    # The transition travels in the frame whose reading caused it, not in the next one: no
    # other frame is published here (the next tick is 30 s away).
    (frame,) = agent.buffer.since(seq)
    assert [t.temp_c for t in frame.readings.temperatures] == [95.0]
    (event,) = [e for e in frame.events if e.kind == "alarm_firing"]
    assert event.severity == "critical" and event.subject == "probe" and event.data["alarm_id"] == alarm.id
    probe.send(93.0)  # inside the hysteresis band: still firing, no transition
    await wait_for(lambda: len(agent.buffer.since(seq)) == 2)
    assert not agent.buffer.since(seq)[1].events
    probe.send(80.0)
    await wait_for(lambda: not agent.alarms.engine.active())
    body = decode(AlarmList, (await client.get("/v1/alarms")).content)
    assert body.active == () and body.recent[0].id == alarm.id and body.recent[0].state == "resolved"
    info = decode(Info, (await client.get("/v1/info")).content)
    assert info.alarm_rules == ("hot",)


async def test_ack_needs_the_control_token(running: tuple[Agent, Probe, httpx.AsyncClient]) -> None:
    agent, probe, client = running
    probe.send(99.0)
    await wait_for(lambda: agent.alarms.engine.active())
    alarm_id = agent.alarms.engine.active()[0].id
    url = f"/v1/alarms/{alarm_id}/ack"
    r = await client.post(url, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and "control token" in r.json()["error"]
    r = await client.post(url, headers={"Authorization": ""})
    assert r.status_code == 401
    r = await client.post(url)  # the read token: authenticated, but not for control
    assert r.status_code == 403
    r = await client.post(url, headers={"Authorization": f"Bearer {CONTROL}"}, json={"by": "alice"})
    assert r.status_code == 200
    acked = decode(Alarm, r.content)
    assert acked.acknowledged_by == "alice" and acked.state == "firing"
    r = await client.post("/v1/alarms/nope/ack", headers={"Authorization": f"Bearer {CONTROL}"})
    assert r.status_code == 404
    r = await client.post(url, headers={"Authorization": f"Bearer {CONTROL}"}, content=b"not json")
    assert r.status_code == 400 and r.json()["error"] == 'body must be JSON, e.g. {"by": "alice"}'
    r = await client.post(url, headers={"Authorization": f"Bearer {CONTROL}"}, content='{"by": "Zoë"}'.encode("latin-1"))
    assert r.status_code == 400 and r.json()["error"].startswith("body is not UTF-8 (byte 0xeb at offset 10)")
    # The control token does not open the read API.
    r = await client.get("/v1/alarms", headers={"Authorization": f"Bearer {CONTROL}"})
    assert r.status_code == 401
    probe.send(99.0)  # publishes a frame, which carries the acknowledgement's event
    assert agent.buffer is not None
    await wait_for(lambda: any(e.kind == "alarm_acknowledged" and e.data["alarm_id"] == alarm_id
                               for f in agent.buffer.since(0) for e in f.events))


async def test_without_a_control_token_the_api_is_read_only(tmp_path: Path) -> None:
    agent, probe = make_agent(tmp_path, control=None)
    transport = httpx.ASGITransport(app=agent.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        for token in (READ, CONTROL, "anything"):
            r = await client.post("/v1/alarms/x/ack", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 403 and "read-only" in r.json()["error"]
        r = await client.get("/v1/alarms", headers={"Authorization": f"Bearer {READ}"})
        assert r.status_code == 200 and r.json()["control"] is False
    await agent.stop()


async def test_firing_and_resolved_reach_a_webhook(tmp_path: Path) -> None:
    with receiver() as rec:
        agent, probe = make_agent(tmp_path, notify=(NotifySection(kind="webhook", url=rec.url, dedup_s=0.0),))
        agent.app()
        agent.start()
        await wait_for(lambda: probe.push is not None)
        probe.send(97.0)
        await wait_for(lambda: len(rec.ok()) == 1)
        probe.send(50.0)
        await wait_for(lambda: len(rec.ok()) == 2)
        await agent.stop()
    assert [r.json()["status"] for r in rec.ok()] == ["firing", "resolved"]
    assert rec.ok()[0].json()["alarm"]["node"] == "t1"


@pytest.mark.parametrize("by", [
    "\x1b]0;pwned\x07",  # OSC 0: window title
    "\x1b]52;c;cm0gLXJmIH4=\x07",  # OSC 52: clipboard write
    "alice\x1b[2J",  # CSI: clear the screen
    "\x9b2J",  # C1 CSI
    "bob\u202eecila",  # bidi override
    "eve\u2066x\u2069",  # bidi isolate
    "mallory\nFAKE: resolved",  # a line break forging a second line
    "nul\x00",
    "del\x7f",
])
async def test_ack_by_with_control_or_bidi_characters_is_refused(
        running: tuple[Agent, Probe, httpx.AsyncClient], by: str) -> None:
    agent, probe, client = running
    probe.send(99.0)
    await wait_for(lambda: agent.alarms.engine.active())
    alarm_id = agent.alarms.engine.active()[0].id
    r = await client.post(f"/v1/alarms/{alarm_id}/ack", headers={"Authorization": f"Bearer {CONTROL}"},
                          json={"by": by})
    assert r.status_code == 400
    assert "control or bidi" in r.json()["error"] and "U+" in r.json()["error"]
    assert agent.alarms.engine.active()[0].acknowledged_by is None
    # Any other text is a name.
    r = await client.post(f"/v1/alarms/{alarm_id}/ack", headers={"Authorization": f"Bearer {CONTROL}"},
                          json={"by": "Zoë [/] 👩‍🔧"})
    assert r.status_code == 200 and decode(Alarm, r.content).acknowledged_by == "Zoë [/] 👩‍🔧"
