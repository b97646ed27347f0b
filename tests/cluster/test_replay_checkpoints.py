"""Seeking back in a replay from the nearest checkpoint gives the stores a play from the start gives."""

from __future__ import annotations

import math
import random
from collections import deque
from pathlib import Path
from typing import Any

from rigmon.cluster.history import Ring
from rigmon.cluster.replay import Replay
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Frame
from tests.tui.snapshot_apps.fake_agent import START_AT
from tests.tui.snapshot_apps.fake_bundle import ALARM_FIRES, FRAMES, GPU_LOST_AT, SILENT_AFTER, write_fake_bundle

#: A store's memoised drawing (its view and the change counter that keys it): not state.
CACHES = {"_view_cache", "_changes", "clock"}


def state(value: Any) -> Any:
    """Everything a store holds, as plain comparable data (rings as lists, nan as a marker)."""
    if isinstance(value, Ring):
        return ["nan" if math.isnan(v) else v for v in value.tail()]
    if isinstance(value, deque):
        return [state(v) for v in value]
    if isinstance(value, dict):
        return {k: state(v) for k, v in value.items() if k not in CACHES}
    if isinstance(value, (list, tuple)) and not isinstance(value, Frame):
        return [state(v) for v in value]
    if hasattr(value, "__dict__") and not hasattr(value, "__struct_fields__"):
        return {type(value).__name__: state(vars(value))}
    return value


def stores(cluster: ClusterStore) -> dict[str, Any]:
    return {key: state(store) for key, store in cluster.nodes.items()}


def played(bundle: Path, at: float) -> dict[str, Any]:
    """The stores of a replay played from the start to ``at``, in one-second steps."""
    replay = Replay.open(bundle)
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    while replay.at < at:
        replay.seek(cluster, min(at, replay.at + 1.0))
    return stores(cluster)


def test_a_seek_back_starts_from_the_nearest_checkpoint_and_ends_where_a_play_from_the_start_does(
        tmp_path: Path) -> None:
    # Before: every seek back filed the recording's frames again from the first (0.6 s for 16
    # nodes x 3600 frames, at each press of the left arrow).
    bundle = write_fake_bundle(tmp_path / "b.tar.gz")
    replay = Replay(Replay.open(bundle).bundle, checkpoint_frames=50)
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    replay.seek(cluster, replay.end_at)
    # Back over the alarm, the lost GPU and node03's silence; to the start; then forward again.
    rng = random.Random(4)
    targets = [START_AT + GPU_LOST_AT - 3, START_AT + ALARM_FIRES + 0.5, START_AT + SILENT_AFTER + 7, START_AT + 1,
               # Back a little, twice from the same checkpoint: filing on must not change it.
               START_AT + FRAMES - 5, START_AT + FRAMES - 10, START_AT + FRAMES - 12,
               *(START_AT + rng.uniform(1, FRAMES) for _ in range(4))]
    for at in targets:
        back = at < replay.at
        fed = replay.seek(cluster, at)
        earlier = sum(1 for t, *_ in replay._timeline if t <= at)
        if back and earlier > 50:
            assert fed < 50, "started from the checkpoint before the cursor"
        assert stores(cluster) == played(bundle, at), at

