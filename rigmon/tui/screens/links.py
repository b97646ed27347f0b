"""LinkScreen: the cluster's link matrix, every node's round trips to every peer, one block per path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Header, Static

from rigmon.cluster.link_matrix import link_matrix
from rigmon.cluster.node_view import NodeView
from rigmon.tui.key_line import KeyLine
from rigmon.tui.widgets.link_table import ENDED_MARK, LinkTable
from rigmon.tui.widgets.replay_bar import ReplayBar

#: Above the table: how to read it.
LEGEND = ("p99 round trip and loss, node (row) to peer (column) · ▲ degraded · silent 4s: for 4 s · "
          "badkey: probe keys differ · ? peer flooded")
#: The legend while the cells hold only the p99 (the peers do not fit with the loss): it promises no
#: loss and no time a silent cell does not show.
P99_LEGEND = ("p99 round trip, node (row) to peer (column); loss and silent time in a wider window · ▲ degraded · "
              "badkey: probe keys differ · ? peer flooded")
#: Added to the legend while a row's node has its recording ended (in a replay).
ENDED_LEGEND = f" · {ENDED_MARK} HH:MM:SS: the node's recording ends there"
#: Shown instead of the table while no node reports peer paths.
NO_PATHS = ("no node reports peer paths: the agents probe the peers of their [[peers]] "
            "(see README, latency probes)")


class LinkScreen(Screen[None]):
    """The link matrix of every node the dashboard follows; Enter on a cell opens the row's node."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        # The app's key for this very screen is not offered on it (as on the alarms screen).
        Binding("l", "app.show_mode('links')", "Links", show=False),
    ]

    class Back(Message):
        """The operator wants the cluster screen again."""

    class OpenNode(Message):
        """The operator wants the node screen of ``key``."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text(LEGEND), id="link-legend")
        yield LinkTable(id="link-table")
        yield ReplayBar()
        yield KeyLine()

    def show(self, views: Sequence[NodeView], ended: Mapping[str, float] | None = None) -> None:
        """Draw the matrix of ``views``; ``ended``: in a replay, the nodes whose recording ended before
        the cursor, by key, with when (`rigmon.cluster.recording_end.recording_ends`)."""
        matrix = link_matrix(views)
        probing = len({r.key for r in matrix.rows})
        self.sub_title = f"links: {probing} of {len(views)} nodes probe {len(matrix.paths)} paths"
        legend = self.query_one("#link-legend", Static)
        ended = ended or {}
        # The peers' columns are by name: a peer that probes nothing has no row, only its column.
        ended_peers = {v.name: ended[v.key] for v in views if v.key in ended and v.name in matrix.peers}
        table = self.query_one(LinkTable)
        table.display = bool(matrix.rows)
        # Drawn with the matrix, just below (one redraw for both).
        table.set_reactive(LinkTable.ended, dict(ended))
        table.set_reactive(LinkTable.ended_peers, ended_peers)
        table.matrix = matrix
        if not matrix.rows:
            legend.update(Text(NO_PATHS))
        else:
            legend.update(Text(self._legend(table)))

    def _legend(self, table: LinkTable) -> str:
        """How to read the cells as ``table`` holds them now."""
        return (LEGEND if table.detail == "loss" else P99_LEGEND) + (ENDED_LEGEND if table.ended_peers else "")

    def on_link_table_detail_changed(self, message: LinkTable.DetailChanged) -> None:
        table = self.query_one(LinkTable)
        if table.matrix.rows:
            self.query_one("#link-legend", Static).update(Text(self._legend(table)))

    def on_link_table_node_chosen(self, message: LinkTable.NodeChosen) -> None:
        self.post_message(self.OpenNode(message.key))

    def action_back(self) -> None:
        """Back to the cluster screen."""
        self.post_message(self.Back())
