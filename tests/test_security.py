"""Security properties that SECURITY.md promises: private token files everywhere, secrets
redacted from snapshots, privileges dropped after start-up."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from rigmon.cluster.config import DashConfig, DashConfigError, NodeEntry, resolve_targets
from rigmon.redact import REDACTED, redact
from rigmon.sim.tree import write_tree

REPO = Path(__file__).resolve().parents[1]


def test_dashboard_refuses_a_token_file_others_can_read(tmp_path: Path) -> None:
    token = tmp_path / "tok"
    token.write_text("s3cret\n")
    token.chmod(0o644)
    config = DashConfig(nodes=(NodeEntry("a:9871", token_file=str(token)),))
    with pytest.raises(DashConfigError, match="token_file .* readable or writable by other users"):
        resolve_targets([], config)
    token.chmod(0o600)
    assert resolve_targets([], config)[0].token == "s3cret"


def test_snapshot_refuses_a_token_file_others_can_read(tmp_path: Path) -> None:
    token = tmp_path / "tok"
    token.write_text("s3cret\n")
    token.chmod(0o640)
    out = subprocess.run([sys.executable, "-m", "rigmon", "snapshot", "http://127.0.0.1:9", "--token-file", str(token),
                          "-o", str(tmp_path / "b.tar.gz")], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(REPO)})
    assert out.returncode == 2 and "chmod 600" in out.stderr


def test_snapshot_config_hides_header_values_and_command_arguments() -> None:
    config = {"notify": [
        {"kind": "ntfy", "url": "https://ntfy.example/topic-secret", "headers": {"X-API-Key": "K1", "Title": "t"}},
        {"kind": "command", "command": ["curl", "-u", "bob:hunter2", "--silent", "https://hook.example/p?k=K2"]},
    ], "agent": {"token_file": "/etc/rigmon/token", "tls_key_file": "/etc/rigmon/key.pem"}}
    text = repr(redact(config))
    for secret in ("K1", "hunter2", "K2", "topic-secret"):
        assert secret not in text
    red = redact(config)
    assert red["notify"][1]["command"] == ["curl", "-u", REDACTED, "--silent", REDACTED]
    assert red["agent"] == config["agent"]  # paths of secret files are shown, their contents never read


@pytest.mark.skipif(os.getuid() != 0, reason="dropping privileges needs root")
@pytest.mark.parametrize("journal", [True, False], ids=["journal", "no-journal"])
def test_agent_started_as_root_drops_to_the_user(journal: bool) -> None:
    nobody = pwd.getpwnam("nobody")
    # Outside pytest's 0700 temporary tree, so the unprivileged agent can reach its files.
    base = Path(tempfile.mkdtemp(prefix="rigmon-priv-"))
    try:
        base.chmod(0o755)
        write_tree(base / "root", {"/proc/stat": "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n",
                                   "/dev/kmsg": "6,1,1,-;Linux version\n"})
        for path in (base / "root").rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        (base / "root").chmod(0o755)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        config = base / "agent.toml"
        config.write_text("" if journal else "[journal]\nenabled = false\n")
        config.chmod(0o644)
        proc = subprocess.Popen(
            [sys.executable, "-m", "rigmon", "agent", "--config", str(config), "--root", str(base / "root"),
             "--state-dir", str(base / "state"), "--listen", f"127.0.0.1:{port}", "--user", "nobody"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={"PYTHONPATH": str(REPO), "HOME": str(base)})
        try:
            deadline = time.monotonic() + 20
            frame = None
            while time.monotonic() < deadline and frame is None:
                try:
                    r = httpx.get(f"http://127.0.0.1:{port}/v1/latest", timeout=2)
                    frame = r.json() if r.status_code == 200 and r.json()["seq"] >= 3 else None
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            assert frame is not None, proc.stderr.read() if proc.poll() is not None and proc.stderr else "no frame"
            status = Path(f"/proc/{proc.pid}/status").read_text()
            uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
            assert set(map(int, uids)) == {nobody.pw_uid}
            if journal:
                # The journal went on being written by the unprivileged agent.
                assert frame["collectors"]["journal"]["state"] == "ok", frame["collectors"]["journal"]
            assert (base / "state").stat().st_uid == nobody.pw_uid
        finally:
            proc.terminate()
            proc.wait(10)
        assert proc.returncode == 0
        # The alarm state is saved at the clean stop, by the unprivileged agent, journal or not.
        saved = base / "state" / "alarm-state.json"
        assert saved.is_file() and saved.stat().st_uid == nobody.pw_uid
    finally:
        shutil.rmtree(base)


def test_unknown_user_is_a_clear_error(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--state-dir",
                          str(tmp_path / "s"), "--listen", "127.0.0.1:0", "--user", "no-such-user-rigmon"],
                         capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(REPO)})
    assert out.returncode == 2 and "no-such-user-rigmon: no such user" in out.stderr
