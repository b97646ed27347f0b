"""A node's alarms across its agent's restarts: the old run's that the new run did not take over end, saying so."""

from __future__ import annotations

import msgspec

from rigmon.cluster.alarm_events import ended_by_restart, split_at_restart
from rigmon.schema import Alarm, AlarmList, Frame

#: Alarms of a node's earlier agent runs kept in its resolved list after its agent stopped listing them.
EARLIER_ALARMS_KEPT = 200
#: Seconds a firing alarm that an answer stopped listing waits for frames of a new agent run to end it
#: (a restarted agent's /v1/alarms may answer before its stream: the stream's back-off is 15 s at
#: most); an agent that never restarted does not drop a firing alarm, so it is simply gone after.
UNLISTED_KEPT_S = 120.0
#: ``seq`` of an agent run's first frame (its events say what alarm state the run restored).
FIRST_SEQ = 1


class RestartedAlarms:
    """What a node's store needs to remember of its alarms across agent restarts.

    A restarted agent lists only the alarms it took over from its alarm state file (none when
    the state directory was wiped or it crashed before saving): the others must not stay firing
    on the dashboard, nor vanish from it unexplained. They end at the new run's first frame
    (`run_changed`), and stay in the resolved list of every later answer (`with_earlier`).
    """

    def __init__(self) -> None:
        # Alarms of earlier runs that the agent may no longer list: the resolved ones, and those a
        # restart ended. Newest first.
        self._earlier: tuple[Alarm, ...] = ()
        # Firing alarms an answer stopped listing, by id, with when (monotonic s): the answer was
        # the new run's, come before its frames.
        self._unlisted: dict[str, tuple[float, Alarm]] = {}
        # The old run's firing alarms at a restart whose first frame was not seen, by id, with the
        # restart frame's time: the new run's next answer lists those it took over.
        self._undecided: dict[str, float] = {}

    def run_changed(self, alarms: AlarmList, frame: Frame, now: float) -> AlarmList:
        """``alarms`` (the node's list) after ``frame``, the first seen of a new agent run, at
        ``now`` (monotonic s): the old run's alarms that the new run did not take over end (see
        `split_at_restart`)."""
        unlisted = [a for at, a in self._unlisted.values() if now - at <= UNLISTED_KEPT_S]
        self._unlisted.clear()
        active = alarms.active
        # When the run's first frame, whose events say what it restored, was not seen (a dashboard
        # out of touch for longer than its backfill), the run's next answer says which of the old
        # run's firing alarms it took over (`with_earlier`).
        self._undecided = {} if frame.seq <= FIRST_SEQ else {
            a.id: frame.taken_at for a in active if a.state == "firing" and a.started_at < frame.agent_start}
        split = split_at_restart((*(a for a in active if a.id not in self._undecided), *unlisted),
                                 frame.taken_at, frame.events, frame.agent_start)
        recent = (*split.ended, *alarms.recent)
        self._earlier = recent[:EARLIER_ALARMS_KEPT]
        kept = (*(a for a in active if a.id in self._undecided), *split.kept)
        return msgspec.structs.replace(alarms, active=kept, recent=recent)

    def with_earlier(self, before: AlarmList | None, answer: AlarmList, now: float) -> AlarmList:
        """``answer`` (/v1/alarms, the list shown ``before`` it) with the alarms of earlier runs it
        does not list, resolved, at ``now`` (monotonic s).

        An agent resolves a firing alarm and lists it as resolved: a firing alarm that an answer
        no longer lists was lost with the agent's alarm state, the answer the new run's, come
        before its frames. It is held (`UNLISTED_KEPT_S`) for those frames to end it.
        """
        listed = {a.id for a in answer.active} | {a.id for a in answer.recent}
        if before is not None:
            lost: list[Alarm] = []
            for alarm in before.active:
                if alarm.state == "firing" and alarm.id not in listed:
                    ended_at = self._undecided.get(alarm.id)
                    if ended_at is not None:
                        lost.append(ended_by_restart(alarm, ended_at))
                    else:
                        self._unlisted.setdefault(alarm.id, (now, alarm))
            self._earlier = (*lost, *self._earlier)[:EARLIER_ALARMS_KEPT]
        self._undecided = {}
        self._unlisted = {k: v for k, v in self._unlisted.items()
                          if k not in listed and now - v[0] <= UNLISTED_KEPT_S}
        extra = [a for a in self._earlier if a.id not in listed]
        if not extra:
            return answer
        recent = sorted((*answer.recent, *extra), key=lambda a: -(a.resolved_at or a.updated_at))
        return msgspec.structs.replace(answer, recent=tuple(recent))
