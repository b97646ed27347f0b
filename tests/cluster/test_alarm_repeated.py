"""An event alarm that counts a further event (a second Xid 79, another unclean shutdown) moves its message and
count on with an ``alarm_repeated`` event: a replay's alarms (built from events alone), a live dashboard's list
between two fetches and REPORT.md follow it, as the agent's own /v1/alarms does; its state stays."""

from __future__ import annotations

import random
from pathlib import Path

from msgspec.structs import replace

from rigmon.agent.alarming import AlarmService
from rigmon.alarms.engine import AlarmEngine
from rigmon.cluster.alarm_board import AlarmTracker
from rigmon.cluster.alarm_events import with_alarm_events
from rigmon.cluster.replay import Replay
from rigmon.cluster.store import ClusterStore
from rigmon.schema import SCHEMA_VERSION, Alarm, AlarmList, Event, EventValue, History, Severity
from rigmon.snapshot.bundle import NodePart, frames_gzip, write_bundle
from rigmon.snapshot.report import render_report, window_alarms
from tests.alarms.helpers import T0, FakeClock, default
from tests.tui.snapshot_apps.fake_agent import make_frame


def xid(at_s: float) -> Event:
    """An Xid 79 on GPU 1 as the agent reports it from NVML's event set."""
    return Event(id=f"xid-{at_s}", at=T0 + at_s, kind="xid", severity="critical", subject="gpu:1",
                 message="Xid 79 on GPU 1: GPU has fallen off the bus",
                 data={"source": "nvml", "xid": 79, "gpu_index": 1, "pci_bus_id": "0000:3b:00.0"})


def agent_events(xids_at_s: list[float]) -> tuple[AlarmEngine, list[Event]]:
    """The ``alarm_*`` events a real agent's alarm service emits for Xids at ``xids_at_s``, and its engine."""
    clock = FakeClock(T0)
    engine = AlarmEngine(default("gpu_xid_fatal"), "n1", clock, id_prefix="r")
    events: list[Event] = []

    def emit(kind: str, severity: Severity, subject: str, text: str, data: dict[str, EventValue] | None) -> Event:
        event = Event(id=f"e{len(events)}", at=clock.t, kind=kind, severity=severity, subject=subject,
                      message=text, data=data or {})
        events.append(event)
        return event

    service = AlarmService(engine, emit)
    for at_s in xids_at_s:
        clock.t = T0 + at_s
        service._publish(engine.evaluate_data({}, [xid(at_s)], clock.t))
    return engine, events


def test_a_replay_follows_every_repeat_of_an_event_alarm() -> None:
    engine, events = agent_events([0.0, 60.0, 120.0])
    assert [e.kind for e in events] == ["alarm_firing", "alarm_repeated", "alarm_repeated"]
    (agent_alarm,) = engine.alarm_list().active
    assert agent_alarm.count == 3 and "(3 events since" in agent_alarm.message
    tracker = AlarmTracker("n1")
    for e in events:
        tracker.apply(e)
    (alarm,) = tracker.alarm_list().active
    assert (alarm.state, alarm.message, alarm.count, alarm.fired_at) == (
        "firing", agent_alarm.message, 3, T0)


def test_a_replay_that_begins_after_the_firing_shows_the_alarm_firing_from_its_repeat() -> None:
    _, events = agent_events([0.0, 60.0, 120.0])
    tracker = AlarmTracker("n1")
    for e in events[1:]:
        tracker.apply(e)
    (alarm,) = tracker.alarm_list().active
    assert (alarm.state, alarm.count, alarm.rule) == ("firing", 3, "gpu_xid_fatal")
    assert alarm.message.endswith("UTC)") and "(3 events since" in alarm.message


def test_a_live_list_follows_a_repeat_before_the_next_fetch_and_an_old_one_never_undoes_it() -> None:
    engine, _ = agent_events([0.0])
    fetched = engine.alarm_list()
    later_engine, later = agent_events([0.0, 60.0, 120.0])
    moved = with_alarm_events(AlarmList(node="n1", active=fetched.active, recent=()), later[1:])
    (alarm,) = moved.active
    assert (alarm.state, alarm.count, alarm.message) == ("firing", 3, later_engine.alarm_list().active[0].message)
    # A fetch that already counted them, with the same events applied again, keeps its count.
    assert with_alarm_events(moved, later[1:2]) is moved


def test_the_report_gives_each_alarm_of_the_window_its_latest_message_and_count() -> None:
    _, events = agent_events([0.0, 60.0, 120.0])
    (episode,) = window_alarms(events)
    assert episode.count == 3 and "(3 events since" in episode.message
    # A window that begins after the firing still lists the alarm its repeats kept firing.
    (episode,) = window_alarms(events[2:])
    assert (episode.fired_at, episode.ended_at, episode.count) == (None, None, 3)
    part = NodePart(node="n1", source="http://n1:9871", from_at=T0, to_at=T0 + 200,
                    history=History(schema=SCHEMA_VERSION, node="n1", from_at=T0, to_at=T0 + 200, tier="frames",
                                    step_s=1.0, series={}, events=tuple(events)))
    table = render_report([part], 600.0, T0 + 300).split("Alarms of the window", 1)[1].split("\n\n", 2)[1]
    (row,) = table.splitlines()[2:]
    assert row.split(" | ")[0] == "| gpu_xid_fatal" and "(3 events since 2023-11-14 22:13:20 UTC) |" in row


def active_alarms(cluster: ClusterStore) -> tuple[Alarm, ...]:
    """The active alarms of the replay's one node (its store is another after a seek back: a checkpoint's)."""
    (store,) = cluster.nodes.values()
    assert store.alarm_list is not None
    return store.alarm_list.active


def test_a_bundle_s_replay_shows_the_count_and_message_of_the_frame_under_its_cursor(tmp_path: Path) -> None:
    # A node's frames carrying the agent's alarm events, one Xid 79 a minute: played to the end, the alarms
    # screen reads "3 events"; sought back before the third, "2 events" (a checkpoint's rebuilt alarms).
    engine, events = agent_events([9.0, 69.0, 129.0])
    by_seq = {round(e.at - T0): e for e in events}
    rng = random.Random(3)
    frames = [replace(f, events=f.events + ((by_seq[f.seq],) if f.seq in by_seq else ()))
              for f in (make_frame("n1", "n1-run", seq, rng, start_at=T0) for seq in range(1, 141))]
    part = NodePart(node="n1", source="http://n1:9871", from_at=frames[0].taken_at, to_at=frames[-1].taken_at,
                    latest=frames[-1], frames_gz=frames_gzip(frames), frame_count=len(frames))
    replay = Replay.open(write_bundle(tmp_path / "b.tar.gz", [part], 600.0, "", created_at=T0 + 150))
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    replay.seek(cluster, replay.end_at)
    (alarm,) = active_alarms(cluster)
    assert (alarm.state, alarm.count, alarm.message) == ("firing", 3, engine.alarm_list().active[0].message)
    replay.seek(cluster, T0 + 100)
    (alarm,) = active_alarms(cluster)
    assert (alarm.state, alarm.count) == ("firing", 2) and "(2 events since" in alarm.message


def test_a_live_list_lists_an_alarm_it_learns_of_from_a_repeat_before_the_next_fetch() -> None:
    # The list fetched before the alarm fired (or its firing event lost before this dashboard saw it):
    # the repeat alone lists it at once, firing since its first event, not only at the fetch up to 30 s on.
    engine, events = agent_events([0.0, 60.0, 120.0])
    (agent_alarm,) = engine.alarm_list().active
    moved = with_alarm_events(AlarmList(node="n1", active=(), recent=()), events[1:2])
    (alarm,) = moved.active
    assert (alarm.id, alarm.rule, alarm.severity, alarm.state, alarm.subject, alarm.count) == (
        agent_alarm.id, "gpu_xid_fatal", "critical", "firing", "gpu:1", 2)
    assert "(2 events since" in alarm.message and (alarm.started_at, alarm.fired_at) == (T0, T0)
    # The next repeat moves it on; the fetch that follows holds it as the agent does.
    moved = with_alarm_events(moved, events[2:])
    (alarm,) = moved.active
    assert (alarm.count, alarm.message, alarm.started_at) == (3, agent_alarm.message, agent_alarm.started_at)
    # A repeat of an alarm the list shows resolved does not bring it back.
    ended = replace(agent_alarm, state="resolved", resolved_at=T0 + 130)
    assert with_alarm_events(AlarmList(node="n1", active=(), recent=(ended,)), events[1:]).active == ()


def test_a_replay_that_begins_after_the_firing_dates_the_alarm_from_its_first_event() -> None:
    _, events = agent_events([0.0, 60.0, 120.0])
    tracker = AlarmTracker("n1")
    tracker.apply(events[2])
    (alarm,) = tracker.alarm_list().active
    assert (alarm.started_at, alarm.fired_at, alarm.rule_kind, alarm.count) == (T0, T0, "replay", 3)
