"""The real command line, run as a subprocess: sim, agent policies, config errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rigmon import __version__
from rigmon.schema import Frame, decode
from rigmon.sim import write_tree

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def rigmon(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rigmon", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV, cwd=REPO)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def sim_urls() -> Iterator[list[str]]:
    proc = subprocess.Popen([sys.executable, "-m", "rigmon", "sim", "--scenario", "healthy", "--nodes", "2",
                             "--base-port", "0", "--speed", "5", "--duration", "60"],
                            stdout=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    try:
        assert proc.stdout is not None
        urls = [proc.stdout.readline().split()[1] for _ in range(2)]
        yield urls
    finally:
        proc.terminate()
        proc.wait(10)


def latest(client: httpx.Client, url: str) -> Frame:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r = client.get(f"{url}/v1/latest")
        if r.status_code == 200:
            return decode(Frame, r.content)
        time.sleep(0.1)
    raise AssertionError("no frame")


def test_version() -> None:
    assert rigmon("--version").stdout.strip() == f"rigmon {__version__}"


def test_sim_two_nodes_serve_changing_host_readings(sim_urls: list[str]) -> None:
    with httpx.Client(timeout=10) as client:
        frames = [latest(client, url) for url in sim_urls]
        assert [f.node for f in frames] == ["node01", "node02"]
        first = frames[0]
        assert first.collectors["host"].state == "ok"
        assert first.readings.host is not None and first.readings.host.cpu_count == 32
        deadline = time.monotonic() + 20
        later = first
        while later.seq < first.seq + 3 and time.monotonic() < deadline:
            time.sleep(0.2)
            later = latest(client, sim_urls[0])
        eth = {n.name: n for n in later.readings.net}["eth0"]
        eth_before = {n.name: n for n in first.readings.net}["eth0"]
        assert eth.rx_bytes_total > eth_before.rx_bytes_total
        assert eth.rx_bytes_per_s is not None and eth.rx_bytes_per_s > 0
        assert later.taken_at > first.taken_at


def test_sim_stream_resumes_without_loss(sim_urls: list[str]) -> None:
    url = sim_urls[1]

    def read(n: int, last: int | None) -> list[int]:
        ids: list[int] = []
        headers = {"Last-Event-ID": str(last)} if last is not None else {}
        with httpx.Client(timeout=10) as client, client.stream("GET", f"{url}/v1/stream", headers=headers) as r:
            for line in r.iter_lines():
                if line.startswith("id: "):
                    ids.append(int(line[4:]))
                    if len(ids) == n:
                        break
        return ids

    first = read(2, None)
    time.sleep(2.5)  # frames go by while disconnected (agent interval 1 s)
    resumed = read(4, first[-1])
    assert resumed == list(range(first[-1] + 1, first[-1] + 5))


def test_tree_only_writes_a_tree_other_tools_can_read(tmp_path: Path) -> None:
    out = rigmon("sim", "--tree-only", str(tmp_path), "--nodes", "1", "--duration", "0.5")
    assert out.returncode == 0, out.stderr
    name, root = out.stdout.split()
    assert name == "node01"
    assert (Path(root) / "proc" / "stat").read_text().startswith("cpu ")
    assert (Path(root) / "sys" / "class" / "net" / "eth0" / "speed").read_text().strip() == "10000"


def test_unknown_scenario_names_the_known_ones() -> None:
    out = rigmon("sim", "--scenario", "nope", "--duration", "1")
    assert out.returncode == 2
    assert "unknown scenario 'nope'" in out.stderr and "healthy" in out.stderr


def test_agent_refuses_non_loopback_without_token(tmp_path: Path) -> None:
    out = rigmon("agent", "--listen", "0.0.0.0:9871", "--root", str(tmp_path))
    assert out.returncode == 2
    assert "refusing to listen on 0.0.0.0:9871 without a token" in out.stderr


def test_agent_refuses_a_world_readable_token_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("abc\n")
    token.chmod(0o644)
    out = rigmon("agent", "--token-file", str(token), "--root", str(tmp_path))
    assert out.returncode == 2 and "chmod 600" in out.stderr


def test_bad_config_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text("[agent]\nintervall_s = 2\n")
    out = rigmon("agent", "--config", str(config))
    assert out.returncode == 2 and "agent.intervall_s: unknown key" in out.stderr
    config.write_text('[agent]\ninterval_s = "fast"\n')
    out = rigmon("agent", "--config", str(config))
    assert out.returncode == 2 and "agent.interval_s: expected a number" in out.stderr


def test_agent_with_token_over_loopback(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"})
    token = tmp_path / "token"
    token.write_text("tok-123\n")
    token.chmod(0o600)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--node", "box",
                             "--listen", f"127.0.0.1:{port}", "--token-file", str(token),
                             "--state-dir", str(tmp_path / "state")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    try:
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=5) as client:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    if client.get(f"{url}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            assert client.get(f"{url}/v1/latest").status_code == 401
            frame = latest(httpx.Client(timeout=5, headers={"Authorization": "Bearer tok-123"}), url)
            assert frame.node == "box" and frame.collectors["host"].state == "ok"
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def test_replay_of_a_file_that_is_not_a_bundle_says_so(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tarball")
    config = tmp_path / "dash.toml"
    config.write_text('theme = "rigmon-dark"\n')
    out = rigmon("dash", "--replay", str(junk), "--config", str(config))
    assert out.returncode == 2 and "not a readable bundle" in out.stderr
