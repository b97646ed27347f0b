"""What a client sent that uvicorn's parser refused, counted and logged by the agent's connection guard."""

from __future__ import annotations

import logging
from typing import Any, Protocol

#: Warnings uvicorn's protocols log once per request about what a client sent, and what they count as
#: here: anyone who reaches the port could otherwise write lines to the agent's log at will (and under
#: systemd use up journald's rate limit for the unit, which then drops the agent's own alarm lines).
CLIENT_FAULTS = {
    "Invalid HTTP request received.": "a malformed HTTP request, answered 400,",
    "Unsupported upgrade request.": "a request to upgrade the connection (WebSocket, h2c), served without it,",
}
#: uvicorn's advice after an upgrade request, which is no advice for the agent (it serves no WebSocket).
WEBSOCKET_ADVICE = "No supported WebSocket library detected"
#: How a TLS connection starts: a handshake record (content type 22) of TLS 1.x (major version 3).
TLS_HANDSHAKE_RECORD = b"\x16\x03"
#: What a TLS handshake sent to an agent serving plain HTTP counts as: a client with an ``https://`` URL
#: (or Prometheus' ``scheme: https``) was "a malformed HTTP request", which named neither.
TLS_TO_PLAIN_HTTP = ("a TLS handshake (the client uses https://, Prometheus scheme: https; this agent serves "
                     "plain HTTP: give the client http://, or serve TLS with --tls-cert and --tls-key)")
#: What a plain HTTP request sent to an agent serving HTTPS counts as (the opposite case, answered 400 by
#: `rigmon.agent.tls_edge.TlsEdge`): curl said "empty reply from server" and Prometheus ``EOF``.
PLAIN_HTTP_TO_TLS = ("a plain HTTP request (the client uses http://, Prometheus scheme: http; this agent serves "
                     "HTTPS: give the client https://, Prometheus scheme: https and a tls_config ca_file)")


class FaultCounter(Protocol):
    """What counts client faults: `rigmon.agent.connections.ConnectionLimits`."""

    def note_client_fault(self, what: str, host: str, now: float) -> None: ...


class FaultyConnection(Protocol):
    """The connection a `ClientFaultLog` speaks for: `rigmon.agent.connections.GuardedConnection`."""

    client_host: str
    #: Whether the connection began with a TLS handshake record (`TLS_HANDSHAKE_RECORD`).
    began_with_tls: bool

    @property
    def limits(self) -> FaultCounter: ...

    @property
    def loop(self) -> Any: ...


class ClientFaultLog:
    """uvicorn's protocol logger for one connection, with its warnings about the client's request counted
    by `ConnectionLimits.note_client_fault` instead of logged one line each (`CLIENT_FAULTS`).

    Everything else (an exception in the app, uvicorn's trace lines) goes to uvicorn's logger as before.
    """

    def __init__(self, logger: logging.Logger, conn: FaultyConnection) -> None:
        self._logger = logger
        self._conn = conn

    def warning(self, msg: object, *args: Any, **kwargs: Any) -> None:
        what = CLIENT_FAULTS.get(str(msg))
        if what is not None:
            if self._conn.began_with_tls and what == CLIENT_FAULTS["Invalid HTTP request received."]:
                what = f"{TLS_TO_PLAIN_HTTP}, answered 400,"
            self._conn.limits.note_client_fault(what, self._conn.client_host, self._conn.loop.time())
        elif not str(msg).startswith(WEBSOCKET_ADVICE):
            self._logger.warning(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)
