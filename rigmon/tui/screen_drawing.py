"""What each of the dashboard's screens is given to draw, from the node stores."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Set
from typing import TYPE_CHECKING

from textual.css.query import NoMatches
from textual.screen import Screen

from rigmon.cluster.alarm_board import AlarmBoardView
from rigmon.cluster.recording_end import recording_ends
from rigmon.cluster.store import ClusterStore
from rigmon.tui.recording_end import in_display_order
from rigmon.tui.screens.alarms import AlarmsScreen
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.links import LinkScreen
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.row_columns import ROW_TREND_BUCKETS, ROW_TREND_POINTS
from rigmon.tui.widgets.replay_bar import ReplayBar

if TYPE_CHECKING:
    # Types only: a replay is built by `rigmon dash --replay` before the app (see `rigmon.cli_dash`).
    from rigmon.cluster.replay import Replay


def shows_frames_of(screen: Screen[object], keys: Set[str], selected: str | None) -> bool:
    """Whether new frames of the nodes ``keys`` change what ``screen`` shows (``selected``: the node screen's node)."""
    return isinstance(screen, (ClusterScreen, LinkScreen)) or (isinstance(screen, NodeScreen) and selected in keys)


def _show_history_state(screen: Screen[object], cluster: ClusterStore) -> None:
    """When ``screen`` is a node's history view, tell it the node's state now (`HistoryScreen.show_state`). (Its
    module is imported when the first one opens: before that, no screen is one.)"""
    history = sys.modules.get("rigmon.tui.screens.history")
    if history is None or not isinstance(screen, history.HistoryScreen) or screen.node_key is None:
        return
    store = cluster.nodes.get(screen.node_key)
    if store is not None:
        screen.show_state(store.state())


def draw(screen: Screen[object], cluster: ClusterStore, selected: str | None, replay: Replay | None,
         board: AlarmBoardView | None, notes: Mapping[str, str] | None = None,
         short_notes: Mapping[str, str] | None = None) -> None:
    """Draw ``screen`` from the stores (the alarms screen needs ``board``; ``selected``: the node screen's node;
    ``notes``: by key, the nodes at whose URL another agent answers now, `rigmon.cluster.identity.AgentNames`;
    ``short_notes``: the same without the URL, for a cluster row too narrow for the whole note)."""
    notes = notes or {}
    ended: dict[str, float] = {}
    stopped: dict[str, bool] = {}
    if replay is not None:
        # Live, the bars keep their position of None (hidden); a query walks every row.
        for bar in screen.query(ReplayBar):
            bar.position = replay.position()
        ended = recording_ends(replay, cluster)
        stopped = replay.stopped_cleanly
    try:
        if isinstance(screen, AlarmsScreen):
            if board is not None:
                screen.show(board)
        elif isinstance(screen, ClusterScreen):
            screen.show(in_display_order(cluster.views(ROW_TREND_POINTS, ROW_TREND_BUCKETS), ended), ended, stopped,
                        notes, short_notes)
        elif isinstance(screen, LinkScreen):
            screen.show(cluster.views(ROW_TREND_POINTS, ROW_TREND_BUCKETS), ended)
        elif isinstance(screen, NodeScreen) and selected in cluster.nodes:
            store = cluster.nodes[selected]
            view = store.view(points=None, buckets=240, details=True, peers_up=cluster.peers_up(store),
                              label=cluster.rule_names()[selected])
            screen.show(view, store.info, store.latest, tuple(store.events), ended.get(selected), stopped.get(selected),
                        notes.get(selected))
        elif replay is None:
            # Live: a node that dies while its history is read says so in the view's title.
            _show_history_state(screen, cluster)
    except NoMatches:
        # The timer fired while the app shuts down and the screen has lost its widgets.
        pass
