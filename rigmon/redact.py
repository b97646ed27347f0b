"""Redaction of secrets in configuration data and free text before they leave the node (snapshots,
journal, frames).

Values under keys that name a secret (token, secret, password, key, auth, credential) are
replaced; every URL keeps only its scheme, host and port, because webhook URLs carry
their secret in the user part, the query or the path (Slack, Discord, ntfy topics). Free text
(a receiver's answer, a command's output) also loses bearer and basic credentials, curl's
``-u user:password``, ``user:password@host``, the values of ``key=``, ``token=``, ``secret=`` and
``password=`` (and of such JSON keys, and of ``password: ...`` as YAML and logs write it), and
tokens whose form gives them away (Slack's ``xoxb-...``, GitHub's ``ghp_...``, Hugging Face's ``hf_...``).
Command lines of processes are `rigmon.redact_cmdline`'s.
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
# No ``\b`` before the scheme and a bounded scheme: each start costs at most 64 steps, where an
# unbounded one rescanned a long run of letters and dashes ("a-a-a-...") from each of its word starts
# (quadratic: seconds for 20 kB). Free text is redacted whole, however long (see `redact_text`).
_URL = lazy_compile(r"[a-zA-Z][a-zA-Z0-9+.-]{0,63}://[^\s\"'<>]+")
# A value after a name: quoted (the quotes are kept), or one word of the text.
_VALUE = r"\"[^\"]*\"|'[^']*'|[^\s&;,\"'<>()\[\]{}]+"
_WORD = r"[^\s&;,\"'<>()\[\]{}]"
# A name ending in a word that says it holds a password ("pass" only as a whole part: "db_pass", not
# "compass"), or one of the other secrets.
_PASSWORD = r"(?:pass(?:w(?:or)?d|phrase)|pwd|(?<![a-z0-9])pass)"
# Names start where a run of name characters starts ((?<![\w.-])), never inside one: every start
# scans the run to its end, so starting at each of its word boundaries would be quadratic.
_NAME = r"(?<![\w.-])[\w.-]*?"
# One pass over the text for every kind of credential (alternatives, each in its own named group):
# - an Authorization header's value, whatever its scheme, to the end of the line or quote;
# - "Bearer <token>" anywhere; "Basic <base64>" where the base64 decodes to "user:password";
# - curl's ``-u user:password`` (``--user``, ``-U``/``--proxy-user``, ``-uuser:pw``, ``--user=``),
#   only with the colon (``-u name`` alone holds no password);
# - the value of a name ending in key/token/secret/password (``api_key=``, ``access_token=``,
#   ``PGPASSWORD=``, ``"client_secret": "..."``), after ``=`` or, quoted as in JSON, after ``:``;
# - the same names unquoted before ``:`` (YAML, logs, headers: ``password: hunter2``,
#   ``X-Api-Key: k1``): a password's value always, a key's, token's or secret's only when it has a
#   digit or 16 characters, as tokens do (``missing key: user_id``, ``token: expired`` are prose);
# - ``user:password@host`` without a scheme (URLs have lost theirs already), a user name starting
#   with a letter (``12:30@node1`` is a time);
# - tokens of a known form (Slack, GitHub, GitLab, Hugging Face's ``hf_...``, OpenAI-style ``sk-...``),
#   which need no name to give them away.
_CREDENTIAL = lazy_compile(
    r"(?i)(?P<header>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*)(?P<header_value>[^\r\n\"']+)"
    r"|(?P<bearer>\bbearer\s+)(?P<bearer_value>[A-Za-z0-9._~+/=-]+)"
    r"|(?P<basic>\bbasic\s+)(?P<basic_value>[A-Za-z0-9+/]{4,}={0,2})"
    r"|(?P<option>(?<![\w-])(?:-[uU](?:[ \t]+|=)?|--(?:proxy-)?user(?:[ \t]+|=)))"
    r"(?P<option_value>\"[^\"]*:[^\"]*\"|'[^']*:[^']*'|[^\s\"':]*:[^\s\"']*)"
    rf"|(?P<name>{_NAME}(?:key|token|secret|{_PASSWORD})(?:\s*=\s*|[\"']\s*[:=]\s*))(?P<name_value>{_VALUE})"
    rf"|(?P<label>{_NAME}{_PASSWORD}[ \t]*:[ \t]*)(?P<label_value>{_VALUE})"
    rf"|(?P<tag>{_NAME}(?:key|token|secret)[ \t]*:[ \t]*)(?P<tag_value>(?={_WORD}*\d|{_WORD}{{16}}){_WORD}+)"
    r"|(?<![\w.+%~-])(?P<userinfo>[a-z_][\w.+%~-]*:[^\s@:\"'<>]+)@(?=[\w\[])"
    r"|(?P<known>\b(?:xox[a-z]|xapp|glpat)-[A-Za-z0-9-]{6,}|\b(?:gh[pousr]|github_pat)_[A-Za-z0-9_]{16,}"
    r"|\bhf_[A-Za-z0-9]{30,}|\bsk-[A-Za-z0-9_-]{20,})"
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
    ``token=<redacted>``).

    Redact a text before cutting it to size, never after: a cut can part a secret from the name
    or shape that gives it away (a tail that starts inside ``token=...``, a head that ends inside
    a quoted password). Its cost grows linearly with the text's length, so a whole answer or
    output can go through it."""
    return redact_credentials(redact_urls(text))


def redact_credentials(text: str) -> str:
    """``text`` without the credentials `_CREDENTIAL` finds (see `redact_text`), its URLs left whole but
    for a ``user:password@`` part: for texts whose URLs are not secrets themselves (a command line's
    model repository), unlike a notifier's webhook."""
    return _CREDENTIAL.sub(_redact_credential, text)


def _redact_credential(m: re.Match[str]) -> str:
    if m.group("known") is not None:
        return REDACTED
    if m.group("userinfo") is not None:
        return f"{REDACTED}@"
    for kind in ("header", "bearer", "option", "name", "label", "tag"):
        if m.group(kind) is not None:
            value = m.group(f"{kind}_value")
            # A quoted value keeps its quotes (JSON stays JSON).
            quote = value[0] if kind != "header" and value[:1] in ("\"", "'") else ""
            return f"{m.group(kind)}{quote}{REDACTED}{quote}"
    # "Basic" is also an English word: only a value that decodes to "user:password" is a credential.
    try:
        decoded = base64.b64decode(m.group("basic_value"), validate=True)
    except (binascii.Error, ValueError):
        return m.group(0)
    return f"{m.group('basic')}{REDACTED}" if b":" in decoded else m.group(0)


def redact_urls(text: str) -> str:
    """Replace the user part, path, query and fragment of every URL in ``text``."""
    if "://" not in text:
        return text  # most texts: no scan at all
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
