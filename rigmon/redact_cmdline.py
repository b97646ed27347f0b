"""Redaction of the secrets in a process's command line (``/proc/PID/cmdline``) before it enters a record.

A training job's command line often carries its credentials: ``--hf-token=hf_...``, ``--wandb-key KEY``,
``HF_TOKEN=... python train.py`` (through ``env`` or a shell), a Hydra override ``wandb.api_key=...``,
``https://user:password@host/repo``. The GPU processes collector redacts each process's arguments here,
so no frame, journal, dashboard, ``/metrics`` label or snapshot holds them; snapshots redact the frames
of older agents the same way. Each secret becomes ``<redacted>``; option names, paths, model names and
numbers stay as they were.

An option or assignment holds a secret when the last word of its name is one (``token``, ``secret``,
``password``, ``passwd``, ``pass``, ``passphrase``, ``auth``, ``credential(s)``, ``creds``, ``cookie``,
``signature``, ``key``, ``apikey``; or ends in ``token``, ``secret``, ``password``, ``apikey``:
``--hftoken``), its words split at ``-``, ``_``, ``.`` and camelCase. Whole words only:
``--tokenizer gpt2``, ``--max-tokens 512``, ``--keep-last``, ``--key-file PATH`` are no secrets; nor is
``key`` after a word that makes it a data key (``--text-key text``, ``--sort-key``), nor a boolean
``--no-auth``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from rigmon.lazy_re import lazy_compile
from rigmon.redact import REDACTED, redact_credentials

#: Last words of a name that say its value is a secret.
SECRET_WORDS = frozenset({"token", "secret", "secrets", "password", "passwd", "pass", "passphrase", "pwd", "auth",
                          "credential", "credentials", "creds", "cookie", "signature", "key", "apikey"})
#: Endings of a last word that say so too (``hftoken``, ``dbpassword``, ``wandbapikey``).
SECRET_ENDINGS = ("token", "secret", "password", "passwd", "apikey", "accesskey")
#: Words before ``key`` that make it the name of a data field or a setting, not a credential.
DATA_KEY_WORDS = frozenset({"sort", "group", "primary", "partition", "cache", "dict", "map", "join", "index",
                            "label", "labels", "text", "input", "output", "image", "target", "column", "field",
                            "metric", "data", "dataset", "audio", "video", "feature", "prompt", "response",
                            "answer", "context", "question", "reward", "value", "foreign", "lookup", "shard",
                            "batch", "model", "state", "config", "hot", "sample", "message", "messages",
                            "chosen", "rejected", "conversation", "conversations", "instruction", "query"})
#: First words of a boolean option that switches something off (``--no-auth``): no value follows.
OFF_WORDS = frozenset({"no", "disable", "without", "skip"})
#: curl's options whose ``user:password`` value is a secret (``-u``, ``--user``, ``-U``, ``--proxy-user``).
USER_OPTIONS = frozenset({"-u", "-U", "--user", "--proxy-user"})
#: Distinct command lines whose redaction is remembered (the collector redacts each process's on every poll).
CACHE_SIZE = 1024

_CAMEL = lazy_compile(r"([a-z0-9])([A-Z])")
_WORD_SPLIT = lazy_compile(r"[-_.]+")
# ``NAME=value`` as env(1), a shell or Hydra (``+trainer.x=1``, ``~key``) write it.
_ASSIGNMENT = lazy_compile(r"[+~]*[A-Za-z_][\w.-]*")
# A URL's user part, with or without a password (``https://ghp_x@github.com``: a token alone is one too).
_URL_USER = lazy_compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]{0,63}://)(?P<user>[^\s/@\"'<>?#]+)@")
# A parameter of a URL's query (``?token=...&x-amz-signature=...``).
_QUERY_PARAM = lazy_compile(r"(?P<sep>[?&;])(?P<name>[^=&;#\s]+)=(?P<value>[^&;#\s\"'<>]*)")
_SPACE = lazy_compile(r"(\s+)")


def secret_name(name: str) -> bool:
    """Whether an option's or variable's ``name`` (``--hf-token``, ``WANDB_API_KEY``, ``db.password``)
    says its value is a secret (see the module)."""
    words = [w for w in _WORD_SPLIT.split(_CAMEL.sub(r"\1_\2", name.lstrip("-+~")).lower()) if w]
    if not words or words[0] in OFF_WORDS:
        return False
    last = words[-1]
    if last == "pwd" and len(words) == 1:
        return False  # PWD, --pwd: the working directory
    if last == "key":
        return len(words) == 1 or words[-2] not in DATA_KEY_WORDS
    return last in SECRET_WORDS or last.endswith(SECRET_ENDINGS)


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` with the secrets of its arguments replaced by ``<redacted>``: the value of a secret option
    (``--hf-token=<redacted>``, ``--api-key <redacted>``) or assignment (``HF_TOKEN=<redacted>``), a URL's
    user part (``https://<redacted>@host/path``) and secret query values, curl's ``-u user:password``, and
    what `rigmon.redact.redact_credentials` finds in any argument (bearer tokens, tokens of a known form:
    ``hf_...``, ``ghp_...``). An argument holding spaces (``sh -c "..."``) is redacted word by word. The
    program (``argv[0]``) loses only URL credentials."""
    return _redact_cached(tuple(argv))


@functools.lru_cache(maxsize=CACHE_SIZE)
def _redact_cached(argv: tuple[str, ...]) -> tuple[str, ...]:
    if not argv:
        return argv
    if _SPACE.search(argv[0]):
        # A process that rewrote its argv (setproctitle) may hold its whole command line in argv[0].
        return (*_redact_args(argv[:1], nested=False), *_redact_args(argv[1:], nested=False))
    return (scrub(argv[0]), *_redact_args(argv[1:], nested=False))


def _redact_args(args: Sequence[str], nested: bool) -> list[str]:
    out: list[str] = []
    pending: str | None = None  # the secret option whose value comes next
    for arg in args:
        if pending is not None and arg and not (arg.startswith("-") and len(arg) > 1):
            secret = pending != "user" or ":" in arg
            pending = None
            if secret:
                out.append(REDACTED)
                continue
        pending = None
        if arg.startswith("-") and len(arg) > 1:
            name, eq, value = arg.partition("=")
            if eq:
                user = name in USER_OPTIONS and ":" in value
                out.append(f"{name}={REDACTED if user else _value(name, value)}")
                continue
            if arg in USER_OPTIONS:
                pending = "user"
            elif secret_name(arg):
                pending = "secret"
            out.append(scrub(arg))
            continue
        name, eq, value = arg.partition("=")
        if not nested and _SPACE.search(arg):
            # A shell's command (sh -c "HF_TOKEN=... python train.py --api-key ..."): its words, spaces kept.
            parts = _SPACE.split(arg)
            words = _redact_args(parts[0::2], nested=True)
            out.append("".join(w + s for w, s in zip(words, [*parts[1::2], ""], strict=True)))
        elif eq and _ASSIGNMENT.fullmatch(name):
            out.append(f"{name}={_value(name, value)}")
        else:
            out.append(scrub(arg))
    return out


def _value(name: str, value: str) -> str:
    """The value of ``name=value``: hidden whole when the name says it is a secret."""
    return REDACTED if value and secret_name(name) else scrub(value)


def scrub(text: str) -> str:
    """``text`` (one argument) without the credentials it holds whatever option it belongs to: a URL's
    user part and secret query values, and what `rigmon.redact.redact_credentials` finds."""
    if "://" in text:
        text = _URL_USER.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    if "=" in text:
        text = _QUERY_PARAM.sub(_query_param, text)
    return redact_credentials(text)


def _query_param(m: re.Match[str]) -> str:
    if m.group("value") and secret_name(m.group("name")):
        return f"{m.group('sep')}{m.group('name')}={REDACTED}"
    return m.group(0)


def redact_command_text(text: str) -> str:
    """A command line already joined with spaces (a reading's ``cmdline`` or short ``command``, as agents
    before this redaction wrote them) redacted as `redact_argv` redacts its words. Idempotent: a redacted
    line comes back unchanged."""
    return " ".join(redact_argv(text.split(" "))) if text else text
