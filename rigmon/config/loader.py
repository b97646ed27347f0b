"""The whole agent configuration (`AgentConfig`), loaded from TOML with RIGMON_AGENT_* environment overrides."""

from __future__ import annotations

import os
import socket
import tomllib
from collections.abc import Mapping
from types import UnionType
from typing import Any, Union, get_args, get_origin

import msgspec

from rigmon.config.agent import AgentSection, CollectorSection
from rigmon.config.alarms import AlarmsSection
from rigmon.config.common import ConfigError, config_file_in_use
from rigmon.config.gpu import GpuSection, KernelLogSection
from rigmon.config.guard import GuardSection
from rigmon.config.journal import JournalSection
from rigmon.config.notify import NotifySection
from rigmon.config.probes import PeerSection, ProbesSection
from rigmon.config.psu import PsuSection
from rigmon.config.storage import StorageSection
from rigmon.typed import TypedDataError, field_types, from_data, record_fields


class AgentConfig(msgspec.Struct, frozen=True, gc=False):
    """The whole agent configuration file.

    Every section is a frozen `msgspec.Struct` (cheaper to define at the agent's start than a
    dataclass), built and checked by `rigmon.typed.from_data`; change a copy with
    `msgspec.structs.replace`. ``gc=False``: frozen, holding only plain values and other
    sections, a section cannot be part of a reference cycle.
    """

    agent: AgentSection = msgspec.field(default_factory=AgentSection)
    collectors: dict[str, CollectorSection] = msgspec.field(default_factory=dict)
    storage: StorageSection = msgspec.field(default_factory=StorageSection)
    gpu: GpuSection = msgspec.field(default_factory=GpuSection)
    kernel_log: KernelLogSection = msgspec.field(default_factory=KernelLogSection)
    alarms: AlarmsSection = msgspec.field(default_factory=AlarmsSection)
    notify: tuple[NotifySection, ...] = ()
    psu: PsuSection = msgspec.field(default_factory=PsuSection)
    journal: JournalSection = msgspec.field(default_factory=JournalSection)
    guard: GuardSection = msgspec.field(default_factory=GuardSection)
    probes: ProbesSection = msgspec.field(default_factory=ProbesSection)
    peers: tuple[PeerSection, ...] = ()
    """``[[peers]]``: nodes to probe (and to answer); none: probes are off."""

    def __post_init__(self) -> None:
        names = [p.name for p in self.peers]
        for index, name in enumerate(names):
            if names.index(name) != index:
                raise ValueError(f"peers[{index}].name: {name!r} appears twice")
            for number, path in enumerate(self.peers[index].paths):
                if path.target_port(self.probes) == 0:
                    raise ValueError(f"peers[{index}].paths[{number}].port: needed when [probes] port = 0")

    @property
    def node_name(self) -> str:
        """The node's name: configured, else the host name."""
        return self.agent.node or socket.gethostname()

    @property
    def probed_peers(self) -> tuple[PeerSection, ...]:
        """The ``[[peers]]`` this node probes and answers: all but an entry named as this node.

        One file listing every node of the lab is meant to be copied unchanged to each of them: each
        node skips itself (probing its own responder would read a loopback round trip as a link's).
        """
        name = self.node_name
        return tuple(p for p in self.peers if p.name != name)

    @property
    def own_peer_note(self) -> str | None:
        """What the agent and ``rigmon check`` say when ``[[peers]]`` lists this node; ``None`` when it does not."""
        name = self.node_name
        if all(p.name != name for p in self.peers):
            return None
        return (f"[[peers]] lists this node ({name}): skipped, not probed (the same peers file serves "
                "every node of the lab)")

    def collector(self, name: str) -> CollectorSection:
        """Settings of one collector (defaults when not configured)."""
        return self.collectors.get(name, CollectorSection())


# Environment overrides: RIGMON_<SECTION>_<KEY>, for the scalar keys of [agent].
_ENV_PREFIX = "RIGMON_AGENT_"


def load_agent_config(
    path: str | os.PathLike[str] | None,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
    options: Mapping[str, str] | None = None,
) -> AgentConfig:
    """Load the agent configuration.

    Args:
        path: TOML file; ``None`` uses /etc/rigmon/agent.toml when it exists, else defaults.
        overrides: ``[agent]`` keys set on the command line (win over file and environment).
        environ: environment for ``RIGMON_AGENT_<KEY>`` overrides (e.g. RIGMON_AGENT_LISTEN).
        options: the command-line option that set each key of ``overrides`` (``{"listen": "--listen"}``),
            named by an error about its value instead of ``command line (listen)``.

    Raises:
        ConfigError: unreadable file, bad TOML, unknown key or bad value, naming the key.
    """
    data: dict[str, object] = {}
    source = "defaults"
    path = config_file_in_use(path)
    if path is not None:
        source = str(path)
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
    agent = data.get("agent", {})
    if not isinstance(agent, dict):
        raise ConfigError(f"{source}: agent: expected a table")
    _check_absolute_paths(data, source)
    env = _env_overrides(environ if environ is not None else os.environ)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    _check_tls_pair(agent, env, given, source, options or {})
    try:
        return from_data(AgentConfig, {**data, "agent": {**agent, **env, **given}}, strict=True)
    except TypedDataError as exc:
        # A check of the whole file (`AgentConfig.__post_init__`) names its keys itself: no "<root>".
        detail = exc.reason if exc.path == "<root>" else _keyed(exc)
        raise ConfigError(f"{_blame(data, agent, env, given, source, options or {})}: {detail}") from None


def _keyed(exc: TypedDataError) -> str:
    """``exc`` with the key a section's own check names put on its path: ``psu.baud must be positive``.

    A section's ``__post_init__`` refuses a value by the key's name (``baud must be positive``), which the
    decoder puts after the section's path: ``psu: baud must be ...`` named the section, not the key as
    every other error does (``psu.port: expected a string``). ``notify[0]: command: the program ...``
    becomes ``notify[0].command: the program ...``, and a key of a table in the section likewise
    (``psu: scale.V: no channel V`` becomes ``psu.scale.V: no channel V``).
    """
    word, _, rest = exc.reason.partition(" ")
    key = word.removesuffix(":").partition(".")[0]
    section = _record_at(exc.path)
    if section is not None and rest and key in field_types(section):
        return f"{exc.path}.{word} {rest}"
    return str(exc)


def _record_at(path: str) -> Any:
    """The section type at a decoder's ``path`` of the file (``psu``, ``notify[0]``, ``peers[1].paths[0]``,
    ``collectors.gpu``), ``None`` when the path leads elsewhere."""
    tp: Any = AgentConfig
    key_next = False  # the token after a table of sections (``[collectors.gpu]``) is its key
    for token in path.split("."):
        if not key_next:
            types = field_types(tp) if record_fields(tp) is not None else {}
            name = token.partition("[")[0]
            if name not in types:
                return None
            tp = types[name]
        tp, key_next = _element(tp)
    return tp if record_fields(tp) is not None else None


def _element(tp: Any) -> tuple[Any, bool]:
    """What a field holds: a tuple's items, an optional's value, a table's values (and ``True``: keyed)."""
    while True:
        origin, args = get_origin(tp), get_args(tp)
        if origin in (tuple, list) and args:
            tp = args[0]
        elif origin is dict and len(args) == 2:
            return args[1], True
        elif origin in (Union, UnionType) and len([a for a in args if a is not type(None)]) == 1:
            tp = next(a for a in args if a is not type(None))
        else:
            return tp, False


#: Keys of the file that name a file or directory of this machine, by section.
FILE_PATH_KEYS: dict[str, tuple[str, ...]] = {
    "agent": ("token_file", "control_token_file", "root", "state_dir", "tls_cert_file", "tls_key_file"),
    "alarms": ("rules_file",),
    "probes": ("key_file",),
}


def _check_absolute_paths(data: Mapping[str, object], source: str) -> None:
    """Refuse a relative path written in the file (command-line flags and environment variables stay
    relative to the directory the command runs in, as a shell user expects).

    A relative path was taken from the agent's working directory, which is not the file's: the
    operator's shell when tried by hand, ``/`` under systemd. So a ``token_file = "read.token"`` that
    worked in a terminal failed the service, and ``state_dir = "journal"`` put the flight recorder
    in whatever directory the agent happened to be started from.

    Raises:
        ConfigError: naming the file, the key and the value.
    """
    for section, keys in FILE_PATH_KEYS.items():
        table = data.get(section)
        if not isinstance(table, dict):
            continue  # not a table: from_data names the key
        for key in keys:
            value = table.get(key)
            if isinstance(value, str) and value and not os.path.isabs(value):
                raise ConfigError(f"{source}: {section}.{key}: {value!r} is not an absolute path; give it whole, "
                                  "from / (a relative one would be taken from the directory the agent runs in, "
                                  "which is / under systemd, not this file's)")


#: The two halves of HTTPS: each key, what it names, and its other half.
_TLS_PAIR = {"tls_cert_file": ("a certificate", "tls_key_file", "its private key"),
             "tls_key_file": ("a private key", "tls_cert_file", "its certificate")}


def _check_tls_pair(agent: Mapping[str, object], env: Mapping[str, object], given: Mapping[str, object],
                    source: str, options: Mapping[str, str]) -> None:
    """Refuse one half of HTTPS without the other, saying how to give the missing half the way the
    operator gave the first: ``--tls-cert`` asks for ``--tls-key``, the environment for its variable, the
    file for its key. (The check of the section said ``agent.tls_cert_file and tls_key_file go
    together`` to an operator who had typed ``--tls-cert``.)

    Raises:
        ConfigError: naming where the half in force was given and what to add.
    """
    merged = {**agent, **env, **given}
    halves = {key: merged.get(key) for key in _TLS_PAIR}
    if not all(v is None or isinstance(v, str) for v in halves.values()):
        return  # not a string: the decoder names the key
    present = [key for key, value in halves.items() if value]
    if len(present) != 1:
        return
    key = present[0]
    what, other, its = _TLS_PAIR[key]
    variable, other_variable = f"{_ENV_PREFIX}{key.upper()}", f"{_ENV_PREFIX}{other.upper()}"
    if given.get(key):
        origin, add = options.get(key) or f"command line ({key})", f"give {options.get(other) or other} too"
    elif env.get(key):
        origin, add = f"environment {variable}", f"set {other_variable} (or agent.{other}) too"
    else:
        origin, add = f"{source}: agent.{key}", f"set agent.{other} too"
    raise ConfigError(f"{origin}: {what} serves HTTPS only with {its}: {add}")


def _blame(data: dict[str, object], agent: dict[str, object], env: Mapping[str, object],
           given: Mapping[str, object], source: str, options: Mapping[str, str]) -> str:
    """Where the bad value came from: the file (or the defaults), else the first environment variable or
    command-line value (by its option, when ``options`` names it) that makes a good configuration bad.
    Runs only after a failed load."""
    merged = dict(agent)
    steps: list[tuple[str, Mapping[str, object]]] = [(source, {})]
    steps += [(f"environment {_ENV_PREFIX}{k.upper()}", {k: v}) for k, v in env.items()]
    steps += [(options.get(k) or f"command line ({k})", {k: v}) for k, v in given.items()]
    for origin, values in steps:
        merged.update(values)
        try:
            from_data(AgentConfig, {**data, "agent": merged}, strict=True)
        except TypedDataError:
            return origin
    return source


def setting_origin(key: str, option: str | None, path: str | os.PathLike[str] | None,
                   environ: Mapping[str, str] | None = None) -> str:
    """Where the ``[agent]`` setting ``key`` in force was given, named as the operator gave it, for an error
    about its value (a token file, a certificate): ``option`` when it was given on the command line, else
    the environment variable ``RIGMON_AGENT_<KEY>``, else the file's key (in that order of precedence).

    An error that named the key alone (``token_file /x: No such file``) sent an operator who had typed
    ``--token-file /x`` looking for a file that does not set it.

    Args:
        key: the ``[agent]`` key (``token_file``).
        option: the command-line option that set it (``--token-file``); ``None`` when it was not given.
        path: the configuration file given (``None``: /etc/rigmon/agent.toml when it exists).
        environ: the environment (default ``os.environ``).

    Returns:
        ``--token-file``, ``environment RIGMON_AGENT_TOKEN_FILE``, ``/etc/rigmon/agent.toml: agent.token_file``,
        or ``agent.token_file`` when no file is in use.
    """
    env = os.environ if environ is None else environ
    if option:
        return option
    variable = f"{_ENV_PREFIX}{key.upper()}"
    if env.get(variable):
        return f"environment {variable}"
    file = config_file_in_use(path)
    return f"agent.{key}" if file is None else f"{file}: agent.{key}"


def _env_overrides(environ: Mapping[str, str]) -> dict[str, object]:
    fields = {f.name: f.type for f in record_fields(AgentSection) or ()}
    out: dict[str, object] = {}
    for key, text in environ.items():
        if not key.startswith(_ENV_PREFIX):
            continue
        name = key[len(_ENV_PREFIX) :].lower()
        if name not in fields:
            raise ConfigError(f"environment {key}: unknown key agent.{name}")
        kind = fields[name]
        try:
            out[name] = float(text) if kind is float else int(text) if kind is int else text
        except ValueError:
            expected = "an integer" if kind is int else "a number"
            raise ConfigError(f"environment {key}: expected {expected}, got {text!r}") from None
    return out
