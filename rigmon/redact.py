"""Redaction of secrets in configuration data before it leaves the node (snapshots, journal).

Values under keys that name a secret (token, secret, password, key, auth, credential) are
replaced; every URL keeps only its scheme, host and port, because webhook URLs carry
their secret in the user part, the query or the path (Slack, Discord, ntfy topics).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from rigmon.lazy_re import lazy_compile

REDACTED = "<redacted>"

_SECRET_KEY = lazy_compile(r"(?i)(token|secret|passw|api[_-]?key|private[_-]?key|auth|credential|cookie)")
#: A command-line option without a value (``-u``, ``--silent``): safe to show.
_FLAG = lazy_compile(r"-{1,2}[A-Za-z0-9][A-Za-z0-9-]*")
# Paths of files holding secrets are not secrets themselves; their content never enters the data.
_PATH_KEY = lazy_compile(r"_(file|path|dir)$")
_URL = lazy_compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>]+")


def redact(data: Any, key: str = "") -> Any:
    """Return a copy of JSON-shaped ``data`` with secrets replaced by ``<redacted>``.

    Besides keys that name a secret and URLs: every value of a ``headers`` table (API keys
    hide under any header name), and every argument of a ``command`` list but the program
    and bare options (``curl -u user:password`` carries its secret as an argument).
    """
    if isinstance(data, dict):
        if key == "headers":
            return {k: REDACTED if isinstance(v, str) and v else redact(v, str(k)) for k, v in data.items()}
        return {k: redact(v, str(k)) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        if key == "command" and data and all(isinstance(v, str) for v in data):
            return [redact_urls(data[0]), *(v if _FLAG.fullmatch(v) else REDACTED for v in data[1:])]
        return [redact(v, key) for v in data]
    if isinstance(data, str):
        if data and _SECRET_KEY.search(key) and not _PATH_KEY.search(key):
            return REDACTED
        return redact_urls(data)
    return data


def redact_urls(text: str) -> str:
    """Replace the user part, path, query and fragment of every URL in ``text``."""
    return _URL.sub(lambda m: _redact_url(m.group(0)), text)


def _redact_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return REDACTED
    if ":" in host:
        host = f"[{host}]"
    out = f"{parts.scheme}://"
    if parts.username is not None or parts.password is not None:
        out += f"{REDACTED}@"
    out += host + (f":{port}" if port is not None else "")
    if parts.path.strip("/") or parts.query or parts.fragment:
        out += f"/{REDACTED}"
    return out
