"""What `rigmon setup agent` prints for the clients of the node it set up: a Prometheus job and the dashboard."""

from __future__ import annotations

import shlex

from rigmon.setup import render


def scrape_help(node: str, port: int, tls: bool, shared_token: bool = False, token_file: str = render.READ_TOKEN,
                cert_file: str = render.TLS_CERT) -> str:
    """What a Prometheus job (or any other client) needs to reach this node: URL, CA, token.

    Args:
        shared_token: the read token was given with ``--read-token-file``.
        token_file: the read token file on the node (the configuration's ``token_file``).
        cert_file: the node's certificate (the configuration's ``tls_cert_file``).
    """
    scheme = "https" if tls else "http"
    lines = [
        "",
        "For Prometheus (deploy/prometheus/prometheus.yml) and other clients of this node:",
        f"  url         {scheme}://{node}:{port}/metrics   (target {node}:{port}, scheme {scheme})",
    ]
    if tls:
        lines.append(f"  ca_file     copy {cert_file} (one job: every node's agent.pem in one file)")
    lines.append(f"  token file  {token_file}" + (" (as given with --read-token-file)" if shared_token else
                 " (one job: the same read token on every node, rigmon setup agent --read-token-file FILE)"))
    return "\n".join(lines)


def dashboard_help(node: str, port: int, tls: bool, dry_run: bool, real: bool = True,
                   shared_token: str | None = None, node_token_file: str = render.READ_TOKEN,
                   cert_file: str = render.TLS_CERT) -> str:
    """What to run on the machine the dashboard runs on.

    Args:
        shared_token: the file name of the read token given with ``--read-token-file``: the
            dashboard uses its copy of that one file for every node set up with it.
        node_token_file: the read token file on the node (the configuration's ``token_file``).
        cert_file: the node's certificate (the configuration's ``tls_cert_file``).
    """
    scheme = "https" if tls else "http"
    cfg = "~/.config/rigmon"
    if shared_token:
        token_file = f"{cfg}/{shared_token}"
        fetch = [f"  mkdir -p {cfg} && cp {shlex.quote(shared_token)} {cfg}/ && chmod 600 {token_file}"
                 "   # the read token given to setup, one copy for all its nodes"]
    else:
        token_file = f"{cfg}/{node}.token"
        fetch = [f"  mkdir -p {cfg} && scp root@{node}:{node_token_file} {token_file} && chmod 600 {token_file}"]
    ca = ""
    if tls:
        fetch.append(f"  scp root@{node}:{cert_file} {cfg}/{node}.pem")
        ca = f" --ca-file {cfg}/{node}.pem"
    lines = [
        "",
        "(dry run: nothing was changed)" if dry_run else
        f"The agent runs as {render.UNIT_NAME}: systemctl status rigmon-agent; journalctl -u rigmon-agent"
        if real else "Installed below --root; nothing was started.",
        "On the machine you watch from:",
        *fetch,
        f"  rigmon dash {scheme}://{node}:{port} --token-file {token_file}{ca}",
        f"or list it in {cfg}/dash.toml:",
        "  [[nodes]]",
        f'  url = "{scheme}://{node}:{port}"',
        f'  token_file = "{token_file}"',
    ]
    if tls:
        lines.append(f'  ca_file = "{cfg}/{node}.pem"')
    if not tls:
        lines.append("Without TLS the token crosses the network in clear text: keep the agent on a trusted network.")
    return "\n".join(lines)
