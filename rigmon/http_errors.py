"""One plain sentence, with the fix, for a failed request to an agent (instead of httpx's text)."""

from __future__ import annotations

import json
import socket
import ssl
from urllib.parse import urlsplit

import httpx


def _address(request: httpx.Request | None) -> str:
    if request is None:
        return "the agent"
    parts = urlsplit(str(request.url))
    return f"{parts.scheme}://{parts.netloc}"


def _agent_reason(response: httpx.Response) -> str:
    """The agent's own ``{"error": ...}`` text, if the answer carries one."""
    try:
        data = json.loads(response.content[:65536])
    except (ValueError, UnicodeDecodeError):
        return ""
    reason = data.get("error") if isinstance(data, dict) else None
    return reason if isinstance(reason, str) else ""


def _status_sentence(response: httpx.Response, token_from: str | None, token_where: str | None) -> str:
    code = response.status_code
    request = response.request
    sent_token = bool(request.headers.get("authorization")) if request is not None else False
    where = _address(request)
    reason = _agent_reason(response)
    if code == 401:
        if sent_token:
            return (f"401: {where} refused the token: check that {token_from or '--token-file FILE'} holds this "
                    "agent's read token")
        if token_where:
            return f"401: this agent needs a token: give its read token {token_where}"
        return "401: this agent needs a token: --token-file FILE (the node's read token, e.g. /etc/rigmon/read.token)"
    if code == 403:
        return (f"403: {where} refused this with the token given ({reason or 'forbidden'}); acknowledging "
                "needs the agent's control token")
    if code == 404:
        return f"404: {where}{request.url.path if request else ''}: {reason or 'not found'} (is it a rigmon agent?)"
    if code == 429:
        retry = response.headers.get("retry-after")
        return f"429: {where} is rate-limiting this client; retry {'in ' + retry + ' s' if retry else 'later'}"
    if code == 503:
        return f"503: {where} cannot answer this now: {reason or 'service unavailable'}"
    if code >= 500:
        return f"{code}: {where} failed on this request: {reason or response.reason_phrase}; see the agent's log"
    return f"{code} {response.reason_phrase}: {reason or 'the agent refused the request'}"


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes (httpx wraps httpcore, which wraps the OSError)."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(out) < 10:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def describe_http_error(exc: BaseException, token_from: str | None = None, token_where: str | None = None) -> str:
    """A failed request to an agent as one sentence saying what to do.

    Covers HTTP status errors (401 without or with a wrong token, 403, 404, 429, 5xx),
    connection refused, unknown hosts, TLS failures (untrusted certificate, HTTPS spoken to
    a plain HTTP agent, plain HTTP to an HTTPS one) and timeouts. Anything else keeps its
    type and text.

    Args:
        exc: the failure.
        token_from: where the token sent was given (``--token-file /path``, or the dashboard's
            config file, node entry and key): a refused token is to be checked there. ``None``:
            the ``--token-file`` option.
        token_where: where a read token for this agent would be given, said by a 401 to a request
            that sent none (the dashboard's ``[[nodes]] token_file`` in dash.toml, or ``rigmon dash
            --token-file``). ``None``: the ``--token-file`` option (of the command that asked).
    """
    if isinstance(exc, httpx.HTTPStatusError):
        return _status_sentence(exc.response, token_from, token_where)
    request: httpx.Request | None
    try:
        request = exc.request if isinstance(exc, httpx.RequestError) else None
    except RuntimeError:
        request = None
    where = _address(request)
    text = str(exc)
    chain = _chain(exc)
    upper = " ".join(str(e) for e in chain).upper()
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out talking to {where}: the agent or the network is not answering"
    if "CERTIFICATE_VERIFY_FAILED" in upper or any(isinstance(e, ssl.SSLCertVerificationError) for e in chain):
        detail = text.split("certificate verify failed:")[-1].strip(" )") if "verify failed" in text else text
        return (f"TLS: the certificate of {where} is not trusted (CERTIFICATE_VERIFY_FAILED: {detail}); "
                "give --ca-file FILE with the CA that signed it (for `rigmon setup agent`'s own: the node's "
                "/etc/rigmon/agent.pem)")
    if "WRONG_VERSION_NUMBER" in upper or "RECORD LAYER FAILURE" in upper or "PACKET LENGTH TOO LONG" in upper:
        return f"TLS: {where} does not speak HTTPS; use http:// for this agent"
    if isinstance(exc, httpx.RemoteProtocolError) and "disconnected without sending a response" in text:
        return f"{where} closed the connection without answering: if it serves HTTPS, use https://"
    if isinstance(exc, httpx.ConnectError):
        if any(isinstance(e, ConnectionRefusedError) for e in chain) or "REFUSED" in upper:
            return (f"connection refused: no agent is listening at {where} (is it running? "
                    "`systemctl status rigmon-agent` on the node; is the port right?)")
        if any(isinstance(e, socket.gaierror) for e in chain) or "NAME OR SERVICE NOT KNOWN" in upper \
                or "NAME RESOLUTION" in upper:
            host = urlsplit(str(request.url)).hostname if request is not None else "the host"
            return f"cannot resolve the host name {host}: check the spelling, or give its address"
        return f"cannot connect to {where}: {text or type(exc).__name__}"
    if isinstance(exc, httpx.HTTPError):
        return f"{type(exc).__name__} talking to {where}: {text}"
    return f"{type(exc).__name__}: {text}"
