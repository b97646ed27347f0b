"""Helpers of the cluster tests: a client's updates filed into a node's store as the dashboard does."""

from __future__ import annotations

from rigmon.cluster.client import Connected, Failed, GapReported, Sampled, Update
from rigmon.cluster.node_store import NodeStore


def file_update(store: NodeStore, update: Update) -> None:
    """File one of `AgentClient.follow`'s updates into ``store`` (what the dashboard's follower does)."""
    if isinstance(update, Connected):
        store.connected(update.info)
    elif isinstance(update, Sampled):
        store.add_frames(update.frames)
    elif isinstance(update, GapReported):
        store.add_gap(update.gap)
    elif isinstance(update, Failed):
        store.failed(update.reason)
