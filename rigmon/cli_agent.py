"""``rigmon agent``: sample this node and serve the HTTP API until signalled."""

from __future__ import annotations

import argparse
import gc
import importlib.util
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import msgspec

from rigmon import __version__
from rigmon.cli import fail, setup_logging, stop_on_hangup
from rigmon.config import (
    DEFAULT_CONFIG_PATH,
    ConfigError,
    ConfigKeyError,
    default_state_dir,
    in_config_file,
    load_agent_config,
    setting_origin,
    split_listen,
)

#: The ``rigmon agent`` option that sets each ``[agent]`` key; errors about a value name the option
#: when the operator gave it (`agent_origin`).
AGENT_OPTIONS: dict[str, str] = {
    "listen": "--listen", "token_file": "--token-file", "root": "--root", "node": "--node",
    "control_token_file": "--control-token-file", "state_dir": "--state-dir", "tls_cert_file": "--tls-cert",
    "tls_key_file": "--tls-key", "user": "--user",
}


def uvicorn_without_its_cli() -> ModuleType:
    """The ``uvicorn`` package with `uvicorn.Config` and `uvicorn.Server`, its command line not imported.

    uvicorn's ``__init__`` imports ``uvicorn.main`` (click, the reloaders, multiprocessing) for
    ``uvicorn.run`` and its command line, which the agent never uses: about 9 ms of the agent's
    ~0.2 s start (measured, benchmarks/results-startup.md), and any ``import uvicorn.config``
    runs that ``__init__`` first. So, before anything imports uvicorn, the package module is made
    from its spec without running ``__init__`` and given ``Config`` and ``Server`` (the same
    classes ``__init__`` exports). Any other attribute (``uvicorn.run``, ``__version__``) runs the
    real ``__init__`` on first use, so other code sees the whole package. Where uvicorn is already
    imported (tests, the simulator), that module is returned as it is.
    """
    loaded = sys.modules.get("uvicorn")
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("uvicorn")
    assert spec is not None and spec.loader is not None, "uvicorn is not installed"
    loader = spec.loader
    package = importlib.util.module_from_spec(spec)

    def complete(name: str) -> object:
        # First use of anything else: run uvicorn's own __init__ on this module, once.
        package.__dict__.pop("__getattr__", None)
        loader.exec_module(package)
        return getattr(package, name)

    vars(package)["__getattr__"] = complete
    sys.modules["uvicorn"] = package
    try:
        from uvicorn.config import Config
        from uvicorn.server import Server
    except BaseException:
        sys.modules.pop("uvicorn", None)
        raise
    package.Config = Config  # type: ignore[attr-defined]
    package.Server = Server  # type: ignore[attr-defined]
    return package


def cmd_agent(args: argparse.Namespace) -> int:
    """``rigmon agent``: load the configuration, check tokens and address, serve until signalled.

    No garbage collection while the agent's modules are imported and the agent is built (`main`
    turns it off before parsing already): 84 collections after `site` otherwise, 8-11 ms before the
    first frame (benchmarks/results-startup2.md), that free ~1000 objects of the imports' temporary
    cycles next to everything start-up keeps for the process's life. `tune_agent_gc` then freezes
    what start-up made and collection resumes, before the agent serves; on any early return too.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _agent(args)
    finally:
        if enabled:
            gc.enable()


def agent_origin(args: argparse.Namespace, key: str, environ: Mapping[str, str] | None = None) -> str:
    """Where the ``[agent]`` setting ``key`` in force was given, for an error about its value: the
    option of `AGENT_OPTIONS` when given, else the environment variable, else the file's key (see
    `rigmon.config.setting_origin`)."""
    option = AGENT_OPTIONS[key]
    given = getattr(args, _attribute(option))
    return setting_origin(key, option if given else None, args.config, environ)


def _attribute(option: str) -> str:
    """The attribute of the parsed arguments an option is kept in (``--tls-cert``: ``tls_cert``)."""
    return option.removeprefix("--").replace("-", "_")


def state_dir_origin(args: argparse.Namespace, given: bool, environ: Mapping[str, str] | None = None) -> str:
    """Where the state directory in force was named, for an error about it: the flag, the environment
    variable, the file's key (in that order of precedence), else the default.

    Args:
        given: whether the configuration named one (else the agent took `default_state_dir`).
    """
    if not given:
        return "state directory (the default; set --state-dir or agent.state_dir)"
    return agent_origin(args, "state_dir", environ)


def listen_origin(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> str:
    """Where the address the agent listens on was set, for an error about it: the flag, the environment
    variable, else the file's key (in that order of precedence; the key also when the default is in force)."""
    origin = agent_origin(args, "listen", environ)
    if origin == "agent.listen":
        return "agent.listen of the configuration (the default; set --listen or agent.listen)"
    return origin


def _agent(args: argparse.Namespace) -> int:
    uvicorn_without_its_cli()
    from rigmon.agent.agent import Agent
    from rigmon.agent.gc_tuning import tune_agent_gc
    from rigmon.agent.server import (
        ListenError,
        StartupError,
        check_distinct_tokens,
        check_listen_policy,
        check_user,
        is_loopback,
        read_token_file,
        run,
    )
    from rigmon.agent.state_lock import StateDirInUse, StateDirUnusable
    from rigmon.agent.systemd_notify import notify_ready
    from rigmon.agent.tls_files import check_tls_files
    from rigmon.logs import FrameLog

    setup_logging(args)
    overrides = {key: getattr(args, _attribute(option)) for key, option in AGENT_OPTIONS.items()}
    try:
        config = load_agent_config(args.config, overrides, options=AGENT_OPTIONS)
        state_dir_given = bool(config.agent.state_dir)
        if not state_dir_given:
            config = msgspec.structs.replace(
                config, agent=msgspec.structs.replace(config.agent, state_dir=str(default_state_dir())))
        # Each file named as the operator named it: the option, the environment variable or the file's key.
        token_origin, control_origin = agent_origin(args, "token_file"), agent_origin(args, "control_token_file")
        token = read_token_file(config.agent.token_file, token_origin) if config.agent.token_file else None
        control = (read_token_file(config.agent.control_token_file, control_origin)
                   if config.agent.control_token_file else None)
        check_distinct_tokens(token, control, (token_origin, control_origin))
        check_listen_policy(config.agent.listen, token)
        if config.agent.tls_cert_file:
            check_tls_files(config.agent.tls_cert_file, config.agent.tls_key_file,
                            agent_origin(args, "tls_cert_file"), agent_origin(args, "tls_key_file"))
        if config.agent.user:
            # Before the port is bound and the address announced: a misspelt user failed only after both.
            check_user(config.agent.user, agent_origin(args, "user"))
        if not Path(config.agent.root).is_dir():
            raise StartupError(f"{agent_origin(args, 'root')} {config.agent.root} is not a directory")
        agent = Agent(config, token=token, control_token=control)
        # Before saying what it serves: a second agent on this state directory stops here.
        agent.lock_state_dir()
    except ConfigKeyError as exc:
        return fail(in_config_file(args.config, exc))
    except StateDirUnusable as exc:
        return fail(f"{state_dir_origin(args, state_dir_given)} {exc.path}: {exc.reason} (the agent keeps its "
                    "journal, alarm state and lock there)")
    except (ConfigError, StartupError, StateDirInUse, ValueError) as exc:
        return fail(str(exc))
    scheme = "https" if config.agent.tls_cert_file else "http"
    journal = config.agent.state_dir if config.journal.enabled else "(disabled)"
    a = config.agent
    log = logging.getLogger("rigmon.agent")

    def announce(bound: str) -> None:
        # The address bound, not the one asked for: `--listen 127.0.0.1:0` names its port here.
        print(f"rigmon agent {__version__}: node {config.node_name} on {scheme}://{bound}, "
              f"journal in {journal}", flush=True)
        log.info("config %s; listening on %s://%s (%s, %s); state dir %s; journal %s; root %s%s",
                 args.config or (DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else "(defaults)"),
                 scheme, bound, "read token required" if token else "no token",
                 "control token set" if control else "read-only", a.state_dir,
                 "enabled" if config.journal.enabled else "disabled", a.root,
                 f"; will run as user {a.user}" if a.user else "")
        if scheme == "http" and token and not is_loopback(split_listen(bound)[0]):
            log.warning("serving plain HTTP on %s: the read token crosses the network in clear text, for anyone on "
                        "the path to read; serve HTTPS with --tls-cert and --tls-key (rigmon setup agent makes "
                        "them), or listen on 127.0.0.1 and reach it over ssh", bound)
        # Under systemd (Type=notify) the start completes now: a port it cannot bind fails the start.
        notify_ready(f"node {config.node_name} listening on {scheme}://{bound}")

    log.info("alarm rules: %d in force; notifiers: %s", len(agent.alarms.engine.rule_names),
             ", ".join(n.kind for n in config.notify) or "none")
    agent.sampler.add_listener(FrameLog(config.node_name))
    stop_on_hangup()
    tune_agent_gc()
    gc.enable()
    try:
        run(agent, config.agent.listen, config.agent.user, announce)
    except ListenError as exc:
        return fail(f"{exc}; the address is {listen_origin(args)}")
    except StartupError as exc:
        return fail(str(exc))
    log.info("stopped cleanly")
    return 0
