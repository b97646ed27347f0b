"""Optional TLS: the agent serves HTTPS with a certificate made in the test; the dashboard client
and `rigmon snapshot` verify it with a CA file, and refuse it without."""

from __future__ import annotations

import asyncio
import re
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.background import BackgroundAgent
from rigmon.cluster.client import AgentClient, AgentError, Backoff, Connected, Failed, Sampled
from rigmon.cluster.config import DashConfig, NodeEntry, resolve_targets
from rigmon.config import AgentConfig, AgentSection, JournalSection
from rigmon.snapshot.command import take_snapshot
from tests.agent.tls_certs import TlsFiles, make_tls_files

REPO = Path(__file__).resolve().parents[2]
TOKEN = "tls-token"


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return make_tls_files(tmp_path)


@pytest.fixture
def https_agent(tmp_path: Path, tls: TlsFiles) -> Iterator[str]:
    section = AgentSection(node="secure", root=str(tmp_path), interval_s=0.1, state_dir=str(tmp_path / "state"),
                           tls_cert_file=str(tls.cert_file), tls_key_file=str(tls.key_file))
    background = BackgroundAgent(Agent(AgentConfig(agent=section, journal=JournalSection(commit_interval_s=0.1)),
                                       token=TOKEN, collectors={}))
    url = background.start()
    yield url
    background.stop()


async def test_dashboard_client_verifies_with_the_ca_file(https_agent: str, tls: TlsFiles) -> None:
    assert https_agent.startswith("https://127.0.0.1:")
    client = AgentClient(https_agent, TOKEN, ca_file=str(tls.ca_file), backoff=Backoff(0.01, 0.01))
    seen: list[object] = []

    async def follow() -> None:
        async for update in client.follow():
            seen.append(update)
            if isinstance(update, Sampled):
                return

    await asyncio.wait_for(follow(), 20)
    await client.aclose()
    assert isinstance(seen[0], Connected) and seen[0].info.node == "secure"

    untrusting = AgentClient(https_agent, TOKEN)
    # Said in words, with what to give (the real handshake's failure, not only a constructed one).
    with pytest.raises(AgentError, match=r"^TLS failure: certificate not trusted: .*give the node's CA"):
        await untrusting.info()
    await untrusting.aclose()


async def test_plain_http_to_a_tls_agent_fails_clearly(https_agent: str) -> None:
    client = AgentClient(https_agent.replace("https://", "http://"), TOKEN, backoff=Backoff(0.01, 0.01))
    updates = []
    async for update in client.follow():
        updates.append(update)
        break
    await client.aclose()
    # The agent answers it in plain HTTP, and the node's row says what to change.
    assert isinstance(updates[0], Failed) and updates[0].reason.startswith("HTTP 400: this agent serves HTTPS")
    assert "use an https:// URL" in updates[0].reason


def test_dash_config_passes_the_ca_file(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    config = DashConfig(nodes=(NodeEntry("https://a:9871", token="t", ca_file=str(ca)),))
    (target,) = resolve_targets([], config)
    assert target.ca_file == str(ca)


def test_snapshot_verifies_with_the_ca_file(https_agent: str, tls: TlsFiles, tmp_path: Path) -> None:
    import io

    with httpx.Client(verify=ssl.create_default_context(cafile=str(tls.ca_file)),
                      headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        wait_until(lambda: http.get(f"{https_agent}/v1/history").status_code == 200)
    path, parts = take_snapshot([https_agent], [], 60.0, tmp_path / "b.tar.gz", TOKEN, stream=io.StringIO(),
                                ca_file=str(tls.ca_file))
    assert path.exists() and parts[0].error is None and parts[0].node == "secure"
    _, refused = take_snapshot([https_agent], [], 60.0, tmp_path / "c.tar.gz", TOKEN, stream=io.StringIO())
    assert refused[0].error is not None and "CERTIFICATE" in refused[0].error.upper()



def test_dashboard_export_verifies_with_the_nodes_ca_file(https_agent: str, tls: TlsFiles) -> None:
    from rigmon.cluster.config import NodeTarget
    from rigmon.cluster.export import pull_targets

    with httpx.Client(verify=ssl.create_default_context(cafile=str(tls.ca_file)),
                      headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        wait_until(lambda: http.get(f"{https_agent}/v1/history").status_code == 200)
    (part,) = asyncio.run(pull_targets([NodeTarget(url=https_agent, token=TOKEN, ca_file=str(tls.ca_file))], 60.0))
    assert part.error is None and part.node == "secure"
    (refused,) = asyncio.run(pull_targets([NodeTarget(url=https_agent, token=TOKEN)], 60.0))
    assert refused.error is not None and "CERTIFICATE" in refused.error.upper()

def rigmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rigmon", *args], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_cli_refuses_a_readable_key_and_half_a_pair(tmp_path: Path, tls: TlsFiles) -> None:
    tls.key_file.chmod(0o644)
    out = rigmon("agent", "--root", str(tmp_path), "--state-dir", str(tmp_path / "s"),
                 "--tls-cert", str(tls.cert_file), "--tls-key", str(tls.key_file))
    assert out.returncode == 2 and f"--tls-key {tls.key_file}" in out.stderr and "chmod 600" in out.stderr
    out = rigmon("agent", "--root", str(tmp_path), "--tls-cert", str(tls.cert_file))
    assert out.returncode == 2 and "--tls-cert: a certificate serves HTTPS only with its private key: give --tls-key too" \
        in out.stderr


def wait_until(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_cli_agent_serves_https(tmp_path: Path, tls: TlsFiles) -> None:
    # Port 0: the agent binds a free port and names it (no window where another process takes it).
    proc = subprocess.Popen(
        [sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--state-dir", str(tmp_path / "s"),
         "--listen", "127.0.0.1:0", "--tls-cert", str(tls.cert_file), "--tls-key", str(tls.key_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={"PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r" on https://127\.0\.0\.1:(\d+),", line)
        assert match and match.group(1) != "0", line
        port = int(match.group(1))
        with httpx.Client(verify=ssl.create_default_context(cafile=str(tls.ca_file))) as http:
            wait_until(lambda: http.get(f"https://127.0.0.1:{port}/healthz").json() == {"ok": True})
    finally:
        proc.terminate()
        proc.wait(10)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
