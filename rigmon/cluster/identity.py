"""Which node each followed agent says it is, and the note when another agent answers at a node's URL.

The dashboard keys its nodes by the URL it follows (`rigmon.cluster.store.ClusterStore`), not by the
name an agent reports: when a node's agent dies and another agent takes its port (a second agent
started on the node, an address reassigned to another machine), the frames at that URL come from
another node. Its row would silently take the other name; `AgentNames` remembers each URL's name and
says what changed, for the row, the node screen and a notification, and the dashboard then starts the
node's store afresh (`rigmon.cluster.store.ClusterStore.start_afresh`).
"""

from __future__ import annotations


class AgentNames:
    """The node name each followed URL (by key) last answered /v1/info with, and a note for each URL whose
    agent changed its name while followed."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        #: The note of each key whose agent now answers as another node than before (see `answered`).
        self.notes: dict[str, str] = {}
        #: The note of each such key in short (``another agent at the node's URL: now node gpu07 (was node01)``),
        #: without the URL: for the cluster row's one line, when the whole note does not fit it.
        self.short_notes: dict[str, str] = {}

    def answered(self, key: str, url: str, node: str) -> str | None:
        """The agent at ``url`` (the node of ``key``) answered /v1/info as ``node``: the note to show when
        that is another name than it answered with before (``the agent at http://10.0.0.2:9871 now says it
        is node gpu07 (was node01)``), else ``None``. The note stays on the node (`notes`) afterwards: the
        row's history before it is the other node's."""
        was = self._names.get(key)
        self._names[key] = node
        if was is None or was == node:
            return None
        note = f"the agent at {url} now says it is node {node} (was {was})"
        self.notes[key] = note
        self.short_notes[key] = f"another agent at the node's URL: now node {node} (was {was})"
        return note
