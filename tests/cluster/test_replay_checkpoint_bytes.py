"""A replay keeps as many checkpoints as their estimated bytes allow, not as a count of node copies allows:
the estimate of a node's copy is checked against copies measured, and the checkpoints kept against the budget."""

from __future__ import annotations

import copy
import random
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from msgspec.structs import replace

from rigmon.cluster import replay_checkpoints
from rigmon.cluster.replay import Replay, ReplayClock
from rigmon.cluster.replay_checkpoints import (
    CHECKPOINT_BUDGET_BYTES,
    CHECKPOINTS,
    checkpoint_spacing,
    node_copy_bytes,
)
from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Frame
from tests.tui.snapshot_apps.fake_agent import START_AT, make_frame
from tests.tui.snapshot_apps.fake_bundle import write_fake_bundle
from tests.tui.snapshot_apps.record_frames import load_frames

HOUR = 3600


def host_only(count: int) -> list[Frame]:
    rng = random.Random(1)
    return [make_frame("node01", "run", seq, rng) for seq in range(1, count + 1)]


def recorded(name: str, count: int, gpus: int | None = None) -> list[Frame]:
    """``count`` frames of a recorded fixture, one a second (its frames over again), with its GPUs
    repeated up to ``gpus`` (other indexes and UUIDs)."""
    base = load_frames(name)
    if gpus is not None:
        base = [replace(f, readings=replace(f.readings, gpus=tuple(
            replace(g, index=i, uuid=f"GPU-{i:08x}-copy") for i, g in enumerate(
                f.readings.gpus[j % len(f.readings.gpus)] for j in range(gpus))))) for f in base]
    return [replace(base[i % len(base)], seq=i + 1, taken_at=START_AT + i, run_id="run") for i in range(count)]


def measured_bytes(value: Any, keep: dict[int, Any]) -> int:
    """Bytes a deep copy of ``value`` allocates (what a checkpoint holds), ``keep`` shared as the replay shares its clock."""
    tracemalloc.start()
    try:
        copied = copy.deepcopy(value, dict(keep))
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del copied
    return size


def store_of(frames: list[Frame]) -> tuple[NodeStore, ReplayClock]:
    clock = ReplayClock(START_AT)
    store = NodeStore("replay:node01", "http://node01:9871", clock)
    for frame in frames:
        clock.at = frame.taken_at
        store.add_frames((frame,))
    return store, clock


@pytest.mark.parametrize(("frames", "gpus"), [(host_only(HOUR), 0), (recorded("v100-ddp-gpu-3-lost", HOUR), 4),
                                              (recorded("v100-ddp-gpu-3-lost", HOUR, gpus=8), 8),
                                              (recorded("two-raid0-model-load", 600), 0)])
def test_a_node_copy_is_about_its_estimate(frames: list[Frame], gpus: int) -> None:
    store, clock = store_of(frames)
    assert len(store.latest.readings.gpus) == gpus  # type: ignore[union-attr]
    measured = measured_bytes(store, {id(clock): clock})
    # Never under by more than a tenth (the budget holds), nor over by more than a third (checkpoints are kept).
    assert 0.9 * measured <= node_copy_bytes(frames) <= 1.35 * measured


def test_big_nodes_keep_fewer_checkpoints_than_small_ones_of_the_same_count() -> None:
    # Before: 16 nodes kept 8 checkpoints and 256 none, whatever the nodes held; 8 copies of 16
    # nodes of 8 GPUs are more than of 16 host-only ones, and 256 nodes of ten minutes are far less.
    small, big = node_copy_bytes(host_only(HOUR)), node_copy_bytes(recorded("v100-ddp-gpu-3-lost", HOUR, gpus=8))
    short = node_copy_bytes(host_only(600))
    assert big > 2 * small

    def kept(frames: int, copy_bytes: int) -> int:
        return frames // checkpoint_spacing(frames, copy_bytes)

    assert kept(16 * HOUR, 16 * small) == CHECKPOINTS
    assert 0 < kept(16 * HOUR, 16 * big) < CHECKPOINTS
    assert kept(16 * HOUR, 16 * big) * 16 * big <= CHECKPOINT_BUDGET_BYTES
    # Today's budget for 256 nodes with an hour of history each: no checkpoint (8 would be ~0.5 GB)...
    assert kept(256 * HOUR, 256 * small) == 0
    # ... but 256 nodes of a ten-minute recording keep some.
    assert 0 < kept(256 * 600, 256 * short) * 256 * short <= CHECKPOINT_BUDGET_BYTES
    assert checkpoint_spacing(3 * 600, 3 * short) == 1000  # a short recording: at least 1000 frames apart


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A budget of 300 kB and checkpoints at least 20 frames apart: the fake bundle's three nodes
    (330 frames) fit in it a few times."""
    monkeypatch.setattr(replay_checkpoints, "CHECKPOINT_BUDGET_BYTES", 300_000)
    monkeypatch.setattr(replay_checkpoints, "CHECKPOINT_MIN_FRAMES", 20)
    yield 300_000


def test_the_checkpoints_a_replay_keeps_take_no_more_than_the_budget(tmp_path: Any, small_budget: int) -> None:
    replay = Replay.open(write_fake_bundle(tmp_path / "b.tar.gz"))
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    replay.seek(cluster, replay.end_at)
    kept = replay._checkpoints
    assert 1 < len(kept) < CHECKPOINTS
    assert measured_bytes(kept, {id(replay.clock): replay.clock}) <= small_budget
    # As many as the estimate allows: one more would not fit.
    estimate = sum(node_copy_bytes(node.frames) for node in replay.bundle.nodes)
    assert len(kept) * estimate <= small_budget < (len(kept) + 1) * estimate
