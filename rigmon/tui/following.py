"""Following the dashboard's agents: one client per node, its updates posted as messages, its alarms polled.

The node on screen (the node screen's) is followed by full frames, every other node by summary
records; its alarms are polled more often. The coroutines here run as the app's workers: they
do I/O and post messages, and never touch widgets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual.message import Message
from textual.worker import Worker

from rigmon.cluster.client import AgentClient, Connected, Failed, GapReported, Sampled, Summarized, View
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.sanitise import clean_text
from rigmon.tui.messages import (
    NodeAlarms,
    NodeAlarmsFailed,
    NodeConnected,
    NodeFailed,
    NodeGap,
    NodeSampled,
    NodeSummarized,
)

ClientFactory = Callable[[NodeTarget], AgentClient]
#: Seconds before a follow worker that crashed on a bug starts again.
WORKER_RESTART_S = 5.0
#: How many times less often a node followed by summary records (not on screen) is polled: its
#: alarm transitions still come as events in its records and fetch at once (with 256 nodes the
#: polls were the dashboard's largest cost after drawing).
SUMMARY_ALARM_POLL_FACTOR = 3.0


def default_client(target: NodeTarget) -> AgentClient:
    """A real HTTP client for ``target``."""
    return AgentClient(target.url, target.token, control_token=target.control_token, ca_file=target.ca_file,
                       token_from=target.token_from, token_where=target.token_where)


class Followers:
    """The follow and alarm workers of every node, and which node is followed by full frames.

    Args:
        client_factory: builds each node's client.
        alarm_poll_s: seconds between /v1/alarms polls of the node on screen.
        post: the app's ``post_message``.
        run: the app's ``run_worker`` (`poll_alarms` runs each node's alarm poller with it).
    """

    def __init__(self, client_factory: ClientFactory, alarm_poll_s: float, post: Callable[[Message], object],
                 run: Callable[..., Worker[None]]) -> None:
        self.client_factory = client_factory
        self.alarm_poll_s = alarm_poll_s
        self._post = post
        self._run = run
        # Each node's alarm poller (`poll_alarms`).
        self._alarm_workers: dict[str, Worker[None]] = {}
        #: Set to fetch a node's alarms at once (its frames brought an ``alarm_*`` event).
        self.alarm_wake: dict[str, asyncio.Event] = {}
        # Each followed node's client, and the node whose full frames the screen shows (the
        # node screen's); every other node is followed by summary records.
        self._clients: dict[str, AgentClient] = {}
        self._full_key: str | None = None

    async def follow(self, target: NodeTarget) -> None:
        """Follow one agent and post what happens; never touches widgets."""
        key = target.url
        while True:
            client: AgentClient | None = None
            try:
                # Inside the try: a client that cannot be built (httpx refuses the URL) is a
                # failure the row shows, not a worker gone before its first message.
                client = self.client_factory(target)
                client.set_view(self._view_of(key))
                self._clients[key] = client
                async for update in client.follow():
                    if isinstance(update, Summarized):
                        self._post(NodeSummarized(key, update.records))
                    elif isinstance(update, Sampled):
                        self._post(NodeSampled(key, update.frames))
                    elif isinstance(update, Connected):
                        self._post(NodeConnected(key, update.info))
                    elif isinstance(update, GapReported):
                        self._post(NodeGap(key, update.gap))
                    elif isinstance(update, Failed):
                        self._post(NodeFailed(key, update.reason, update.retry_in_s))
            except Exception as exc:  # noqa: BLE001 - a bug in one node's client must not end the dashboard
                reason = clean_text(f"internal error: {type(exc).__name__}: {exc}")
                self._post(NodeFailed(key, reason, WORKER_RESTART_S))
                await asyncio.sleep(WORKER_RESTART_S)
            finally:
                self._clients.pop(key, None)
                if client is not None:
                    await client.aclose()

    def answered(self, key: str) -> None:
        """A request to the agent at ``key``'s URL was answered (its alarm poll, an acknowledgement): its
        follower, if waiting in its back-off after a failure, tries again at once (an agent restarted on
        its port is live on its row as soon as the dashboard reaches it, not up to 15 s later)."""
        client = self._clients.get(key)
        if client is not None:
            client.answered_elsewhere()

    def _alarm_poll_s(self, key: str) -> float:
        """Seconds to the next poll of ``key``'s alarms (see `SUMMARY_ALARM_POLL_FACTOR`)."""
        return self.alarm_poll_s if key == self._full_key else self.alarm_poll_s * SUMMARY_ALARM_POLL_FACTOR

    def _view_of(self, key: str) -> View:
        """Full frames for the node on screen, summary records for the others."""
        return "full" if key == self._full_key else "summary"

    def show_whole(self, key: str | None) -> None:
        """Follow ``key`` (``None``: no node) by full frames from now on, every other node by summaries."""
        self._full_key = key
        for node, client in self._clients.items():
            client.set_view(self._view_of(node))
        wake = self.alarm_wake.get(key) if key is not None else None
        if wake is not None:
            wake.set()  # the node screen starts with the node's alarms as they are now

    def poll_alarms(self, target: NodeTarget, generation: int) -> None:
        """Poll the alarms of ``target`` for its node store of ``generation`` (`watch_alarms`), ending the poller
        of an earlier one: its fetch in flight is the agent's that answered at the URL before."""
        old = self._alarm_workers.pop(target.url, None)
        if old is not None:
            old.cancel()
        self._alarm_workers[target.url] = self._run(self.watch_alarms(target, generation), name=f"alarms {target.url}",
                                                    group="alarms", exit_on_error=False)

    async def watch_alarms(self, target: NodeTarget, generation: int = 0) -> None:
        """Fetch one agent's alarms on a timer and when its frames bring alarm events, for the node store
        of ``generation`` (each answer says it, so that one asked of an agent that no longer answers at the
        URL is dropped: the app starts a worker of the next generation then)."""
        while True:
            client: AgentClient | None = None
            try:
                client = self.client_factory(target)
                async for item in client.watch_alarms(self.alarm_wake[target.url],
                                                      lambda: self._alarm_poll_s(target.url)):
                    if isinstance(item, Failed):
                        self._post(NodeAlarmsFailed(target.url, item.reason, generation))
                    else:
                        self.answered(target.url)
                        self._post(NodeAlarms(target.url, item, generation))
            except Exception as exc:  # noqa: BLE001 - as in `follow`: the node's alarms say why, polling goes on
                reason = clean_text(f"internal error: {type(exc).__name__}: {exc}")
                self._post(NodeAlarmsFailed(target.url, reason, generation))
                await asyncio.sleep(WORKER_RESTART_S)
            finally:
                if client is not None:
                    await client.aclose()
