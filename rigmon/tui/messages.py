"""Messages the follow workers post to the app: what happened to a node's data and alarms."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from rigmon.schema import AlarmList, Frame, Gap, Info
from rigmon.summary import SummaryRecord


@dataclass
class NodeConnected(Message):
    """The agent at ``key`` answered /v1/info."""

    key: str
    info: Info


@dataclass
class NodeSampled(Message):
    """New frames from the agent at ``key``, oldest first. Never replaced: every frame counts."""

    key: str
    frames: tuple[Frame, ...]


@dataclass
class NodeSummarized(Message):
    """New summary records (a node followed by ``view=summary``) from the agent at ``key``,
    oldest first. Never replaced: every record counts."""

    key: str
    records: tuple[SummaryRecord, ...]


@dataclass
class NodeGap(Message):
    """The agent at ``key`` could not send frames we asked for."""

    key: str
    gap: Gap


@dataclass
class NodeFailed(Message):
    """Getting data from ``key`` failed; the client retries in ``retry_in_s`` seconds."""

    key: str
    reason: str
    retry_in_s: float

    def can_replace(self, message: Message) -> bool:
        # Only the newest failure of a node matters while it is down.
        return isinstance(message, NodeFailed) and message.key == self.key


@dataclass
class NodeAlarms(Message):
    """The alarms of the agent at ``key`` (its /v1/alarms answer), asked for by the alarm worker of the
    node store's ``generation`` (`rigmon.cluster.node_store.NodeStore.generation`): an answer of an older
    generation is the agent's that answered at the URL before, and is dropped."""

    key: str
    alarms: AlarmList
    generation: int = 0

    def can_replace(self, message: Message) -> bool:
        # A newer list of the same node (and agent) supersedes an older one not yet handled.
        return isinstance(message, NodeAlarms) and message.key == self.key and message.generation == self.generation


@dataclass
class NodeAlarmsFailed(Message):
    """The alarms of ``key`` could not be fetched (by the alarm worker of ``generation``, as `NodeAlarms`)."""

    key: str
    reason: str
    generation: int = 0

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, NodeAlarmsFailed) and message.key == self.key and message.generation == self.generation


@dataclass
class HistoryWanted(Message):
    """The operator wants the history view of node ``key`` (``None``: the node screen's node)."""

    key: str | None = None
