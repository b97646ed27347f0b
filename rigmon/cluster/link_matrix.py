"""The cluster's link matrix: for each path name, every probing node against every peer (no UI).

Built from the nodes' views (their summaries' `PathFigures`), so a node the dashboard follows
by its summary alone is in it too. One matrix per path name: a thunderbolt-net round trip and
an RDMA one differ a hundredfold, so they are compared within their path, never across.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rigmon.cluster.node_view import NodeState, NodeView
from rigmon.summary import PathCell


@dataclass(frozen=True, slots=True)
class MatrixRow:
    """One probing node on one path: a cell per peer of the matrix.

    Attributes:
        path: the path's name (``tbnet``).
        node: the probing node's name.
        key: its key on the dashboard (opens its node screen).
        state: the probing node's state on the dashboard; its cells are its last figures
            when it is not ``live``.
        cells: one per `LinkMatrix.peers`, ``None`` where it does not probe that peer on
            this path (and for itself).
        link_gbps: the speeds of the node's interfaces carrying the path, lowest and highest
            (the same for a path over one NIC); ``None`` when no cell knows its speed.
    """

    path: str
    node: str
    key: str
    state: NodeState
    cells: tuple[PathCell | None, ...]
    link_gbps: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class LinkMatrix:
    """Every path's matrix: ``peers`` are the columns, ``rows`` grouped by path.

    Attributes:
        peers: the matrix's columns: every probing node and every peer named, by name.
        paths: path names, in the order their rows come.
        rows: by path (in ``paths`` order), then by node name.
        peer_states: the dashboard state of each peer it follows (by name); a peer it does
            not follow is absent.
    """

    peers: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    rows: tuple[MatrixRow, ...] = ()
    peer_states: dict[str, NodeState] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """Columns and (path, node) rows: the table is laid out again only when this changes."""
        return self.peers, tuple((r.path, r.key) for r in self.rows)


def link_matrix(views: Sequence[NodeView]) -> LinkMatrix:
    """The matrix of ``views``' peer paths (nodes without a summary or without paths are left out)."""
    probing = [v for v in views if v.summary is not None and v.summary.paths is not None]
    names = {v.name for v in probing}
    paths: dict[str, None] = {}
    for view in probing:
        assert view.summary is not None and view.summary.paths is not None
        for cell in view.summary.paths.paths:
            names.add(cell.peer)
            paths.setdefault(cell.path, None)
    peers = tuple(sorted(names))
    column = {name: i for i, name in enumerate(peers)}
    rows = []
    for path in sorted(paths):
        for view in sorted(probing, key=lambda v: (v.name, v.key)):
            assert view.summary is not None and view.summary.paths is not None
            cells: list[PathCell | None] = [None] * len(peers)
            found = False
            for cell in view.summary.paths.paths:
                if cell.path == path:
                    cells[column[cell.peer]] = cell
                    found = True
            if found:
                speeds = [c.link_gbps for c in cells if c is not None and c.link_gbps is not None]
                link = (min(speeds), max(speeds)) if speeds else None
                rows.append(MatrixRow(path, view.name, view.key, view.state, tuple(cells), link))
    states = {v.name: v.state for v in views}
    return LinkMatrix(peers=peers, paths=tuple(sorted(paths)), rows=tuple(rows),
                      peer_states={p: states[p] for p in peers if p in states})
