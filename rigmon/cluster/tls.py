"""TLS contexts for dashboard clients of agents, shared process-wide (one per CA file)."""

from __future__ import annotations

import os
import ssl
import threading

import httpx

_TLS_LOCK = threading.Lock()
#: TLS contexts shared by every client of this process: one per CA file (``None``: httpx's default
#: store). Building one loads a CA bundle (~20 ms of CPU), once per client before.
_TLS_CONTEXTS: dict[str | None, ssl.SSLContext] = {}
#: The context handed to clients of ``http://`` agents, which never use one (httpx wants one at
#: construction): it loads no CA, so it would refuse any TLS peer if one were ever reached.
_PLAIN: list[ssl.SSLContext] = []


def tls_context(url: str, ca_file: str | None = None) -> ssl.SSLContext:
    """The TLS context for an agent at ``url``, shared with every other client that needs the same one.

    ``https://`` agents share one context per CA file (``None``: the store httpx verifies with by
    default); ``http://`` agents all get one context that loads no CA.

    Raises:
        OSError: ``ca_file`` cannot be read.
        ssl.SSLError: ``ca_file`` holds no usable certificate.
    """
    with _TLS_LOCK:
        if not url.lower().startswith("https://"):
            if not _PLAIN:
                _PLAIN.append(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
            return _PLAIN[0]
        key = os.path.abspath(ca_file) if ca_file else None
        context = _TLS_CONTEXTS.get(key)
        if context is None:
            context = ssl.create_default_context(cafile=key) if key else httpx.create_ssl_context()
            _TLS_CONTEXTS[key] = context
        return context

