"""The simulated training scripts' marks, posted to their nodes' agents as ``rigmon mark`` does.

A training script on a real node runs ``rigmon mark "epoch 3 checkpoint"`` at each checkpoint: a
``POST /v1/marks`` with the agent's control token. A simulated job (`rigmon.sim.job.SimDdpJob`)
puts the same text in its node's `SimNode.marks`; `MarkPoster` takes them from there and posts
them to the node's agent over HTTP on 127.0.0.1, so the agent, its journal and the dashboard see
marks exactly as from a real script. Without a control token the agent refuses marks, and so
a rig run without one (``rigmon sim`` without ``--control-token-file``) posts none.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rigmon.sim.node import SimNode

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

#: Seconds between two looks at the nodes' marks (real time).
LOOK_EVERY_S = 0.5


class MarkPoster:
    """Posts each node's marks to its agent.

    Args:
        nodes: the rig's nodes.
        urls: each node's agent, in the order of ``nodes``.
        tokens: each node's agent's control token (``None``: it takes no marks, and its node's
            marks are dropped).
    """

    def __init__(self, nodes: Sequence[SimNode], urls: Sequence[str], tokens: Sequence[str | None]) -> None:
        self.nodes = list(nodes)
        self.urls = list(urls)
        self.tokens = list(tokens)
        #: Marks posted, and those that could not be (agent refused or did not answer).
        self.posted = 0
        self.failed = 0

    async def run(self) -> None:
        """Post the marks as they come, until cancelled."""
        # Imported here: httpx brings rich with it, which the agent's side never loads.
        import httpx

        async with httpx.AsyncClient(timeout=5.0) as client:
            while True:
                await self.post_pending(client)
                await asyncio.sleep(LOOK_EVERY_S)

    async def post_pending(self, client: httpx.AsyncClient) -> None:
        """Post every mark waiting on a node, oldest first (a node without a token drops its own)."""
        import httpx  # loaded by `run` already

        for node, url, token in zip(self.nodes, self.urls, self.tokens, strict=True):
            marks, node.marks = node.marks, []
            if token is None:
                continue
            for text, by in marks:
                try:
                    answer = await client.post(f"{url}/v1/marks", json={"text": text, "by": by},
                                               headers={"Authorization": f"Bearer {token}"})
                except httpx.HTTPError as exc:
                    self.failed += 1
                    log.warning("%s: mark %r not posted: %s", node.name, text, exc)
                    continue
                if answer.status_code == 201:
                    self.posted += 1
                else:
                    self.failed += 1
                    log.warning("%s: mark %r refused: HTTP %d", node.name, text, answer.status_code)
