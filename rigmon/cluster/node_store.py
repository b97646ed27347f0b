"""NodeStore: everything the dashboard knows about one node (latest frame, history, events, alarms) and its state."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import msgspec

from rigmon.alarms import cluster as cluster_rules
from rigmon.clock import Clock
from rigmon.cluster.alarm_events import (
    ALARM_EVENT_KINDS,
    with_alarm_events,
    with_endings,
)
from rigmon.cluster.alarm_restarts import RestartedAlarms
from rigmon.cluster.chart import frame_values
from rigmon.cluster.history import HISTORY_POINTS, SERIES, NodeHistory
from rigmon.cluster.incident import RailMemory, problems
from rigmon.cluster.kept_events import EVENTS_KEPT, KeptEvents
from rigmon.cluster.node_view import NodeState, NodeView, node_state
from rigmon.cluster.temperature_charts import held_temperatures, temperature_values
from rigmon.schema import Alarm, AlarmList, Event, Frame, Gap, Info
from rigmon.summary import (
    NodeSummary,
    SummaryRecord,
    WorstWindow,
    alarm_count,
    arrays_unknown,
    detail_values,
    storage_figures,
    summarize,
    worst_severity,
)

#: A node whose last frame arrived longer ago than this is stale (at least three intervals).
STALE_AFTER_S = 3.0


def power_limit_w(frame: Frame | None) -> float | None:
    """Power limits of ``frame``'s working NVIDIA GPUs added up; ``None`` when none has one."""
    if frame is None:
        return None
    limits = [g.power_limit_w for g in frame.readings.gpus if g.state != "lost" and g.power_limit_w is not None]
    return sum(limits) if limits else None


class NodeStore:
    """Everything the dashboard knows about one node.

    Single-threaded: fed from the UI's event loop by the client's updates.

    Args:
        key: the node's identity on the dashboard (its URL).
        url: agent base URL.
        clock: time source; only ``monotonic`` is used (arrival times and ages).
        stale_after_s: minimum age of the last frame that makes the node stale; raised to
            three of the agent's intervals once its /v1/info is known.
        capacity: history points kept.
        generation: how many times the node's store was started afresh before this one (another agent
            answering at its URL, `rigmon.cluster.store.ClusterStore.start_afresh`): an answer asked for
            under an older generation is the other agent's, not this store's.
    """

    def __init__(self, key: str, url: str, clock: Clock, stale_after_s: float = STALE_AFTER_S,
                 capacity: int = HISTORY_POINTS, generation: int = 0) -> None:
        self.key = key
        self.url = url
        self.generation = generation
        self.clock = clock
        self._stale_min_s = stale_after_s
        self.stale_after_s = stale_after_s
        self.info: Info | None = None
        self.latest: Frame | None = None
        # Whether ``latest`` is a whole frame, not a summary record's (`rigmon.summary.slim_frame`).
        self.latest_whole = False
        self.summary: NodeSummary | None = None
        self.history = NodeHistory(capacity)
        self.worst = WorstWindow()
        self.rail = RailMemory()
        #: The node's newest events, oldest first; its job's marks kept apart (`KeptEvents`), so that
        #: a job marking every checkpoint does not push its hardware trouble out.
        self.events = KeptEvents()
        self.received_at: float | None = None
        self.received_wall_at: float | None = None
        #: In a replay, until when the bundle knows of the node (the store's clock): its pull, or, for a
        #: node the bundle does not date, its last frame. Nothing after it is known, so its age stops
        #: growing there. ``None`` live, and for a node with neither a pull time nor a frame.
        self.watched_until: float | None = None
        self.alarm_list: AlarmList | None = None
        #: When ``alarm_list`` was last the node's own word (the dashboard's clock, Unix s): its last
        #: /v1/alarms answer, or a later frame whose alarm events changed it.
        self.alarms_at: float | None = None
        self.alarm_error: str | None = None
        # Alarm transitions the frames brought since the last /v1/alarms answer was filed: an
        # answer sent before them (a poll crossing the frame) must not take them back.
        self._alarm_events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        # The old run's alarms that a new run did not take over (see `RestartedAlarms`).
        self._restarted = RestartedAlarms()
        self.error: str | None = None
        self.error_at: float | None = None
        self.restarts = 0
        self.frames_lost = 0
        self.gaps: list[Gap] = []
        # Most GPUs and links this node has shown in this dashboard session: a GPU or a
        # link that vanished from the frames is still expected.
        self.gpus_seen = 0
        self.links_seen = 0
        #: md arrays of the latest frame whose state is not known now (`rigmon.summary.arrays_unknown`).
        self.arrays_unknown = 0
        #: The newest temperature and limits of every drive and sensor a frame of the node showed
        #: (`rigmon.cluster.temperature_charts.temperature_values`): the temperature charts its history
        #: offers when its latest frame is a summary record's, which has only the hot sensors (`chart_values`).
        self.temperature_facts: dict[str, float] = {}
        # Bumped by every change a view shows; `view` reuses its last answer while it and the
        # view's other inputs stay the same (the screens redraw only rows whose view changed).
        self._changes = 0
        self._view_cache: tuple[tuple[object, ...], NodeView] | None = None

    @property
    def name(self) -> str:
        """Node name as the agent reports it, else the URL without its scheme."""
        if self.latest is not None:
            return self.latest.node
        if self.info is not None:
            return self.info.node
        return self.url.split("://", 1)[-1].rstrip("/")

    def connected(self, info: Info) -> None:
        """The agent answered /v1/info."""
        self.info = info
        self.stale_after_s = max(self._stale_min_s, 3 * info.interval_s)
        self.error = None
        self.error_at = None
        self._changes += 1

    def add_frames(self, frames: Iterable[Frame]) -> int:
        """File frames in arrival order; returns how many were new.

        A frame of another agent run than the last one counts as a restart; a frame not
        newer than the last one of the same run is a duplicate and ignored.
        """
        added = 0
        for frame in frames:
            last = self.latest
            if last is not None and frame.run_id == last.run_id and frame.seq == last.seq and not self.latest_whole:
                # The newest frame again, whole, after its summary record (the node screen opened).
                self.latest = frame
                self.latest_whole = True
                self._changes += 1
                continue
            added += self._file(frame, summarize(frame), detail_values(frame.readings), whole=True)
        return self._arrived(added)

    def add_summaries(self, records: Iterable[SummaryRecord]) -> int:
        """File summary records (``/v1/stream?view=summary``) like `add_frames` files frames:
        their summary and per-device values go into the history, their events into the
        events; ``latest`` becomes the record's slim frame. Returns how many were new."""
        added = 0
        for record in records:
            added += self._file(record.frame, record.summary, record.details, whole=False)
        return self._arrived(added)

    def _file(self, frame: Frame, summary: NodeSummary, details: dict[str, float | None], whole: bool) -> int:
        """File one frame (whole or slim) with its summary; 0 for a duplicate."""
        last = self.latest
        if last is not None and frame.run_id == last.run_id and frame.seq <= last.seq:
            return 0
        if last is not None and frame.run_id != last.run_id:
            self.restarts += 1
            self._run_changed(frame)
        self.arrays_unknown = arrays_unknown(frame.readings)
        if self.arrays_unknown:
            # An agent of the round before kept an unreadable array's last health: not a degraded one now.
            summary = msgspec.structs.replace(summary, arrays_degraded=storage_figures(frame.readings).arrays_degraded)
        summary = self.worst.add(self._with_session_inventory(summary))
        self.latest = frame
        self.latest_whole = whole
        self.summary = summary
        temperatures = temperature_values(frame.readings)
        if temperatures:
            self.temperature_facts.update(temperatures)
        self.history.append(frame.seq, frame.taken_at, {name: getattr(summary, name) for name in SERIES}, details,
                            held_temperatures(frame.readings) if temperatures else None)
        self._file_events(frame.events)
        self.rail.add(frame.taken_at, summary.rail_min_volts, frame.events)
        return 1

    def add_events(self, events: Sequence[Event]) -> None:
        """File events that came without a frame: in a replay, those a journal recorded with the agent's
        clean stop, after its last frame (no frame follows a stop to carry them)."""
        if events:
            self._file_events(events)
            self._changes += 1

    def _file_events(self, events: Sequence[Event]) -> None:
        """Into the events; alarm transitions among them move the alarm list on."""
        self.events.extend(events)
        if events:
            alarm_events = [e for e in events if e.kind in ALARM_EVENT_KINDS]
            self._alarm_events.extend(alarm_events)
            if self.alarm_list is not None and alarm_events:
                alarms = with_alarm_events(self.alarm_list, alarm_events)
                if alarms is not self.alarm_list:
                    # The node's word on its alarms, newer than the last fetch: a dead node's
                    # alarms are "as of" here.
                    self.alarms_at = self.clock.time()
                self.alarm_list = alarms

    def _run_changed(self, frame: Frame) -> None:
        """``frame`` is the first of a new agent run: the old run's alarms that the new run did not
        take over end now, rather than going on firing until the next fetch and then vanishing
        from the screen unexplained."""
        # The old run's transitions are in the list already; applied to the new run's answer,
        # they would bring back alarms it does not know.
        self._alarm_events.clear()
        if self.alarm_list is not None:
            self.alarm_list = self._restarted.run_changed(self.alarm_list, frame, self.clock.monotonic())

    def _arrived(self, added: int) -> int:
        if added:
            self.received_at = self.clock.monotonic()
            self.received_wall_at = self.clock.time()
            self._changes += 1
        return added

    def set_alarms(self, alarms: AlarmList, at: float | None = None) -> bool:
        """The node's /v1/alarms answer (or, in a replay, the alarms rebuilt from its events) as of
        ``at`` (default: now); returns whether anything changed."""
        self.alarms_at = self.clock.time() if at is None else at
        # Forward moves only: an answer that already holds these transitions is left as it is.
        # A newer agent's ending for a reason this dashboard does not know is told from the message the
        # alarm had here (`with_endings`), so that it reads one ending, not the agent's and a neutral one.
        alarms = with_alarm_events(with_endings(alarms, self.alarm_list), self._alarm_events)
        alarms = self._restarted.with_earlier(self.alarm_list, alarms, self.clock.monotonic())
        self._alarm_events.clear()
        changed = alarms != self.alarm_list or self.alarm_error is not None
        self.alarm_list = alarms
        self.alarm_error = None
        if changed:
            self._changes += 1
        return changed

    def alarms_failed(self, reason: str) -> None:
        """The node's alarms could not be fetched; the last list known is kept."""
        self.alarm_error = reason
        self._changes += 1

    def replace_alarm(self, alarm: Alarm) -> None:
        """An alarm changed here (acknowledged from the dashboard) before the next fetch."""
        if self.alarm_list is not None:
            active = tuple(alarm if a.id == alarm.id else a for a in self.alarm_list.active)
            self.alarm_list = msgspec.structs.replace(self.alarm_list, active=active)
            self._changes += 1

    def connected_now(self) -> bool:
        """Whether the client's last attempt worked (no failure since the last answer or frame)."""
        return not (self.error_at is not None and (self.received_at is None or self.error_at >= self.received_at))

    def rule_view(self, node: str | None = None) -> cluster_rules.NodeView:
        """What the cluster rules need of this node (wall-clock times of the dashboard's clock), known
        to them by its key.

        Args:
            node: the name the cluster rules' messages call this node (default its name; see
                `ClusterStore.rule_names`).
        """
        return cluster_rules.NodeView(node=self.name if node is None else node, connected=self.connected_now(),
                                      last_received_at=self.received_wall_at,
                                      last_taken_at=self.latest.taken_at if self.latest else None,
                                      error=self.error, key=self.key)

    def chart_values(self) -> dict[str, float]:
        """The series the node's history charts are chosen from (`rigmon.cluster.chart.charts_for`): its latest
        frame's, with the temperatures of every drive and sensor an earlier frame showed (a summary record's
        slim frame leaves out the sensors not at their critical limit; the dashboard may hold their series
        from when the node screen showed the node)."""
        return {**self.temperature_facts, **frame_values(self.latest)}

    def _with_session_inventory(self, summary: NodeSummary) -> NodeSummary:
        """``summary`` with GPUs expected and links total raised to the most seen so far."""
        self.gpus_seen = max(self.gpus_seen, summary.gpus_expected or 0)
        self.links_seen = max(self.links_seen, summary.links_total or 0)
        if self.gpus_seen > (summary.gpus_expected or 0):
            summary = msgspec.structs.replace(summary, gpus_expected=self.gpus_seen, gpus_present=summary.gpus_present or 0)
        if self.links_seen > (summary.links_total or 0):
            summary = msgspec.structs.replace(summary, links_total=self.links_seen, links_healthy=summary.links_healthy or 0)
        return summary

    def add_gap(self, gap: Gap) -> None:
        """Frames the agent could no longer send (it restarted, or its buffer moved on)."""
        self.gaps.append(gap)
        del self.gaps[:-20]
        self.frames_lost += max(0, gap.to_seq - gap.from_seq + 1)
        self._changes += 1

    def failed(self, reason: str) -> None:
        """The client could not get data: connection refused, timeout, 401, bad answer..."""
        self.error = reason
        self.error_at = self.clock.monotonic()
        self._changes += 1

    def age_s(self) -> float | None:
        """Seconds since the last new frame arrived (at most until `watched_until`), ``None`` before the first."""
        if self.received_at is None:
            return None
        now = self.clock.monotonic()
        if self.watched_until is not None:
            now = min(now, self.watched_until)
        return max(0.0, now - self.received_at)

    def state(self) -> NodeState:
        """Live while frames keep arriving; unreachable while the last attempt failed and
        the data is old (refused when the agent answered 401/403 or another 4xx,
        `node_state`); stale when the
        data is old without a known failure."""
        age = self.age_s()
        fresh = age is not None and age <= self.stale_after_s
        if fresh:
            return "live"
        if not self.connected_now():
            return node_state("unreachable", self.error)
        if age is None:
            return "connecting"
        return "stale"

    def view(self, points: int | None = 120, buckets: int = 60, cluster_alarms: tuple[Alarm, ...] = (),
             details: bool = False, peers_up: frozenset[str] = frozenset(), label: str = "") -> NodeView:
        """Snapshot for drawing, with trends of the newest ``points`` frames in ``buckets``;
        with ``details`` also the per-device trends (the node screen's).

        ``cluster_alarms`` are the dashboard's active cluster alarms about this node; with the
        node's own they make the summary's alarm count (unknown while the node's own alarms
        are and no cluster alarm about it fires). ``peers_up`` are the peers of the node's silent
        paths that are live on the dashboard (`ClusterStore.peers_up`). ``label`` is how the screens
        name the node (`ClusterStore.rule_names`); ``""``: its name.

        Asked again with the same arguments, it returns the same `NodeView` object until the
        node's data changes, its state changes, or its age reaches another whole second (the
        screens show it in whole seconds; a node sending a frame a second is drawn again
        when its frame comes, not also halfway).
        """
        state = self.state()
        age = self.age_s()
        key = (self._changes, state, None if age is None else int(age), points, buckets, details, cluster_alarms,
               peers_up, label)
        if self._view_cache is not None and self._view_cache[0] == key:
            return self._view_cache[1]
        summary = self.summary
        firing_here = any(a.state == "firing" for a in cluster_alarms)
        own = self.alarm_list.active if self.alarm_list is not None else ()
        if summary is not None and self.latest is not None and (self.alarm_list is not None or firing_here):
            summary = msgspec.structs.replace(summary, alarms=alarm_count(self.latest, own + cluster_alarms),
                              alarms_severity=worst_severity(own + cluster_alarms))
        reason = self.error if self.error is not None and state != "live" else None
        # A gap in the trends where frames are missing for longer than makes the node stale.
        cuts = self.history.gaps(points, self.stale_after_s)
        view = NodeView(
            key=self.key,
            name=self.name,
            url=self.url,
            state=state,
            reason=reason,
            age_s=age,
            summary=summary,
            trends={name: self.history.trend(name, points, buckets, cuts) for name in SERIES},
            details=self.history.detail_trends(points, buckets, cuts) if details else {},
            problems=problems(self.latest, summary, own + cluster_alarms, self.rail, peers_up),
            sags=self.rail.causes() if details else {},
            restarts=self.restarts,
            frames_lost=self.frames_lost,
            trend_span_s=self.history.span_s(points),
            gpu_power_limit_w=power_limit_w(self.latest),
            label=label or self.name,
            last_data_at=self.received_wall_at,
            arrays_unknown=self.arrays_unknown,
        )
        self._view_cache = (key, view)
        return view
