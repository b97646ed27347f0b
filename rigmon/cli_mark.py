"""``rigmon mark TEXT``: put a mark from a training job on this node's timeline (POST /v1/marks to the local agent)."""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

MARK_EXIT = ("exit codes: 0 marked; 1 the agent refused the mark, could not be reached or did not answer within 10 s; "
             "2 bad arguments, configuration or token file")
#: Seconds the CLI waits for each step (connect, send, each read) of its request to the agent.
TIMEOUT_S = 5.0
#: Seconds the CLI waits for the agent's answer in all: a training loop must not hang on its monitor,
#: and a per-read timeout alone does not bound an answer that trickles in.
DEADLINE_S = 10.0


def add_mark_parser(sub: Any) -> None:
    """The ``mark`` subcommand."""
    mark = sub.add_parser("mark", help="put a mark (\"epoch 3 checkpoint\") on this node's timeline",
                          epilog=MARK_EXIT,
                          description="Sends TEXT to the local agent (POST /v1/marks with the control token). "
                                      "The agent's address, TLS certificate and control token come from its "
                                      "configuration (--config, default /etc/rigmon/agent.toml, RIGMON_AGENT_* "
                                      "variables) unless given here; with --url http(s)://HOST:PORT, "
                                      "--control-token-file (and --ca-file for https) no configuration is read.")
    mark.add_argument("text", metavar="TEXT", help="what the job is doing (1-200 characters, plain text)")
    mark.add_argument("--by", metavar="NAME", help="who puts the mark (kept with it; default: nobody named)")
    mark.add_argument("--config", metavar="FILE", help="the local agent's TOML (default /etc/rigmon/agent.toml)")
    mark.add_argument("--url", metavar="URL", help="agent to mark (default: the configured listen address)")
    mark.add_argument("--control-token-file", metavar="FILE",
                      help="control token (default: the agent's control_token_file; a copy only you can read "
                           "lets a job that is not root mark)")
    mark.add_argument("--ca-file", metavar="FILE", help="PEM certificate to verify https:// with "
                                                         "(default: the agent's tls_cert_file)")


def config_needed_for(args: argparse.Namespace) -> tuple[str, str] | None:
    """What ``rigmon mark`` reads the agent's configuration for, and the option that gives it instead;
    ``None`` when the options give all of it (a job that may not read the configuration, or on a
    machine without one, marks with them alone)."""
    url = (args.url or "").strip()
    if not url:
        return "the agent's address", "--url"
    if "://" not in url:
        return f"the scheme of --url {url}", "--url with http:// or https://"
    if not args.control_token_file:
        return "the control token", "--control-token-file"
    if url.lower().startswith("https://") and not args.ca_file:
        return "the agent's TLS certificate", "--ca-file"
    return None


def cmd_mark(args: argparse.Namespace) -> int:
    """Run ``rigmon mark``."""
    import ssl

    import httpx

    from rigmon.agent.control import MAX_ACK_BY_CHARS, BadRequest, checked_text
    from rigmon.agent.server import StartupError, read_token_file
    from rigmon.cli import fail
    from rigmon.cluster.config import DashConfigError, check_url, normalize_url
    from rigmon.config import AgentConfig, ConfigError, load_agent_config, local_url, setting_origin

    try:
        # The agent's own rule, before asking it: an empty or overlong TEXT is a bad argument (exit 2),
        # not a mark the agent "refused" (exit 1, as for a wrong token).
        checked_text(args.text, what="TEXT")
        if args.by is not None:
            checked_text(args.by, MAX_ACK_BY_CHARS, "--by")
    except BadRequest as exc:
        return fail(str(exc))
    # Read only when the options leave something to it: a named file that is not there is then an error.
    config, needed_for = AgentConfig(), config_needed_for(args)
    if needed_for is not None:
        try:
            config = load_agent_config(args.config)
        except ConfigError as exc:
            what, option = needed_for
            return fail(f"{exc} (read for {what}; or give {option})")
    try:
        tls = bool(config.agent.tls_cert_file)
        if args.url:
            # A bare HOST:PORT takes the scheme the agent's configuration serves (https with a certificate).
            url = normalize_url(args.url if "://" in args.url or not tls else f"https://{args.url.strip()}")
        else:
            url = local_url(config.agent.listen, tls)
    except (ConfigError, ValueError) as exc:
        return fail(str(exc))
    try:
        httpx.URL(f"{url}/v1/marks")
        if args.url:
            # What is no agent URL (ftp://, no host) is a bad argument, not an agent "unreachable".
            check_url(f"--url {args.url}", url)
    except httpx.InvalidURL as exc:
        return fail(f"--url {args.url}: {exc}")
    except DashConfigError as exc:
        return fail(str(exc))
    token_file = args.control_token_file or config.agent.control_token_file
    if not token_file:
        return fail("no control token: the agent has no control_token_file; give --control-token-file")
    try:
        # Named as the operator gave it: this option, else the agent's environment variable or file key.
        given = "--control-token-file" if args.control_token_file else None
        token = read_token_file(token_file, setting_origin("control_token_file", given, args.config))
    except StartupError as exc:
        return fail(f"{exc} (run as a user who may read it, or give --control-token-file with a copy only you "
                    "can read)")
    verify: ssl.SSLContext | bool = True
    ca_file = args.ca_file or (config.agent.tls_cert_file if url.startswith("https://") else "")
    if ca_file:
        # Loaded here, not by httpx: a missing or unreadable certificate is a bad argument (exit 2), not a traceback.
        try:
            verify = ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            origin = setting_origin("tls_cert_file", "--ca-file" if args.ca_file else None, args.config)
            return fail(f"{origin} {ca_file}: {getattr(exc, 'strerror', None) or exc}")
    body: dict[str, str] = {"text": args.text}
    if args.by:
        body["by"] = args.by
    outcome: list[httpx.Response | Exception] = []

    def post() -> None:
        try:
            outcome.append(httpx.post(f"{url}/v1/marks", json=body, headers={"Authorization": f"Bearer {token}"},
                                      timeout=TIMEOUT_S, verify=verify))
        except Exception as exc:  # handed to the main thread, which reports or raises it
            outcome.append(exc)

    # A daemon thread: one still waiting at the deadline ends with the process.
    worker = threading.Thread(target=post, name="rigmon-mark", daemon=True)
    worker.start()
    worker.join(DEADLINE_S)
    if not outcome:
        return fail(f"agent at {url}: no answer within {DEADLINE_S:g} s", 1)
    response = outcome[0]
    if isinstance(response, httpx.HTTPError):
        from rigmon.http_errors import describe_http_error

        # The sentence `rigmon snapshot` says for the same failure (connection refused, untrusted
        # certificate, HTTPS to a plain agent), not httpx's "[Errno 111] Connection refused".
        return fail(describe_http_error(response), 1)
    if isinstance(response, Exception):
        raise response
    try:
        answer = response.json()
    except ValueError:
        answer = None
    # Something else may answer on the port (--url to the wrong service): its body is no JSON object.
    answer = answer if isinstance(answer, dict) else {}
    if response.status_code != 201:
        reason = str(answer["error"]) if "error" in answer else response.text[:200]
        return fail(f"agent at {url} refused the mark ({response.status_code}): {reason}", 1)
    if not isinstance(answer.get("message"), str):
        return fail(f"{url} answered {response.status_code} without a mark: is it a rigmon agent?", 1)
    print(f"marked {url}: {answer['message']}", file=sys.stdout, flush=True)
    return 0
