"""Alarm and guard requests to one agent: the alarm list (fetched or watched), acknowledging, guard commands."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import httpx

from rigmon.cluster.agent_answers import AgentError, failure_reason, status_error
from rigmon.cluster.agent_requests import AgentRequests
from rigmon.cluster.sanitise import decode_agent
from rigmon.cluster.updates import Failed
from rigmon.schema import Alarm, AlarmList, GuardReading, SchemaError

T = TypeVar("T")


class AlarmRequests(AgentRequests):
    """`AgentRequests` plus the node's alarms and its power guard (control requests need the control token)."""

    async def alarms(self) -> AlarmList:
        """GET /v1/alarms: the node's active and recently resolved alarms.

        Raises:
            AgentError: unreachable, an HTTP error (404 when the agent runs no alarms), or
                a bad answer.
        """
        try:
            return decode_agent(AlarmList, await self._get("/v1/alarms"))
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None

    async def acknowledge(self, alarm_id: str, by: str) -> Alarm:
        """POST /v1/alarms/{id}/ack with the control token; returns the alarm as it is now.

        Raises:
            AgentError: no control token here (status 403), the agent refused (401 wrong
                token, 403 read-only agent or read token, 404 unknown id, 409 already
                resolved), unreachable, or a bad answer; ``reason`` says which.
        """
        return await self._control_post(f"/v1/alarms/{alarm_id}/ack", {"by": by}, Alarm)

    async def guard_command(self, action: str, by: str) -> GuardReading:
        """POST /v1/guard (``hold`` or ``release``) with the control token; returns the guard's state.

        Raises:
            AgentError: no control token here (403), the agent refused (401, 403, 404 when it
                runs no guard), unreachable, or a bad answer; ``reason`` says which.
        """
        return await self._control_post("/v1/guard", {"action": action, "by": by}, GuardReading)

    async def _control_post(self, path: str, body: dict[str, str], record: type[T]) -> T:
        """POST ``body`` to ``path`` with the control token; the answer decoded as ``record``."""
        if not self.control_token:
            raise AgentError("no control token for this node in the dashboard configuration", 403)
        try:
            response = await self._http.post(path, json=body, headers={"Authorization": f"Bearer {self.control_token}"})
        except httpx.HTTPError as exc:
            raise AgentError(failure_reason(exc)) from None
        if response.status_code != 200:
            raise status_error(response, response.content)
        try:
            return decode_agent(record, response.content)
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None

    async def watch_alarms(self, wake: asyncio.Event,
                           interval_s: float | Callable[[], float]) -> AsyncIterator[AlarmList | Failed]:
        """Fetch /v1/alarms now, then every ``interval_s`` (or what it returns, asked after each
        fetch) or as soon as ``wake`` is set.

        The caller sets ``wake`` when a frame brings an ``alarm_*`` event, so a transition
        shows at once. Failures are yielded and retried after the back-off (at most
        ``interval_s`` later); never raises.
        """
        while True:
            wake.clear()
            try:
                alarms = await self.alarms()
                self.backoff.reset()
                delay = interval_s() if callable(interval_s) else interval_s
                yield alarms
            except AgentError as exc:
                # An agent without alarms (404) will not grow them: ask rarely. Any other failure
                # is retried on the back-off, never later than the next poll: the fetch an alarm
                # event asked for failing once (a timeout on a busy agent) must not leave the
                # node's alarm count a whole poll interval behind its frames.
                poll_s = interval_s() if callable(interval_s) else interval_s
                delay = self.backoff.max_s if exc.status == 404 else min(poll_s, self.backoff.next())
                yield Failed(exc.reason, delay)
            try:
                # Not asyncio.wait_for: on Python 3.11 it swallows a cancel that comes as ``wake`` is set.
                async with asyncio.timeout(delay):
                    await wake.wait()
            except TimeoutError:
                pass
