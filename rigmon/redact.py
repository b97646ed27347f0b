"""Redaction of secrets in configuration data and free text before they leave the node (snapshots,
journal, frames).

Values under keys that name a secret (token, secret, password, key, auth, credential) are
replaced; every URL keeps only its scheme, host and port, because webhook URLs carry
their secret in the user part, the query or the path (Slack, Discord, ntfy topics). Free text
(a receiver's answer, a command's output) also loses bearer and basic credentials, the values of
``key=``, ``token=``, ``secret=`` and ``password=`` (and of such JSON keys), and tokens whose
form gives them away (Slack's ``xoxb-...``, GitHub's ``ghp_...``).
"""

from __future__ import annotations

import base64
import binascii
import re
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
# One pass over the text for every kind of credential (alternatives, each in its own named group):
# - an Authorization header's value, whatever its scheme, to the end of the line or quote;
# - "Bearer <token>" anywhere; "Basic <base64>" where the base64 decodes to "user:password";
# - the value of a name ending in key/token/secret/password (``api_key=``, ``access_token=``,
#   ``"client_secret": "..."``), after ``=`` or, quoted as in JSON, after ``:``;
# - tokens of a known form (Slack, GitHub, GitLab), which need no name to give them away.
_CREDENTIAL = lazy_compile(
    r"(?i)(?P<header>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*)(?P<header_value>[^\r\n\"']+)"
    r"|(?P<bearer>\bbearer\s+)(?P<bearer_value>[A-Za-z0-9._~+/=-]+)"
    r"|(?P<basic>\bbasic\s+)(?P<basic_value>[A-Za-z0-9+/]{4,}={0,2})"
    r"|(?P<name>\b[\w.-]*(?:key|token|secret|passw(?:or)?d|pwd)(?:\s*=\s*|[\"']\s*[:=]\s*))"
    r"(?P<name_value>\"[^\"]*\"|'[^']*'|[^\s&;,\"'<>()\[\]{}]+)"
    r"|(?P<known>\b(?:xox[a-z]|xapp|glpat)-[A-Za-z0-9-]{6,}|\b(?:gh[pousr]|github_pat)_[A-Za-z0-9_]{16,})"
)


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


def redact_text(text: str) -> str:
    """``text`` (a receiver's answer, a command's output) without the secrets it may hold: every URL
    as `redact_urls` leaves it, and credentials as `_CREDENTIAL` finds them, each replaced by
    ``<redacted>`` (the name or scheme before it is kept: ``Authorization: <redacted>``,
    ``token=<redacted>``)."""
    return _CREDENTIAL.sub(_redact_credential, redact_urls(text))


def _redact_credential(m: re.Match[str]) -> str:
    if m.group("known") is not None:
        return REDACTED
    for kind in ("header", "bearer", "name"):
        if m.group(kind) is not None:
            value = m.group(f"{kind}_value")
            # A quoted value keeps its quotes (JSON stays JSON).
            quote = value[0] if kind == "name" and value[:1] in ("\"", "'") else ""
            return f"{m.group(kind)}{quote}{REDACTED}{quote}"
    # "Basic" is also an English word: only a value that decodes to "user:password" is a credential.
    try:
        decoded = base64.b64decode(m.group("basic_value"), validate=True)
    except (binascii.Error, ValueError):
        return m.group(0)
    return f"{m.group('basic')}{REDACTED}" if b":" in decoded else m.group(0)


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
