"""``rigmon mark`` against a real agent process: found through the agent's configuration, seen in /v1/history."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rigmon.cli import main
from rigmon.config import local_url
from rigmon.schema import History, decode
from rigmon.sim import write_tree
from tests.test_cli import ENV, REPO, free_port, rigmon


def readme_snippet() -> str:
    """The ``rigmon_mark`` function of the README's Python snippet (without its example call)."""
    readme = (REPO / "README.md").read_text()
    start = readme.index("import json, pathlib, urllib.request")
    code = readme[start:readme.index("```", start)]
    return code[: code.index("rigmon_mark(f\"epoch")]


def _private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_local_url_of_wildcard_and_ipv6_listen_addresses() -> None:
    assert local_url("0.0.0.0:9871", tls=True) == "https://127.0.0.1:9871"
    assert local_url("127.0.0.1:9871", tls=False) == "http://127.0.0.1:9871"
    assert local_url("[::]:9871", tls=False) == "http://[::1]:9871"


def test_mark_from_the_cli_appears_in_history(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_tree(root, {"/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"})
    read = _private(tmp_path / "read.token", "r3ad\n")
    control = _private(tmp_path / "control.token", "c0ntrol\n")
    port = free_port()
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nnode = "box"\nlisten = "127.0.0.1:{port}"\nroot = "{root}"\n'
                      f'token_file = "{read}"\ncontrol_token_file = "{control}"\nstate_dir = "{tmp_path / "state"}"\n'
                      'interval_s = 0.2\n')
    proc = subprocess.Popen([sys.executable, "-m", "rigmon", "agent", "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        before = time.time()
        out = rigmon("mark", "--config", str(config), "epoch 3 checkpoint", "--by", "train.py")
        assert out.returncode == 0, out.stderr
        assert "epoch 3 checkpoint" in out.stdout
        # The read token cannot mark: the agent says so and the CLI exits 1.
        refused = rigmon("mark", "--config", str(config), "--control-token-file", str(read), "x")
        assert refused.returncode == 1 and "read token cannot add marks" in refused.stderr
        bad = rigmon("mark", "--config", str(config), "two\nlines")
        # Judged by the CLI with the agent's own rule: a bad argument (exit 2), not a refusal.
        assert bad.returncode == 2 and "control or bidi character" in bad.stderr
        # The README's snippet for a training loop, as it is written there.
        namespace: dict[str, object] = {}
        exec(readme_snippet(), namespace)  # noqa: S102 - the project's own documentation
        namespace["rigmon_mark"]("epoch 4 from the snippet", url=url, token_file=str(control))  # type: ignore[operator]
        marks: list[str] = []
        with httpx.Client(timeout=5, headers={"Authorization": "Bearer r3ad"}) as client:
            while time.monotonic() < deadline and not marks:
                r = client.get(f"{url}/v1/history", params={"from": before - 5, "to": time.time() + 5})
                marks = [e.message for e in decode(History, r.content).events if e.kind == "mark"]
                if len(marks) < 2:
                    marks = []
                    time.sleep(0.2)
        assert marks == ["epoch 3 checkpoint", "epoch 4 from the snippet"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_readme_snippet_never_raises_into_the_training_job(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {}
    exec(readme_snippet(), namespace)  # noqa: S102 - the project's own documentation
    mark = namespace["rigmon_mark"]
    # No token file (the job runs as a user without its copy), and no agent on the port.
    missing = str(tmp_path / "missing.token")
    mark("epoch 1", url=f"http://127.0.0.1:{free_port()}", token_file=missing)  # type: ignore[operator]
    assert "rigmon mark failed" in capsys.readouterr().out
    mark("epoch 1", url=f"http://127.0.0.1:{free_port()}",  # type: ignore[operator]
         token_file=str(_private(tmp_path / "c.token", "c\n")))
    assert "rigmon mark failed" in capsys.readouterr().out
    # A URL that is no URL (a typo in the job's configuration).
    mark("epoch 1", url="127.0.0.1:9871", token_file=str(tmp_path / "c.token"))  # type: ignore[operator]
    assert "rigmon mark failed" in capsys.readouterr().out


def test_mark_without_a_control_token_says_what_to_give(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nlisten = "127.0.0.1:{free_port()}"\nroot = "{tmp_path}"\n')
    out = rigmon("mark", "--config", str(config), "epoch 1")
    assert out.returncode == 2 and "--control-token-file" in out.stderr
    unreachable = rigmon("mark", "--config", str(config), "--control-token-file",
                         str(_private(tmp_path / "c.token", "c\n")), "epoch 1")
    assert unreachable.returncode == 1 and "no agent is listening at http://127.0.0.1:" in unreachable.stderr


def test_mark_with_a_missing_ca_file_is_a_bad_argument_not_a_traceback(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    token = _private(tmp_path / "c.token", "c\n")
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nlisten = "127.0.0.1:{free_port()}"\nroot = "{tmp_path}"\n')
    missing = tmp_path / "nope.pem"
    code = main(["mark", "--config", str(config), "--url", "https://127.0.0.1:1", "--control-token-file", str(token),
                 "--ca-file", str(missing), "epoch 1"])
    assert code == 2
    assert f"--ca-file {missing}: No such file or directory" in capsys.readouterr().err
    # The agent's own certificate, when its configuration names one that is not there.
    config.write_text(f'[agent]\nlisten = "127.0.0.1:{free_port()}"\nroot = "{tmp_path}"\n'
                      f'tls_cert_file = "{missing}"\ntls_key_file = "{tmp_path / "k"}"\n')
    code = main(["mark", "--config", str(config), "--control-token-file", str(token), "epoch 1"])
    assert code == 2
    assert f"tls_cert_file {missing}: No such file or directory" in capsys.readouterr().err


def test_mark_with_a_malformed_url_is_a_bad_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = _private(tmp_path / "c.token", "c\n")
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nroot = "{tmp_path}"\n')
    code = main(["mark", "--config", str(config), "--url", "http://:::", "--control-token-file", str(token), "e"])
    assert code == 2
    assert "--url http://:::" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["ftp://x:1", "http://:9871"])
def test_mark_with_no_agent_url_is_a_bad_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    token = _private(tmp_path / "c.token", "c\n")
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nroot = "{tmp_path}"\n')
    assert main(["mark", "--config", str(config), "--url", url, "--control-token-file", str(token), "e"]) == 2
    assert f"--url {url}: not an agent URL" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "says"), [([""], "TEXT is empty"), (["  "], "TEXT is empty"),
                                            (["x" * 201], "TEXT is 201 characters; at most 200"),
                                            (["epoch\x1b]0;pwned\x07"], "TEXT holds a control or bidi character"),
                                            (["epoch 3", "--by", "bo\x1bb"], "--by holds a control or bidi character")])
def test_mark_text_the_agent_would_refuse_is_a_bad_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            args: list[str], says: str) -> None:
    """``rigmon mark ""`` (an empty variable in the job's script) was sent, refused by the agent with 400
    and reported as exit 1, which the help keeps for refusals and unreachable agents, not bad arguments."""
    token = _private(tmp_path / "c.token", "c\n")
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nroot = "{tmp_path}"\n')
    # Port 1: nothing listens there; the text is judged before any request.
    assert main(["mark", "--config", str(config), "--url", "127.0.0.1:1", "--control-token-file", str(token),
                 *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rigmon: {says}") and "127.0.0.1:1" not in err


def test_mark_names_the_control_token_it_could_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nroot = "{tmp_path}"\ncontrol_token_file = "{tmp_path / "control.token"}"\n')
    assert main(["mark", "--config", str(config), "e"]) == 2
    assert f"{config}: agent.control_token_file {tmp_path / 'control.token'}: No such file" in capsys.readouterr().err
    assert main(["mark", "--config", str(config), "--control-token-file", str(tmp_path / "mine.token"), "e"]) == 2
    assert f"--control-token-file {tmp_path / 'mine.token'}: No such file" in capsys.readouterr().err


def test_mark_gives_up_on_an_agent_whose_answer_trickles_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Each read of the answer came within the per-read timeout, so an agent whose answer trickled in
    (one header line every 0.2 s, without end) held the training job's ``rigmon mark`` for good."""
    import socket
    import threading

    from rigmon import cli_mark

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 201 Created\r\n")
            while not stop.wait(0.2):
                try:
                    conn.sendall(b"X-Slow: y\r\n")
                except OSError:
                    return

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    monkeypatch.setattr(cli_mark, "DEADLINE_S", 1.0, raising=False)
    codes: list[int] = []
    url = f"127.0.0.1:{listener.getsockname()[1]}"
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nroot = "{tmp_path}"\n')
    args = ["mark", "--config", str(config), "--url", url, "--control-token-file",
            str(_private(tmp_path / "c.token", "c\n")), "epoch 1"]
    runner = threading.Thread(target=lambda: codes.append(main(args)), daemon=True)
    runner.start()
    runner.join(60)  # not a duration check: without a deadline the call never returns
    stop.set()
    listener.close()
    assert codes == [1]
    assert "no answer within 1 s" in capsys.readouterr().err


@pytest.mark.parametrize(("status", "body"), [(201, b"created"), (201, b"[1, 2]"), (400, b'["no"]')])
def test_mark_to_a_service_that_is_no_agent_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    status: int, body: bytes) -> None:
    """A --url to the wrong service (its answer no JSON object) was a traceback."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.handle_request, daemon=True).start()
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nroot = "{tmp_path}"\n')
    url = f"127.0.0.1:{server.server_address[1]}"
    try:
        code = main(["mark", "--config", str(config), "--url", url, "--control-token-file",
                     str(_private(tmp_path / "c.token", "c\n")), "epoch 1"])
    finally:
        server.server_close()
    assert code == 1
    err = capsys.readouterr().err
    assert ("is it a rigmon agent?" in err) if status == 201 else (f"refused the mark (400): {body.decode()}" in err)


def test_mark_where_no_agent_listens_says_so_as_snapshot_does(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """It printed httpx's ``[Errno 111] Connection refused``; now `describe_http_error`'s sentence."""
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["mark", "--url", url, "--control-token-file", str(_private(tmp_path / "c.token", "c\n")), "e"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"rigmon: connection refused: no agent is listening at {url} (is it running?")
    assert "Errno" not in err and len(err.splitlines()) == 1


def test_a_bare_url_reaches_an_agent_configured_with_tls_over_https(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``--url HOST:PORT`` went to http:// even when the agent's configuration serves https, and the
    job read "Server disconnected without sending a response"."""
    from rigmon.agent.agent import Agent
    from rigmon.agent.background import BackgroundAgent
    from rigmon.config import AgentConfig, AgentSection
    from tests.agent.tls_certs import make_tls_files

    tls = make_tls_files(tmp_path)
    section = AgentSection(node="secure", root=str(tmp_path), interval_s=0.1, tls_cert_file=str(tls.cert_file),
                           tls_key_file=str(tls.key_file))
    background = BackgroundAgent(Agent(AgentConfig(agent=section), control_token="c0ntrol", collectors={}))
    url = background.start()
    try:
        config = tmp_path / "agent.toml"
        config.write_text(f'[agent]\nroot = "{tmp_path}"\ntls_cert_file = "{tls.cert_file}"\n'
                          f'tls_key_file = "{tls.key_file}"\n')
        bare = url.split("://", 1)[1]
        code = main(["mark", "--config", str(config), "--url", bare, "--ca-file", str(tls.ca_file),
                     "--control-token-file", str(_private(tmp_path / "c.token", "c0ntrol\n")), "epoch 1"])
        assert code == 0, capsys.readouterr().err
        assert f"marked https://{bare}: epoch 1" in capsys.readouterr().out
    finally:
        background.stop()


def test_url_and_token_options_mark_without_any_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--url`` with its scheme and ``--control-token-file`` give everything: a job that may not read the
    agent's configuration (or a machine without one) marks with them alone. Before, the configuration was
    read all the same, and a named one not there failed the mark ("cannot read")."""
    from rigmon.agent.agent import Agent
    from rigmon.agent.background import BackgroundAgent
    from rigmon.config import AgentConfig, AgentSection

    section = AgentSection(node="box", root=str(tmp_path), interval_s=0.1, state_dir=str(tmp_path / "state"))
    background = BackgroundAgent(Agent(AgentConfig(agent=section), control_token="c0ntrol", collectors={}))
    url = background.start()
    token = _private(tmp_path / "c.token", "c0ntrol\n")
    missing = tmp_path / "no-such-agent.toml"
    try:
        code = main(["mark", "--config", str(missing), "--url", url, "--control-token-file", str(token), "epoch 1"])
        assert code == 0, capsys.readouterr().err
        assert f"marked {url}: epoch 1" in capsys.readouterr().out
        # Where the configuration is needed (no --url: the agent's address), the named file that is not
        # there is the error, as for `rigmon dash --config`, saying what it was read for.
        assert main(["mark", "--config", str(missing), "--control-token-file", str(token), "epoch 2"]) == 2
        assert capsys.readouterr().err == (f"rigmon: {missing}: cannot read: No such file or directory (read for the "
                                           "agent's address; or give --url)\n")
        bare = url.split("://", 1)[1]
        assert main(["mark", "--config", str(missing), "--url", bare, "--control-token-file", str(token), "e"]) == 2
        assert f"(read for the scheme of --url {bare}; or give --url with http:// or https://)" in capsys.readouterr().err
    finally:
        background.stop()


@pytest.mark.parametrize(("options", "needed"), [
    ({"url": "http://10.0.0.5:9871", "control_token_file": "t"}, None),
    ({"url": "https://10.0.0.5:9871", "control_token_file": "t", "ca_file": "ca.pem"}, None),
    ({"url": "HTTPS://10.0.0.5:9871", "control_token_file": "t"}, ("the agent's TLS certificate", "--ca-file")),
    ({"url": "http://10.0.0.5:9871"}, ("the control token", "--control-token-file")),
    ({"control_token_file": "t"}, ("the agent's address", "--url")),
])
def test_what_the_configuration_is_read_for(options: dict[str, str], needed: tuple[str, str] | None) -> None:
    import argparse

    from rigmon.cli_mark import config_needed_for

    args = argparse.Namespace(**{"url": None, "control_token_file": None, "ca_file": None, **options})
    assert config_needed_for(args) == needed
