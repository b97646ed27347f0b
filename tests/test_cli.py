"""The real command line, run as a subprocess: sim, agent policies, config errors."""

from __future__ import annotations

import os
import signal
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
from tests.ports import free_port as free_port

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def rigmon(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rigmon", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV, cwd=REPO)



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
    out = rigmon("agent", "--listen", "0.0.0.0:9871", "--root", str(tmp_path), "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 2
    assert "refusing to listen on 0.0.0.0:9871 without a token" in out.stderr


def test_agent_refuses_a_world_readable_token_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("abc\n")
    token.chmod(0o644)
    out = rigmon("agent", "--token-file", str(token), "--root", str(tmp_path), "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 2 and "chmod 600" in out.stderr


def test_agent_with_peers_but_no_probe_key_refuses_to_start(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('[[peers]]\nname = "node02"\npaths = [{ name = "tbnet", address = "10.0.0.2" }]\n')
    out = rigmon("agent", "--config", str(config), "--root", str(tmp_path), "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 2 and "set [probes] key_file, or [agent] token_file" in out.stderr


def test_bad_config_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text("[agent]\nintervall_s = 2\n")
    out = rigmon("agent", "--config", str(config), "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 2 and "agent.intervall_s: unknown key" in out.stderr
    config.write_text('[agent]\ninterval_s = "fast"\n')
    out = rigmon("agent", "--config", str(config), "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 2 and "agent.interval_s: expected a number" in out.stderr


def test_an_unknown_collector_names_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text("[collectors.gpuz]\ninterval_s = 1.0\n")
    out = rigmon("agent", "--config", str(config), "--root", str(tmp_path), "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 2
    assert out.stderr.startswith(f"rigmon: {config}: collectors.gpuz: unknown collector (known: host,"), out.stderr


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
        # Without the token: one sentence saying what to give, not httpx's text and a link.
        out = rigmon("snapshot", f"127.0.0.1:{port}", "-o", str(tmp_path / "s.tar.gz"))
        assert out.returncode == 3, out.stderr
        assert "401: this agent needs a token: --token-file FILE" in out.stderr
        assert "http" + "s://developer.mozilla.org" not in out.stderr
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    # The agent said what it does: address, state dir, journal, collectors, and a clean stop.
    err = proc.stderr.read() if proc.stderr else ""
    assert f"listening on http://127.0.0.1:{port} (read token required, read-only)" in err, err
    assert f"state dir {tmp_path / 'state'}; journal enabled" in err
    assert "box: collectors" in err and "ok: " in err and "host" in err
    assert "INFO rigmon.agent: stopped cleanly" in err


def test_agent_logs_for_the_journal_without_time_stamps(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"})
    log = tmp_path / "journal-stream"
    with open(log, "w") as stderr:
        st = os.fstat(stderr.fileno())
        env = {**ENV, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        proc = subprocess.Popen([sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--listen",
                                 f"127.0.0.1:{free_port()}", "--state-dir", str(tmp_path / "state")],
                                stdout=subprocess.DEVNULL, stderr=stderr, env=env, cwd=REPO)
        try:
            deadline = time.monotonic() + 20
            while "collectors" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(10)
    lines = log.read_text().splitlines()
    assert lines and all(line.startswith("<") for line in lines), lines
    assert any(line.startswith("<6>rigmon.agent: config") for line in lines), lines


def test_replay_of_a_file_that_is_not_a_bundle_says_so(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tarball")
    config = tmp_path / "dash.toml"
    config.write_text('theme = "rigmon-dark"\n')
    out = rigmon("dash", "--replay", str(junk), "--config", str(config))
    assert out.returncode == 2 and "not a readable bundle" in out.stderr


def test_snapshot_takes_host_port_and_exits_by_what_it_pulled(sim_urls: list[str], tmp_path: Path) -> None:
    bare = sim_urls[0].removeprefix("http://")
    dead = f"127.0.0.1:{free_port()}"
    with httpx.Client(timeout=10) as client:
        latest(client, sim_urls[0])
    ok = rigmon("snapshot", bare, "--since", "1m", "-o", str(tmp_path / "ok.tar.gz"), timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "ok.tar.gz").is_file() and "1 node, " in ok.stdout
    # One node down: the bundle still holds the other, and the exit code says something failed.
    partial = rigmon("snapshot", bare, dead, "--since", "1m", "-o", str(tmp_path / "partial.tar.gz"), timeout=60)
    assert partial.returncode == 1, partial.stderr
    assert (tmp_path / "partial.tar.gz").is_file()
    assert f"connection refused: no agent is listening at http://{dead}" in partial.stderr
    # Every node down: no bundle at all.
    none = rigmon("snapshot", dead, "-o", str(tmp_path / "none.tar.gz"), timeout=60)
    assert none.returncode == 3 and not (tmp_path / "none.tar.gz").exists()
    assert "no node could be pulled" in none.stderr


def test_long_running_commands_take_verbose_and_log_level() -> None:
    from rigmon.cli import build_parser

    parser = build_parser()
    for command in (["agent"], ["sim"], ["dash"], ["demo"]):
        args = parser.parse_args([*command, "-vv", "--log-level", "debug", "--log-file", "/dev/null"])
        assert args.verbose == 2 and args.log_level == "debug" and args.log_file == "/dev/null", command
    help_text = rigmon("snapshot", "--help").stdout
    assert "exit codes: 0 every node pulled" in help_text and "HOST:PORT" in help_text


def test_agent_only_parser_parses_helps_and_fails_like_the_whole_one(capsys: pytest.CaptureFixture[str]) -> None:
    from rigmon.cli import build_parser

    argvs = [["agent"], ["agent", "--listen", "0.0.0.0:9000", "--token-file", "/t", "--root", "/r", "-vv"],
             ["agent", "--state-dir", "/s", "--user", "rigmon", "--log-level", "debug", "--tls-cert", "c"]]
    for argv in argvs:
        assert vars(build_parser(agent_only=True).parse_args(argv)) == vars(build_parser().parse_args(argv))
    outputs = []
    for agent_only in (True, False):
        for argv in (["agent", "--help"], ["agent", "--bogus"], ["agent", "--listen"]):
            with pytest.raises(SystemExit) as exit_:
                build_parser(agent_only=agent_only).parse_args(argv)
            captured = capsys.readouterr()
            outputs.append((exit_.value.code, captured.out, captured.err))
    assert outputs[:3] == outputs[3:]
    assert "exit codes: 0 stopped cleanly" in outputs[0][1]


def test_sim_on_a_port_in_use_says_so_and_exits_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = rigmon("sim", "--scenario", "healthy", "--nodes", "1", "--base-port", str(port), "--duration", "20")
    assert out.returncode == 2, out.stderr
    assert f"rigmon: a simulated agent cannot serve on 127.0.0.1:{port}" in out.stderr
    assert "--base-port 0 picks free ports" in out.stderr


def test_agent_hung_up_stops_cleanly_and_its_next_start_reports_no_unclean_shutdown(tmp_path: Path) -> None:
    """Closing the terminal or ssh session an agent runs in (SIGHUP) is a stop the operator chose."""
    write_tree(tmp_path, {"/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"})

    def start() -> tuple[subprocess.Popen[str], str]:
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--node", "box",
                                 "--listen", f"127.0.0.1:{port}", "--state-dir", str(tmp_path / "state")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
        assert proc.stdout is not None and "rigmon agent" in proc.stdout.readline()
        return proc, f"http://127.0.0.1:{port}"

    first, url = start()
    with httpx.Client(timeout=5) as client:
        deadline = time.monotonic() + 20
        while latest(client, url).seq < 3 and time.monotonic() < deadline:  # frames in the journal
            time.sleep(0.2)
    first.send_signal(signal.SIGHUP)
    _, stderr = first.communicate(timeout=20)
    assert first.returncode == 0, stderr
    assert "stopped cleanly" in stderr
    second, url = start()
    try:
        with httpx.Client(timeout=5) as client:
            frame = latest(client, url)
        assert "unclean_shutdown" not in [e.kind for e in frame.events]
    finally:
        second.terminate()
        _, stderr = second.communicate(timeout=20)
    assert "unclean_shutdown" not in stderr


def test_sim_hung_up_stops_cleanly_and_removes_its_trees(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "rigmon", "sim", "--scenario", "healthy", "--nodes", "1",
                             "--base-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**ENV, "TMPDIR": str(tmp)}, cwd=REPO)
    assert proc.stdout is not None and proc.stdout.readline().startswith("node01 http://")
    assert [p.name[:11] for p in tmp.iterdir()] == ["rigmon-sim-"]
    proc.send_signal(signal.SIGHUP)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    assert list(tmp.iterdir()) == []


def test_snapshot_with_an_unwritable_output_or_a_malformed_url_is_a_bad_argument(tmp_path: Path) -> None:
    missing = rigmon("snapshot", "127.0.0.1:1", "-o", str(tmp_path / "no" / "such" / "b.tar.gz"))
    assert missing.returncode == 2, missing.stderr
    assert f"rigmon: -o {tmp_path / 'no' / 'such' / 'b.tar.gz'}: {tmp_path / 'no' / 'such'} is not a directory" \
        in missing.stderr
    bad = rigmon("snapshot", "http://:::", "-o", str(tmp_path / "b.tar.gz"))
    assert bad.returncode == 2, bad.stderr
    assert "rigmon: http://:::: not a URL" in bad.stderr and "Traceback" not in bad.stderr
    folder = rigmon("snapshot", "127.0.0.1:1", "-o", str(tmp_path))
    assert folder.returncode == 2, folder.stderr
    assert folder.stderr == (f"rigmon: -o {tmp_path}: is a directory: name the bundle file to write "
                             f"(-o {tmp_path}/bug.tar.gz)\n")


@pytest.mark.parametrize(("url", "why"), [
    ("localhost:99999", "not a URL (Port out of range 0-65535)"),
    ("http://[bad", "not a URL (Invalid IPv6 URL)"),
    ("ftp://x", "not an agent URL"),
    ("http://:9871", "not an agent URL"),
])
def test_snapshot_refuses_what_is_no_agent_url_before_pulling(tmp_path: Path, url: str, why: str) -> None:
    bad = rigmon("snapshot", url, "-o", str(tmp_path / "b.tar.gz"))
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr == f"rigmon: {url}: {why}" + ("\n" if why.endswith(")") else
                                                    " (http://HOST:PORT, https://HOST:PORT or HOST:PORT)\n")
    assert not (tmp_path / "b.tar.gz").exists()
