"""Alarm state across agent restarts: a real agent builds a trend, sees a link's first speed and
acknowledges an alarm; a new agent on the same state directory carries on from there. The
state file itself: atomic writes, and corrupt, foreign or other-version files set aside."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.alarm_state import (
    STATE_FILE_NAME,
    STATE_FORMAT,
    STATE_VERSION,
    AlarmStateFile,
    AlarmStateKeeper,
    StateFileError,
    decode_state_file,
    read_state_file,
    state_file_path,
    write_state_file,
)
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.memory import EngineMemory, FirstSeen
from rigmon.alarms.rules import parse_rules
from rigmon.config import AgentConfig, AgentSection, AlarmsSection, CollectorSection
from rigmon.schema import AlarmList, Event, EventValue, Frame, Severity, TemperatureReading, decode
from tests.agent.test_alarms import CONTROL, READ, Probe, wait_for
from tests.alarms.helpers import T0, FakeClock

RULES = parse_rules("""
[[rule]]
name = "hot"
kind = "threshold"
select = "temperatures[sensor=probe].temp_c"
above = 90.0
hysteresis = 5.0
subject = "probe"
message = "probe at {value} C"

[[rule]]
name = "lug_warming"
kind = "trend"
select = "temperatures[sensor=lug].temp_c"
max_rise_per_day = 10.0
bucket_s = 60.0
window_s = 3600.0
min_span_s = 600.0
subject = "lug"

# A stand-in for a link speed: any number works for below_first_seen.
[[rule]]
name = "link_slower"
kind = "state"
select = "temperatures[sensor=link].temp_c"
below_first_seen = true
subject = "link"
message = "link at {value}, first seen at {first_seen}"
""", "test")


def make_agent(state_dir: Path, clock: FakeClock) -> tuple[Agent, Probe]:
    probe = Probe()
    config = AgentConfig(agent=AgentSection(node="t1", root=str(state_dir), interval_s=30.0,
                                            state_dir=str(state_dir)))
    return Agent(config, token=READ, collectors={"probe": probe}, control_token=CONTROL, rules=RULES,
                 clock=clock), probe


def send(collector: Probe, **temps: float) -> None:
    assert collector.push is not None
    collector.push([TemperatureReading(sensor=name, label=name, temp_c=t) for name, t in temps.items()])


def events(agent: Agent) -> list[Event]:
    assert agent.buffer is not None
    return [e for f in agent.buffer.since(0) for e in f.events]


async def settle(agent: Agent, clock: FakeClock, t: float, collector: Probe, **temps: float) -> Frame:
    """Push readings at ``T0 + t`` and wait until the agent has evaluated them."""
    assert agent.buffer is not None
    clock.t = T0 + t
    seq = agent.buffer.latest.seq if agent.buffer.latest else 0
    send(collector, **temps)
    await wait_for(lambda: agent.buffer is not None and agent.buffer.latest is not None
                   and agent.buffer.latest.seq > seq and agent.buffer.latest.taken_at == T0 + t)
    assert agent.buffer.latest is not None
    return agent.buffer.latest


async def test_trend_first_seen_and_acknowledgement_survive_a_restart(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    first, probe = make_agent(tmp_path, clock)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=first.app()), base_url="http://agent",
                                 headers={"Authorization": f"Bearer {READ}"}) as client:
        first.start()
        await wait_for(lambda: probe.push is not None)
        # Eight minutes of a lug warming by 1 C a minute: less than min_span_s, no verdict yet.
        for minute in range(8):
            await settle(first, clock, minute * 60.0, probe, lug=40.0 + minute, link=40.0, probe=95.0)
        (hot,) = first.alarms.engine.active()
        assert hot.rule == "hot" and hot.state == "firing"
        r = await client.post(f"/v1/alarms/{hot.id}/ack", headers={"Authorization": f"Bearer {CONTROL}"},
                              json={"by": "alice"})
        assert r.status_code == 200
        await first.stop()
    saved = json.loads((tmp_path / STATE_FILE_NAME).read_bytes())
    assert (saved["format"], saved["version"], saved["node"]) == (STATE_FORMAT, STATE_VERSION, "t1")
    assert (tmp_path / "journal.sqlite3").exists()  # a file of its own, next to the journal

    # A kernel update later: a new agent run on the same state directory.
    clock.t = T0 + 480.0
    second, probe = make_agent(tmp_path, clock)
    assert second.run_id != first.run_id
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=second.app()), base_url="http://agent",
                                 headers={"Authorization": f"Bearer {READ}"}) as client:
        second.start()
        await wait_for(lambda: probe.push is not None and any(e.kind == "alarm_state_restored"
                                                              for e in events(second)))
        restored = next(e for e in events(second) if e.kind == "alarm_state_restored")
        assert (restored.data["trend_series"], restored.data["first_seen"], restored.data["alarms"]) == (1, 1, 1)
        # Carried over, the alarm goes on firing (listed, not re-announced) until fresh readings decide.
        assert second.alarms.engine.active() == ()
        (carried,) = decode(AlarmList, (await client.get("/v1/alarms")).content).active
        assert (carried.id, carried.state, carried.acknowledged_by) == (hot.id, "firing", "alice")
        for minute in range(8, 12):
            await settle(second, clock, minute * 60.0, probe, lug=40.0 + minute, link=10.0, probe=94.0)
        body = decode(AlarmList, (await client.get("/v1/alarms")).content)
        by_rule = {a.rule: a for a in body.active}
        assert set(by_rule) == {"hot", "lug_warming", "link_slower"}
        # The same episode, still acknowledged; announced as firing again, marked restored.
        assert (by_rule["hot"].id, by_rule["hot"].acknowledged_by, by_rule["hot"].started_at) == (hot.id, "alice", T0)
        again = [e for e in events(second) if e.kind == "alarm_firing" and e.data["alarm_id"] == hot.id]
        assert len(again) == 1 and again[0].data["restored"] is True
        # Twelve minutes of trend across both runs; the link compared with its speed before the restart.
        assert isinstance(by_rule["lug_warming"].value, float) and by_rule["lug_warming"].value > 1000
        assert by_rule["link_slower"].message == "link at 10.0, first seen at 40"
        await second.stop()


MEMBER_RULES = parse_rules("""
[[rule]]
name = "member_failed"
kind = "state"
select = "temperatures[*].temp_c"
equals = -1.0
subject = "disk:{sensor}"
message = "member {sensor} failed"
""", "test")


def make_member_agent(state_dir: Path, clock: FakeClock) -> tuple[Agent, Probe]:
    probe = Probe()
    config = AgentConfig(agent=AgentSection(node="t1", root=str(state_dir), interval_s=30.0,
                                            state_dir=str(state_dir)))
    return Agent(config, token=READ, collectors={"probe": probe}, rules=MEMBER_RULES, clock=clock), probe


async def test_a_restored_alarm_whose_subject_is_gone_resolves_instead_of_vanishing(tmp_path: Path) -> None:
    # The md-degraded report: a member fails, the agent is killed (-9), the failed member is
    # removed from the array (a replacement added) before the agent is back. The restored
    # alarm's subject is no longer reported: it must stay listed, then resolve with an event
    # and a recent entry saying why, as a live alarm does after absent_resolve_s (60 s).
    clock = FakeClock(T0)
    first, probe = make_member_agent(tmp_path, clock)
    first.app()
    first.start()
    await wait_for(lambda: probe.push is not None)
    path = tmp_path / STATE_FILE_NAME
    await settle(first, clock, 1.0, probe, nvme0n1=40.0, nvme1n1=-1.0)
    (failed,) = first.alarms.engine.active()
    assert (failed.subject, failed.state) == ("disk:nvme1n1", "firing")
    await wait_for(lambda: path.exists() and read_state_file(path) is not None
                   and len(read_state_file(path).engine.alarms) == 1)  # type: ignore[union-attr]
    crashed = path.read_bytes()  # what kill -9 leaves: no save at a clean stop
    await first.stop()
    path.write_bytes(crashed)

    clock.t = T0 + 30.0
    second, probe = make_member_agent(tmp_path, clock)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=second.app()), base_url="http://agent",
                                 headers={"Authorization": f"Bearer {READ}"}) as client:
        second.start()
        await wait_for(lambda: probe.push is not None and any(e.kind == "alarm_state_restored"
                                                              for e in events(second)))
        restored = next(e for e in events(second) if e.kind == "alarm_state_restored")
        assert restored.data["alarms"] == 1
        # The agent's first frame (at its start, T0 + 30) already lacks nvme1n1.
        for t in (31.0, 60.0, 89.0):
            await settle(second, clock, t, probe, nvme0n1=40.0, nvme2n1=40.0)
            body = decode(AlarmList, (await client.get("/v1/alarms")).content)
            assert [a.id for a in body.active] == [failed.id]  # still listed while undecided
        await settle(second, clock, 90.0, probe, nvme0n1=40.0, nvme2n1=40.0)  # 60 s unreported
        await settle(second, clock, 91.0, probe, nvme0n1=40.0, nvme2n1=40.0)  # its event is in the next frame
        body = decode(AlarmList, (await client.get("/v1/alarms")).content)
        assert body.active == ()
        (ended,) = body.recent
        assert (ended.id, ended.state) == (failed.id, "resolved")
        assert ended.message == "member nvme1n1 failed (not reported since the agent restarted)"
        (resolved,) = [e for e in events(second) if e.kind == "alarm_resolved"]
        assert resolved.data["alarm_id"] == failed.id and resolved.data["restored"] is True
        await second.stop()
    assert read_state_file(path).engine.alarms == ()  # type: ignore[union-attr]


async def test_an_alarm_is_saved_when_it_fires_not_a_save_interval_later(tmp_path: Path) -> None:
    # A rail sag's alarms come seconds before the power cut they warn of: the file must hold them
    # before the next periodic save (60 s by default) for the restart to find them.
    clock = FakeClock(T0)
    agent, probe = make_agent(tmp_path, clock)
    assert agent.config.alarms.save_interval_s == 60.0
    agent.app()
    agent.start()
    await wait_for(lambda: probe.push is not None)
    path = tmp_path / STATE_FILE_NAME

    def saved_rules() -> set[str]:
        state = read_state_file(path) if path.exists() else None
        return set() if state is None else {c.alarm.rule for c in state.engine.alarms}

    await settle(agent, clock, 1.0, probe, probe=95.0)
    (hot,) = agent.alarms.engine.active()
    assert hot.state == "firing"
    keeper = agent.alarm_state
    assert keeper is not None
    # `saves` counts a write once its rename is done: wait for the count too, not only the file.
    await wait_for(lambda: "hot" in saved_rules() and keeper.saves >= 1)  # no clean stop: what a crash leaves
    saves = keeper.saves
    await settle(agent, clock, 2.0, probe, probe=80.0)  # resolved: saved too
    await wait_for(lambda: "hot" not in saved_rules() and keeper.saves > saves)
    assert keeper.saves == saves + 1
    await agent.stop()


async def test_a_corrupt_state_file_is_set_aside_and_reported(tmp_path: Path) -> None:
    path = tmp_path / STATE_FILE_NAME
    path.write_bytes(b'{"format": "rigmon-alarm-state", "version": 1, "node": "t1", "engi')
    clock = FakeClock(T0)
    agent, probe = make_agent(tmp_path, clock)
    agent.app()
    agent.start()
    await wait_for(lambda: any(e.kind == "alarm_state_ignored" for e in events(agent)))
    (ignored,) = [e for e in events(agent) if e.kind == "alarm_state_ignored"]
    assert ignored.severity == "warning" and "not JSON" in ignored.message
    assert (tmp_path / (STATE_FILE_NAME + ".bad")).read_bytes().endswith(b'"engi')
    await settle(agent, clock, 1.0, probe, link=40.0)
    await agent.stop()
    state = read_state_file(path)  # a good file again, written at the clean stop
    assert state is not None and state.engine.first_seen == (
        FirstSeen(rule="link_slower", subject="temperatures[sensor=link]", value=40.0),)


def test_collector_intervals_reach_the_staleness_rule(tmp_path: Path) -> None:
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path), interval_s=2.0),
                         collectors={"probe": CollectorSection(interval_s=300.0)})
    agent = Agent(config, collectors={"probe": Probe(), "other": Probe()})
    assert agent.alarms.engine.intervals == {"probe": 300.0, "other": 2.0}


def test_no_state_dir_or_persist_off_means_no_file(tmp_path: Path) -> None:
    assert make_agent(tmp_path, FakeClock())[0].alarm_state is not None
    no_dir = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path)))
    assert Agent(no_dir, collectors={"probe": Probe()}).alarm_state is None
    off = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path), state_dir=str(tmp_path)),
                      alarms=AlarmsSection(persist=False))
    assert Agent(off, collectors={"probe": Probe()}).alarm_state is None


# --- the file ------------------------------------------------------------------------------


def state(node: str = "t1", memory: EngineMemory | None = None) -> AlarmStateFile:
    return AlarmStateFile(format=STATE_FORMAT, version=STATE_VERSION, node=node, run_id="r1", saved_at=T0,
                          engine=memory or EngineMemory(first_seen=(FirstSeen("slow", "link:eth0", 40000.0),)))


def test_write_and_read_back_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = state_file_path(tmp_path / "new-dir")
    path.parent.mkdir()
    write_state_file(path, state())
    write_state_file(path, state(memory=EngineMemory()))  # replaces
    assert read_state_file(path) == state(memory=EngineMemory())
    assert sorted(p.name for p in path.parent.iterdir()) == [STATE_FILE_NAME]
    assert path.stat().st_mode & 0o077 == 0
    assert read_state_file(tmp_path / "missing.json") is None


def test_a_save_never_makes_the_directories_above_the_state_directory(tmp_path: Path) -> None:
    # Before: a save after the agent's state directory and its parent were removed (the agent stopped
    # under them, a test's temporary directory) made them all again.
    path = state_file_path(tmp_path / "gone" / "state")
    with pytest.raises(FileNotFoundError):
        write_state_file(path, state())
    assert not (tmp_path / "gone").exists()


def test_a_save_does_not_make_a_state_directory_removed_while_the_agent_ran(tmp_path: Path) -> None:
    # Before: it made the state directory itself again (README: never made again once removed).
    path = state_file_path(tmp_path / "state")
    path.parent.mkdir()
    write_state_file(path, state())
    shutil.rmtree(path.parent)
    with pytest.raises(FileNotFoundError):
        write_state_file(path, state())
    assert not path.parent.exists()


def test_non_finite_numbers_are_refused_not_written(tmp_path: Path) -> None:
    path = state_file_path(tmp_path)
    write_state_file(path, state())
    bad = state(memory=EngineMemory(first_seen=(FirstSeen("slow", "link:eth0", float("nan")),)))
    with pytest.raises(ValueError):
        write_state_file(path, bad)
    assert read_state_file(path) == state()  # the old file stands


@pytest.mark.parametrize(("raw", "reason"), [
    (b"", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[]", "not a rigmon-alarm-state file"),
    (b'{"format": "something-else", "version": 1}', "not a rigmon-alarm-state file"),
    (b'{"format": "rigmon-alarm-state", "version": 2}', "format version 2, this agent reads version 1"),
    ((b'{"format": "rigmon-alarm-state", "version": 1, "node": "t1", "run_id": "r", "saved_at": 1.0, '
      b'"engine": {"first_seen": [{"rule": "slow", "subject": "x", "value": "fast"}]}}'), "engine.first_seen[0].value"),
])
def test_unusable_files_are_named_errors(raw: bytes, reason: str) -> None:
    with pytest.raises(StateFileError, match=re.escape(reason)):
        decode_state_file(raw)


class Emitted:
    def __init__(self) -> None:
        self.events: list[tuple[str, Severity, str]] = []

    def __call__(self, kind: str, severity: Severity, subject: str, message: str,
                 data: dict[str, EventValue] | None) -> Event:
        self.events.append((kind, severity, message))
        return Event(id="e", at=T0, kind=kind, severity=severity, subject=subject, message=message)


def keeper(path: Path, emit: Emitted) -> AlarmStateKeeper:
    engine = AlarmEngine(RULES, "t1", FakeClock(T0), id_prefix="r2")
    return AlarmStateKeeper(path, engine, {}, "t1", "r2", FakeClock(T0), emit)


@pytest.mark.parametrize(("content", "reason"), [
    (b"garbage", "not JSON"),
    (None, "written by node 'elsewhere', this is 't1'"),
])
def test_the_keeper_sets_aside_what_it_cannot_use(tmp_path: Path, content: bytes | None, reason: str) -> None:
    path = state_file_path(tmp_path)
    if content is None:
        write_state_file(path, state(node="elsewhere"))
    else:
        path.write_bytes(content)
    emit = Emitted()
    assert keeper(path, emit).restore() is None
    ((kind, severity, message),) = emit.events
    assert (kind, severity) == ("alarm_state_ignored", "warning") and reason in message
    assert not path.exists() and (tmp_path / (STATE_FILE_NAME + ".bad")).exists()


def test_a_failing_save_is_reported_once_until_it_works_again(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    emit = Emitted()
    k = keeper(blocker / STATE_FILE_NAME, emit)
    assert not k.save(k.snapshot()) and not k.save(k.snapshot())
    assert [e[0] for e in emit.events] == ["alarm_state_save_failed"]
    blocker.unlink()
    blocker.mkdir()  # the operator puts the state directory back (a save does not make it)
    assert k.save(k.snapshot()) and k.saves == 1


RAIL_RULE = '[[rule]]\nname = "rail"\nkind = "threshold"\nselect = "psu_rail.volts.min_volts"\nbelow = 11.7\n' \
            'subject = "psu"\nmessage = "rail {value:.2f} V"\n'


def test_how_an_alarm_ended_is_kept_and_an_older_file_without_it_loads(tmp_path: Path) -> None:
    engine = AlarmEngine(parse_rules(RAIL_RULE, "test"), "t1", FakeClock(T0))
    engine.evaluate_data({"psu_rail": {"volts": {"min_volts": 11.3}}}, [], T0)
    engine.evaluate_data({"psu_rail": {"volts": {"min_volts": 12.0}}}, [], T0 + 1)
    path = state_file_path(tmp_path)
    write_state_file(path, state(memory=engine.export_memory()))
    loaded = read_state_file(path)
    assert loaded is not None and [a.resolve_reason for a in loaded.engine.recent] == ["cleared"]
    # A file written before alarms said how they ended: its alarms load, with no reason.
    data = json.loads(path.read_bytes())
    del data["engine"]["recent"][0]["resolve_reason"]
    (old,) = decode_state_file(json.dumps(data).encode()).engine.recent
    assert old.resolve_reason is None and old.message == "rail 11.30 V"

