"""Replay of a snapshot bundle: its frames fed into the dashboard's node stores on a clock of their own.

`Replay` owns a `ReplayClock` whose time is the replay cursor (the nodes' Unix time: the median
node's, see `rigmon.cluster.replay_clocks`). Each frame is filed into its node's `NodeStore` with
the clock standing at the frame's ``taken_at`` mapped through its node's clock offset (none when the
bundle does not record it), so arrival times, ages and states (live, stale) are those of the
recording, a node whose clock ran ahead plays in step with the others, and the screens draw a
replay exactly as they draw live data. Seeking forward feeds the frames up to the new cursor;
seeking backwards starts the stores over from the nearest checkpoint before the new cursor (as
many are kept as `rigmon.cluster.replay_checkpoints` allows), or from the start.

A bundle is as untrusted as the agents it was pulled from (or whoever handed it over): its
node names, frames, events and sources are cleaned of terminal control characters
(`rigmon.cluster.sanitise`) once, when the replay is built.
"""

from __future__ import annotations

import bisect
import copy
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rigmon.cluster.alarm_board import AlarmTracker
from rigmon.cluster.recording_end import stopped_cleanly
from rigmon.cluster.replay_checkpoints import checkpoint_spacing, node_copy_bytes
from rigmon.cluster.replay_clocks import NodeClock, node_clocks, unknown_clocks
from rigmon.cluster.sanitise import clean_record, clean_text
from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Event, Frame

if TYPE_CHECKING:
    # Types only at import: the bundle code (journal, gzip) is loaded when a bundle is opened, so
    # the dashboard's first screen does not wait for it (`ReplayPosition` is drawn on every screen).
    from rigmon.snapshot.bundle import Bundle, NodeBundle

#: Replay speeds the speed keys step through (recorded seconds per real second).
SPEEDS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
#: What a replay of a bundle that does not date its nodes' pulls (an older rigmon's, or made from
#: journals) cannot judge, for the alarms screen. The clock-skew rule compares a frame's
#: ``taken_at`` (the node's clock) with when the dashboard got it; such a bundle holds only the
#: former, and the replay files each frame at its own ``taken_at``, so every offset reads 0.
#: Nor can it tell a node whose frames end before the others' because its sampler stalled from one
#: whose clock runs behind theirs (or the others' ahead): a node is judged stale by its own frames
#: (a gap between two of them), not after its last one.
NOT_JUDGED: tuple[str, ...] = ("clock skew is not judged in a replay (the bundle holds no arrival times)",
                               "nor staleness after a node's last frame")


def clock_notes(nodes: list[NodeBundle], clocks: list[NodeClock]) -> tuple[str, ...]:
    """What the alarms screen says a replay does not judge: `NOT_JUDGED` when the bundle dates no
    node's pull, else the recorded nodes whose pull it does not date (nothing when there are none)."""
    if all(c.watched_until is None for c in clocks):
        return NOT_JUDGED
    unknown = unknown_clocks(nodes, clocks)
    return ((f"clock skew and staleness after the last frame are not judged for {', '.join(unknown)} "
             "(the bundle does not date their pull)"),) if unknown else ()


class ReplayClock:
    """A clock that stands where the replay cursor is: both ``time`` and ``monotonic`` are
    the recording's Unix seconds."""

    def __init__(self, at: float) -> None:
        self.at = at

    def time(self) -> float:
        return self.at

    def monotonic(self) -> float:
        return self.at


@dataclass(frozen=True, slots=True)
class ReplayPosition:
    """Where a replay stands, for the time cursor.

    Attributes:
        source: the bundle's file name.
        start_at: first frame's Unix time.
        end_at: last frame's Unix time.
        at: the cursor.
        playing: whether the cursor moves.
        speed: recorded seconds per real second.
    """

    source: str
    start_at: float
    end_at: float
    at: float
    playing: bool
    speed: float

    @property
    def fraction(self) -> float:
        """The cursor's place in the recording, 0..1."""
        span = self.end_at - self.start_at
        return 1.0 if span <= 0 else min(1.0, max(0.0, (self.at - self.start_at) / span))


def clean_bundle(bundle: Bundle) -> Bundle:
    """``bundle`` with what the screens draw (node names, info, frames, events, history and
    the recorded sources) cleaned of terminal control characters; captured files, the
    configuration and the raw members stay as they are (they are not drawn)."""
    nodes = [replace(node, node=clean_text(node.node), info=clean_record(node.info),
                     history=clean_record(node.history), events=clean_record(node.events),
                     frames=clean_record(node.frames))
             for node in bundle.nodes]
    manifest = dict(bundle.manifest)
    entries = manifest.get("nodes")
    if isinstance(entries, list):
        manifest["nodes"] = [{**e, "source": clean_text(str(e["source"]))} if isinstance(e, dict) and e.get("source")
                             else e for e in entries]
    cut_short = None if bundle.cut_short is None else clean_text(bundle.cut_short)
    return replace(bundle, manifest=manifest, nodes=nodes, cut_short=cut_short)


def loose_events(node: NodeBundle) -> list[Event]:
    """The events of ``node`` that none of its frames carries, from its first frame on: those its journal
    recorded with the agent's clean stop, after its last frame (no frame follows a stop), and those of
    frames the journal could not write. A replay files them at their own time, as it files frames."""
    if not node.frames:
        return []
    carried = {e.id for f in node.frames for e in f.events}
    first_at = min(f.taken_at for f in node.frames)
    return [e for e in node.events if e.id not in carried and e.at >= first_at]


def store_key(node: NodeBundle) -> str:
    """A replayed node's store key (stands for an agent URL on the screens) when its name is
    the only one of its kind in the bundle (else see `store_keys`)."""
    return f"replay:{node.node}"


def store_keys(nodes: list[NodeBundle]) -> list[str]:
    """A distinct store key per recorded node, in order: `store_key`, and for a name an earlier
    node has too (two agents on hosts both called ``ubuntu``, which the live dashboard tells
    apart by URL) ``-2``, ``-3``..., as the bundle names their directories."""
    keys: list[str] = []
    for node in nodes:
        key, n = store_key(node), 1
        while key in keys:
            n += 1
            key = f"{store_key(node)}-{n}"
        keys.append(key)
    return keys


class Replay:
    """Plays a bundle into a `ClusterStore`.

    Args:
        bundle: the bundle read back (cleaned here with `clean_bundle`).
        source: its file name (shown on the time cursor).
        checkpoint_frames: frames between two checkpoints (default: the recording's frames over
            `CHECKPOINTS`, at least `CHECKPOINT_MIN_FRAMES`).
    """

    def __init__(self, bundle: Bundle, source: str = "", checkpoint_frames: int | None = None) -> None:
        self.bundle = bundle = clean_bundle(bundle)
        self.source = clean_text(source)
        #: Each recorded node's store key, in the bundle's order.
        self.keys = store_keys(bundle.nodes)
        #: Each recorded node's clock against the replay's, in the bundle's order.
        self.clocks = node_clocks(bundle.nodes)
        self._clock_of = dict(zip(self.keys, self.clocks))
        entries = bundle.manifest.get("nodes")
        entries = entries if isinstance(entries, list) else []
        #: How each node's agent run ended, by store key: whether it stopped cleanly, for the nodes the
        #: bundle read from a journal says it of (the manifest's ``run_clean``; none in an older bundle).
        self.stopped_cleanly = {key: clean for key, entry in zip(self.keys, entries)
                                if (clean := stopped_cleanly(entry)) is not None}
        # Each frame with the replay's time when its node's clock read its ``taken_at``.
        timeline: list[tuple[float, int, str, Frame]] = []
        for index, (node, clock) in enumerate(zip(bundle.nodes, self.clocks)):
            timeline += [(clock.replay_time(f.taken_at), index, self.keys[index], f) for f in node.frames]
        timeline.sort(key=lambda item: (item[0], item[1], item[3].seq))
        self._timeline = timeline
        # The events no frame carries (`loose_events`), each with the replay's time when its node's clock read its ``at``.
        loose: list[tuple[float, int, str, Event]] = []
        for index, (node, clock) in enumerate(zip(bundle.nodes, self.clocks)):
            loose += [(clock.replay_time(e.at), index, self.keys[index], e) for e in loose_events(node)]
        loose.sort(key=lambda item: (item[0], item[1]))
        self._loose = loose
        self._loose_at = [item[0] for item in loose]
        #: Loose events filed so far (those at or before the last frame filed, and before the cursor).
        self._loose_fed = 0
        self.start_at = timeline[0][0] if timeline else float(bundle.manifest.get("created_at") or 0.0)
        watched = [c.watched_until for c in self.clocks if c.watched_until is not None]
        # To the last pull: a node silent from long before it shows as stale (as it was) at the end; to the
        # events of the last clean stop.
        self.end_at = max([timeline[-1][0], *watched, *self._loose_at]) if timeline else self.start_at
        self.clock = ReplayClock(self.start_at)
        self.at = self.start_at
        self.playing = True
        self.speed = 1.0
        self._fed = 0
        self._trackers: dict[str, AlarmTracker] = {}
        #: Until when each node was watched, by store key (its pull, else its last frame): no node ages,
        #: and the cluster rules judge no staleness, past it.
        self._recorded_until = {key: at for at, _, key, _ in timeline}
        self._recorded_until.update({key: clock.watched_until for key, clock in self._clock_of.items()
                                     if clock.watched_until is not None})
        self._checkpoint_every = checkpoint_frames or checkpoint_spacing(
            len(timeline), sum(node_copy_bytes(node.frames) for node in bundle.nodes))
        # The stores and trackers with the first N frames of the timeline filed, by N. The state
        # after N frames is the same whatever seeks led there, so a checkpoint stays good.
        self._checkpoints: dict[int, tuple[dict[str, NodeStore], dict[str, AlarmTracker]]] = {}

    @classmethod
    def open(cls, path: str | Path) -> Replay:
        """Read a bundle file.

        Raises:
            BundleError: not a readable bundle.
        """
        from rigmon.snapshot.bundle import BundleError, read_bundle

        try:
            bundle = read_bundle(path)
        except BundleError as exc:
            # Said of a member ("nodes/x/frames.jsonl.gz: ..."): name the file as well.
            if not str(exc).startswith(str(path)):
                raise BundleError(f"{path}: {exc}") from None
            raise
        except (ValueError, KeyError, TypeError, AttributeError, zlib.error) as exc:
            # A tar.gz whose manifest or info is not what rigmon writes (a hand-edited or damaged
            # bundle): a clear refusal, not a traceback. (JSON and schema errors are ValueErrors;
            # KeyError and the rest are a manifest of another shape.) A node's damaged frames (a
            # corrupt frames.jsonl.gz, a cut frame line) do not refuse the bundle: read_bundle reads
            # the rest without them and says so in `NodeBundle.missing`.
            what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise BundleError(f"{path}: a damaged bundle: {what}") from None
        return cls(bundle, Path(path).name)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the alarms screen says of a replay's cluster rules (see `clock_notes`)."""
        return clock_notes(self.bundle.nodes, self.clocks)

    @property
    def frame_count(self) -> int:
        """Frames in the recording, all nodes together."""
        return len(self._timeline)

    def attach(self, cluster: ClusterStore) -> None:
        """Add a store per recorded node and feed the frames up to the cursor."""
        entries = self.bundle.manifest.get("nodes") or []
        for index, node in enumerate(self.bundle.nodes):
            source = entries[index].get("source") if index < len(entries) else None
            # The recorded agent's URL, so the screens say where the data came from.
            cluster.add(self.keys[index], str(source or self.keys[index]))
        self._restart(cluster)
        self._feed(cluster, self.at)

    def _restart(self, cluster: ClusterStore) -> None:
        cluster.clear()
        cluster.rules.recorded_until = dict(self._recorded_until)
        # As when the replay was opened: the times of the stores' first entries do not depend on
        # where the cursor stood before.
        self.clock.at = self.start_at
        self._fed = 0
        self._loose_fed = 0
        self._trackers = {}
        entries = self.bundle.manifest.get("nodes") or []
        for index, (key, node) in enumerate(zip(self.keys, self.bundle.nodes)):
            store = cluster.nodes[key]
            # Its age stops where the bundle stops knowing of it: its pull, or, undated, its last frame
            # (a node whose clock ran ahead must not make the others read stale past theirs).
            store.watched_until = self._recorded_until.get(key)
            if node.info is not None:
                store.connected(node.info)
            entry = entries[index] if index < len(entries) and isinstance(entries[index], dict) else {}
            if entry.get("error") and not node.frames:
                # The export or `rigmon snapshot` could not pull it (a dead node): say so, as the
                # live screen did, rather than "connecting" for the whole replay.
                store.failed(f"not in this recording: {clean_text(str(entry['error']))}")
            elif node.missing and not node.frames:
                store.failed(f"not in this recording: {node.missing}")
            self._trackers[store.key] = AlarmTracker(node.node)
            store.set_alarms(self._trackers[store.key].alarm_list())

    def _feed(self, cluster: ClusterStore, until_at: float) -> int:
        """File every frame taken at or before ``until_at``; returns how many."""
        fed = 0
        # Each node fed here, with its newest frame's time: its alarms are as of that frame.
        touched: dict[str, float] = {}
        while self._fed < len(self._timeline) and self._timeline[self._fed][0] <= until_at:
            filed_at, _, key, frame = self._timeline[self._fed]
            self._file_loose(cluster, filed_at, touched)
            self.clock.at = filed_at
            store = cluster.nodes[key]
            # The alarms' times are the node's own (as its events' are).
            if store.latest is not None and store.latest.run_id != frame.run_id:
                self._trackers[key].restarted(frame.taken_at, frame.events)
            store.add_frames((frame,))
            for event in frame.events:
                self._trackers[key].apply(event)
            touched[key] = frame.taken_at
            self._fed += 1
            fed += 1
            if self._fed % self._checkpoint_every == 0 and self._fed not in self._checkpoints:
                self._set_alarms(cluster, touched)
                touched = {}
                # The clock is the replay's own (shared by every store), not part of a state.
                self._checkpoints[self._fed] = copy.deepcopy((cluster.nodes, self._trackers),
                                                             {id(self.clock): self.clock})
        self._file_loose(cluster, until_at, touched)
        self.clock.at = until_at
        self._set_alarms(cluster, touched)
        return fed

    def _file_loose(self, cluster: ClusterStore, until_at: float, touched: dict[str, float]) -> None:
        """File the loose events (`loose_events`) at or before ``until_at`` not filed yet."""
        while self._loose_fed < len(self._loose) and self._loose[self._loose_fed][0] <= until_at:
            _, _, key, event = self._loose[self._loose_fed]
            cluster.nodes[key].add_events((event,))
            self._trackers[key].apply(event)
            touched[key] = max(touched.get(key, event.at), event.at)
            self._loose_fed += 1

    def _set_alarms(self, cluster: ClusterStore, touched: dict[str, float]) -> None:
        for key, last_at in touched.items():
            cluster.nodes[key].set_alarms(self._trackers[key].alarm_list(), last_at)

    def _rewind(self, cluster: ClusterStore, at: float) -> None:
        """Bring the stores back to the latest checkpoint whose frames are all at or before ``at``
        (to the start when there is none)."""
        usable = [n for n in self._checkpoints if self._timeline[n - 1][0] <= at]
        if not usable:
            self._restart(cluster)
            return
        self._fed = max(usable)
        # The loose events filed with a checkpoint's frames: those at or before its last frame (see `_feed`).
        self._loose_fed = bisect.bisect_right(self._loose_at, self._timeline[self._fed - 1][0])
        nodes, trackers = copy.deepcopy(self._checkpoints[self._fed], {id(self.clock): self.clock})
        cluster.clear()  # the cluster rules start over, as after a restart
        cluster.rules.recorded_until = dict(self._recorded_until)
        cluster.nodes.update(nodes)
        self._trackers = trackers
        self.clock.at = self._timeline[self._fed - 1][0]

    def seek(self, cluster: ClusterStore, at: float) -> int:
        """Move the cursor to ``at`` (clamped to the recording) and bring the stores there; returns
        how many frames were filed to get there (backwards, from the nearest checkpoint before it)."""
        at = min(self.end_at, max(self.start_at, at))
        if at < self.at:
            self._rewind(cluster, at)
        self.at = at
        return self._feed(cluster, at)

    def tick(self, cluster: ClusterStore, real_s: float) -> None:
        """Real time passed: move a playing cursor by ``real_s`` times the speed; stop at the end."""
        if not self.playing:
            return
        self.seek(cluster, self.at + real_s * self.speed)
        if self.at >= self.end_at:
            self.playing = False

    def toggle(self, cluster: ClusterStore) -> None:
        """Play or pause; playing at the end starts over."""
        if not self.playing and self.at >= self.end_at:
            self.seek(cluster, self.start_at)
        self.playing = not self.playing

    def change_speed(self, step: int) -> None:
        """Next faster (``step`` 1) or slower (-1) of `SPEEDS`."""
        index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - self.speed))
        self.speed = SPEEDS[max(0, min(len(SPEEDS) - 1, index + step))]

    def frames_until(self, key: str, at: float | None = None) -> list[Frame]:
        """The frames of node ``key`` filed up to ``at`` (the replay's clock; default: the cursor)."""
        limit = self.at if at is None else at
        return [f for filed_at, _, k, f in self._timeline if k == key and filed_at <= limit]

    def node_time(self, key: str, at: float | None = None) -> float:
        """Node ``key``'s own clock (its frames' and events' times) when the replay's read ``at``
        (default: the cursor)."""
        return self._clock_of[key].node_time(self.at if at is None else at)

    def clock_of(self, key: str) -> NodeClock:
        """Node ``key``'s clock against the replay's."""
        return self._clock_of[key]

    def position(self) -> ReplayPosition:
        """Where the replay stands."""
        return ReplayPosition(self.source, self.start_at, self.end_at, self.at, self.playing, self.speed)
