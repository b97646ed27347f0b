"""``rigmon check`` beside a running agent: the 12 V rail as the agent reads it.

The agent opens the rail ADC's port exclusively (no second reader may interleave its reads),
so a check on the same node cannot open it. Rather than fail the gate on a healthy node, the
check asks the agent for its newest reading (``/v1/latest`` with the agent's read token and
certificate): the agent that owns this configuration's state directory, where it recorded its address
(`rigmon.agent.state_lock.listening_agent`: it may have been started with ``--listen`` or
``--token-file``), else the one this configuration describes. When the state directory records a
running agent, the check does not open the port at all (`PortOfRunningAgent`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from rigmon.agent.state_lock import LOCK_FILE, listening_agent
from rigmon.collectors.base import CollectorError, PushFn
from rigmon.config import AgentConfig, default_state_dir, local_url, setting_origin
from rigmon.schema import AlarmList, Frame, PsuRailReading, decode

if TYPE_CHECKING:
    import ssl

#: Seconds the check waits for the agent's answer.
AGENT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class AgentToAsk:
    """The agent the check asks, and what named each of its files (for an error about one).

    Attributes:
        url: its base URL.
        token_file: its read token's file, ``""`` without one.
        tls_cert_file: its certificate, ``""`` without TLS.
        token_origin: what named ``token_file`` (``--config``'s key, ``environment RIGMON_AGENT_TOKEN_FILE``,
            or the running agent's record).
        cert_origin: what named ``tls_cert_file``.
    """

    url: str
    token_file: str
    tls_cert_file: str
    token_origin: str
    cert_origin: str
    recorded: bool = False
    """Whether the address is the one the running agent recorded (else the configuration's)."""


class PortOfRunningAgent:
    """The check's ``psu`` collector beside the running agent of its state directory: it never opens the
    rail ADC's port, which that agent reads, and fails every pass as "busy", so that the check takes the
    agent's reading (`rigmon.agent.check.run_check`, as for a port another process holds).

    Opening the port whenever the agent's reader let it go (the seconds of its reopen backoff after the
    ADC was unplugged or reset, or after a start) kept the agent from the ADC for the whole check: the
    agent missed those windows and its ``psu`` collector failed on, while the check read the rail itself.

    Args:
        state_dir: the state directory whose lock file records the agent (said in the error).
    """

    name = "psu"
    port_busy = True

    def __init__(self, state_dir: str) -> None:
        self._state_dir = state_dir

    def start(self, push: PushFn) -> None:
        """Nothing to start: the agent reads the port."""

    def collect(self) -> Sequence[object]:
        """Raises `CollectorError` always: the reading is the agent's."""
        raise CollectorError(f"psu.port: not opened: the running agent recorded in {self._state_dir}/{LOCK_FILE} "
                             "reads the rail ADC")

    def close(self) -> None:
        """Nothing to release."""


def running_agent_reads_port(config: AgentConfig) -> bool:
    """Whether a rail ADC or meter is configured and a running agent recorded its address in the state
    directory of ``config`` (`listening_agent`): that agent holds, or is about to take again, the port."""
    return bool(config.psu.port) and listening_agent(config.agent.state_dir or str(default_state_dir())) is not None


def agent_to_ask(config: AgentConfig, config_path: str | None = None) -> AgentToAsk:
    """The running agent of ``config``'s state directory (the default one when it names none) where it
    recorded its address, else the agent ``config`` describes.

    Args:
        config_path: the configuration file given to the check (``None``: /etc/rigmon/agent.toml when it
            exists), to name the key an error is about.

    Raises:
        ValueError: no recorded agent, and ``agent.listen`` is not an address.
    """
    agent = config.agent
    state_dir = agent.state_dir or str(default_state_dir())
    running = listening_agent(state_dir)
    if running is not None:
        recorded = f"the running agent's (recorded in {state_dir}/{LOCK_FILE})"
        return AgentToAsk(running.url, running.token_file, running.tls_cert_file,
                          f"token file {recorded}", f"certificate {recorded}", recorded=True)
    return AgentToAsk(local_url(agent.listen, bool(agent.tls_cert_file)), agent.token_file, agent.tls_cert_file,
                      setting_origin("token_file", None, config_path), setting_origin("tls_cert_file", None, config_path))


def where_to_look(config: AgentConfig, agent: AgentToAsk) -> str:
    """Said after "did not answer" when the address was the configuration's: that no running agent recorded
    one in the state directory the check read, and how to name another (an agent started with its own
    ``--state-dir``); ``""`` for a recorded address."""
    if agent.recorded:
        return ""
    state_dir = config.agent.state_dir or str(default_state_dir())
    return (f" (no running agent recorded its address in {state_dir}/{LOCK_FILE}; for an agent on another state "
            "directory, give it: rigmon check --state-dir DIR)")


def read_credentials(agent: AgentToAsk) -> tuple[dict[str, str], ssl.SSLContext | bool]:
    """The headers (its read token) and the TLS verification (its certificate) to ask ``agent`` with.

    Raises:
        StartupError: the token file or the certificate cannot be read (named by what set it).
    """
    import ssl

    from rigmon.agent.server import StartupError, read_token_file

    headers: dict[str, str] = {}
    verify: ssl.SSLContext | bool = True
    if agent.token_file:
        headers["Authorization"] = f"Bearer {read_token_file(agent.token_file, agent.token_origin)}"
    if agent.tls_cert_file:
        try:
            verify = ssl.create_default_context(cafile=agent.tls_cert_file)
        except (OSError, ssl.SSLError) as exc:
            raise StartupError(f"{agent.cert_origin} {agent.tls_cert_file}: {exc}") from None
    return headers, verify


R = TypeVar("R", Frame, AlarmList)


def ask_agent(agent: AgentToAsk, path: str, kind: type[R], noun: str, node: str, timeout_s: float,
              unreachable_hint: str = "") -> R | str:
    """``agent``'s answer to ``GET path`` as a ``kind`` record of node ``node``, or why there is none (a
    sentence naming the agent: its credentials unreadable by this user, no answer, an error status with
    the agent's own words, not a ``noun``, another node's).

    Args:
        unreachable_hint: said after "did not answer" (where to look for the agent's address).
    """
    import httpx

    from rigmon.agent.server import StartupError

    url = agent.url
    try:
        headers, verify = read_credentials(agent)
    except StartupError as exc:
        return f"this user cannot ask the agent at {url}: {exc}"
    try:
        answer = httpx.get(f"{url}{path}", headers=headers, verify=verify, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"the agent at {url} did not answer: {exc}{unreachable_hint}"
    if answer.status_code != 200:
        return f"the agent at {url} answered {answer.status_code}{_said(answer.content)}"
    try:
        got = decode(kind, answer.content)
    except ValueError as exc:
        return f"the agent at {url} sent no {noun}: {exc}"
    if got.node != node:
        return f"the agent at {url} is node {got.node!r}, not {node!r}"
    return got


def _said(body: bytes) -> str:
    """``: <its error>`` of an agent's JSON error answer (``alarms are not enabled on this agent``), else ``""``."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    return f": {error}" if isinstance(error, str) and error else ""


def rail_from_agent(config: AgentConfig, timeout_s: float = AGENT_TIMEOUT_S,
                    config_path: str | None = None) -> PsuRailReading | str:
    """The newest rail reading of the agent on this node (`agent_to_ask`), or why there is none (a sentence)."""
    try:
        agent = agent_to_ask(config, config_path)
    except ValueError as exc:
        return f"no agent address to ask: {exc}"
    frame = ask_agent(agent, "/v1/latest", Frame, "frame", config.node_name, timeout_s,
                      unreachable_hint=where_to_look(config, agent))
    if isinstance(frame, str):
        return frame
    if frame.readings.psu_rail is None or not frame.readings.psu_rail.connected:
        # Its ADC's port gone, the agent's reading only says so (``connected`` false): no rail to check.
        status = frame.collectors.get("psu")
        why = f"{status.state}: {status.error}" if status is not None and status.error else "none in its frame"
        return f"the agent at {agent.url} has no rail reading ({why})"
    return frame.readings.psu_rail
