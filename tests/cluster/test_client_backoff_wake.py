"""`AgentClient.answered_elsewhere` ends a back-off in progress: the follow tries the agent again at once
when another request reached it, and only an answer after the failure counts. The back-off here never
ends by itself, so every retry seen was woken."""

from __future__ import annotations

import asyncio

import httpx

from rigmon.cluster.client import AgentClient, Backoff, Failed, Update


async def forever(_: float) -> None:
    """A back-off that never ends by itself."""
    await asyncio.Event().wait()


def refusing(requests: list[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
    return httpx.MockTransport(handler)


async def test_an_answer_elsewhere_ends_the_back_off_and_the_follow_tries_again() -> None:
    requests: list[httpx.Request] = []
    client = AgentClient("http://node.test:9871", transport=refusing(requests), sleep=forever,
                         backoff=Backoff(15.0, 15.0))
    updates = client.follow()
    first: Update = await asyncio.wait_for(anext(updates), 10)
    assert isinstance(first, Failed) and first.retry_in_s == 15.0 and len(requests) == 1
    following = asyncio.ensure_future(anext(updates))
    client.answered_elsewhere()
    second = await asyncio.wait_for(following, 10)
    assert isinstance(second, Failed) and len(requests) == 2
    await updates.aclose()
    await client.aclose()


async def test_an_answer_before_the_failure_does_not_shorten_its_back_off() -> None:
    requests: list[httpx.Request] = []
    client = AgentClient("http://node.test:9871", transport=refusing(requests), sleep=forever,
                         backoff=Backoff(15.0, 15.0))
    client.answered_elsewhere()  # while the node was still answering
    updates = client.follow()
    assert isinstance(await asyncio.wait_for(anext(updates), 10), Failed)
    following = asyncio.ensure_future(anext(updates))
    done, _ = await asyncio.wait((following,), timeout=0.2)
    assert not done and len(requests) == 1
    client.answered_elsewhere()
    assert isinstance(await asyncio.wait_for(following, 10), Failed) and len(requests) == 2
    await updates.aclose()
    await client.aclose()
