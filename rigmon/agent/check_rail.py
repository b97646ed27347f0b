"""``rigmon check`` beside a running agent: the 12 V rail as the agent reads it.

The agent opens the rail ADC's port exclusively (no second reader may interleave its reads),
so a check on the same node cannot open it. Rather than fail the gate on a healthy node, the
check asks the agent this configuration describes for its newest reading (``/v1/latest`` with
the agent's read token and certificate).
"""

from __future__ import annotations

from rigmon.config import AgentConfig, local_url
from rigmon.schema import Frame, PsuRailReading, decode

#: Seconds the check waits for the agent's answer.
AGENT_TIMEOUT_S = 5.0


def rail_from_agent(config: AgentConfig, timeout_s: float = AGENT_TIMEOUT_S) -> PsuRailReading | str:
    """The newest rail reading of the agent on this node, or why there is none (a sentence)."""
    import ssl

    import httpx

    from rigmon.agent.server import StartupError, read_token_file

    agent = config.agent
    try:
        url = local_url(agent.listen, bool(agent.tls_cert_file))
    except ValueError as exc:
        return f"no agent address to ask: {exc}"
    headers: dict[str, str] = {}
    verify: ssl.SSLContext | bool = True
    try:
        if agent.token_file:
            headers["Authorization"] = f"Bearer {read_token_file(agent.token_file)}"
        if agent.tls_cert_file:
            verify = ssl.create_default_context(cafile=agent.tls_cert_file)
    except (StartupError, OSError, ssl.SSLError) as exc:
        return f"the agent at {url} holds it, and this user cannot ask it: {exc}"
    try:
        answer = httpx.get(f"{url}/v1/latest", headers=headers, verify=verify, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"the agent at {url} did not answer: {exc}"
    if answer.status_code != 200:
        return f"the agent at {url} answered {answer.status_code}"
    try:
        frame = decode(Frame, answer.content)
    except ValueError as exc:
        return f"the agent at {url} sent no frame: {exc}"
    if frame.node != config.node_name:
        return f"the agent at {url} is node {frame.node!r}, not {config.node_name!r}"
    if frame.readings.psu_rail is None:
        status = frame.collectors.get("psu")
        why = f"{status.state}: {status.error}" if status is not None and status.error else "none in its frame"
        return f"the agent at {url} has no rail reading ({why})"
    return frame.readings.psu_rail
