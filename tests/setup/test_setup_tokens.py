"""`rigmon setup agent` with given token files: installed, kept, replaced, refused, and the printed lines that
follow them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rigmon.config import load_agent_config
from tests.setup.helpers import files_of, setup_agent, token_file


def test_a_given_read_token_is_installed_then_kept_then_replaced(tmp_path: Path) -> None:
    # A lab: one token made once, copied to every node, so one Prometheus job reaches them all.
    root = tmp_path / "node"
    root.mkdir()
    lab = token_file(tmp_path / "lab.token", "c0ffee" * 8 + "\n")
    first = setup_agent(root, "--read-token-file", str(lab))
    assert first.returncode == 0, first.stderr
    files = files_of(root)
    assert files["etc/rigmon/read.token"] == (0o600, b"c0ffee" * 8 + b"\n")
    control = files["etc/rigmon/control.token"][1]
    assert control.strip() and control.strip() != b"c0ffee" * 8  # still its own, generated
    assert "created /etc/rigmon/read.token (read token, as given), mode 600" in first.stdout
    assert "token file  /etc/rigmon/read.token (as given with --read-token-file)" in first.stdout
    # The dashboard uses its one copy of the lab token for every node, not a per-node copy.
    assert "cp lab.token ~/.config/rigmon/ && chmod 600 ~/.config/rigmon/lab.token" in first.stdout
    assert "rigmon dash https://rig7:9871 --token-file ~/.config/rigmon/lab.token --ca-file " \
           "~/.config/rigmon/rig7.pem" in first.stdout
    assert 'token_file = "~/.config/rigmon/lab.token"' in first.stdout and "rig7.token" not in first.stdout

    # Without the flag a re-run keeps the token in place (given or generated) and restarts nothing.
    kept = setup_agent(root)
    assert kept.returncode == 0, kept.stderr
    assert files_of(root) == files and "kept /etc/rigmon/read.token" in kept.stdout
    assert "systemctl start rigmon-agent.service" in kept.stdout

    # With the flag it replaces the token in place, and the agent is restarted to take it.
    other = token_file(tmp_path / "other.token", "  beef" * 1 + "0123456789abcdef0123\n\n")
    replaced = setup_agent(root, "--read-token-file", str(other), "--control-token-file", str(lab))
    assert replaced.returncode == 0, replaced.stderr
    assert (root / "etc/rigmon/read.token").read_text() == "beef0123456789abcdef0123\n"
    assert (root / "etc/rigmon/control.token").read_text() == "c0ffee" * 8 + "\n"
    assert {(root / "etc/rigmon" / n).stat().st_mode & 0o777 for n in ("read.token", "control.token")} == {0o600}
    assert "updated /etc/rigmon/read.token (read token, as given), mode 600" in replaced.stdout
    assert "systemctl restart rigmon-agent.service" in replaced.stdout
    # The same file again: nothing to do.
    again = setup_agent(root, "--read-token-file", str(other))
    assert "unchanged /etc/rigmon/read.token" in again.stdout and "systemctl start rigmon-agent" in again.stdout
    # The installed token is one the agent takes (its own checks) from the installed configuration.
    from rigmon.agent.server import read_token_file

    config = load_agent_config(root / "etc/rigmon/agent.toml", environ={})
    assert config.agent.token_file == "/etc/rigmon/read.token"
    assert read_token_file(str(root / "etc/rigmon/read.token")) == "beef0123456789abcdef0123"


@pytest.mark.parametrize(("name", "text", "mode", "says"), [
    ("others-read", "abcdef0123456789\n", 0o644, "is readable or writable by other users; chmod 600 it"),
    ("group-read", "abcdef0123456789\n", 0o640, "is readable or writable by other users; chmod 600 it"),
    ("empty", "\n", 0o600, "is empty"),
    ("two-lines", "abcdef\n0123456789\n", 0o600, "holds spaces, line breaks or control characters"),
    ("directory", "", 0o700, "is a directory"),
    ("fifo", "", 0o600, "is a FIFO; a token file must be a regular file"),
    ("absent", "", 0o600, "No such file or directory"),
])
def test_a_token_file_the_agent_would_refuse_is_refused_before_anything_is_written(
        tmp_path: Path, name: str, text: str, mode: int, says: str) -> None:
    root = tmp_path / "node"
    root.mkdir()
    path = tmp_path / f"{name}.token"
    if name == "directory":
        path.mkdir(mode=mode)
    elif name == "fifo":
        os.mkfifo(path, mode)
    elif name != "absent":
        token_file(path, text, mode)
    for flag in ("--read-token-file", "--control-token-file"):
        out = setup_agent(root, flag, str(path), "--dry-run")
        assert out.returncode == 2, out.stderr
        assert out.stderr.startswith(f"rigmon: {flag} {path}") and says in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and out.stdout == ""
    assert files_of(root) == {}


def test_the_same_token_for_read_and_control_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "node"
    root.mkdir()
    lab = token_file(tmp_path / "lab.token", "0123456789abcdef0123456789abcdef\n")
    both = setup_agent(root, "--read-token-file", str(lab), "--control-token-file", str(lab))
    assert both.returncode == 2 and "the same token for read and control" in both.stderr, both.stderr
    assert files_of(root) == {}
    # Also against the token in place that a re-run keeps: the agent would refuse to start.
    assert setup_agent(root, "--read-token-file", str(lab)).returncode == 0
    installed = files_of(root)
    clash = setup_agent(root, "--control-token-file", str(lab))
    assert clash.returncode == 2 and "(the read token in place under " in clash.stderr, clash.stderr
    assert len(clash.stderr.strip().splitlines()) == 1 and files_of(root) == installed


def test_token_files_go_without_uninstall(tmp_path: Path) -> None:
    lab = token_file(tmp_path / "lab.token", "0123456789abcdef\n")
    out = setup_agent(tmp_path, "--uninstall", "--read-token-file", str(lab))
    assert out.returncode == 2 and "go without --uninstall" in out.stderr


def test_the_printed_lines_follow_the_token_and_certificate_files_a_kept_config_names(tmp_path: Path) -> None:
    # An edited agent.toml that reads another token file: the given token would not be the agent's.
    assert setup_agent(tmp_path).returncode == 0
    config = tmp_path / "etc/rigmon/agent.toml"
    config.write_text(config.read_text().replace('token_file = "/etc/rigmon/read.token"',
                                                 'token_file = "/etc/rigmon/lab.token"')
                      .replace('"/etc/rigmon/agent.pem"', '"/etc/rigmon/rig7.pem"'))
    lab = token_file(tmp_path / "lab.token", "0123456789abcdef0123\n")
    out = setup_agent(tmp_path, "--read-token-file", str(lab))
    assert out.returncode == 0, out.stderr
    assert "reads its read token from /etc/rigmon/lab.token, not /etc/rigmon/read.token" in out.stdout
    assert "  token file  /etc/rigmon/lab.token (one job:" in out.stdout
    assert "  ca_file     copy /etc/rigmon/rig7.pem" in out.stdout
    assert "scp root@rig7:/etc/rigmon/lab.token ~/.config/rigmon/rig7.token" in out.stdout
    assert "scp root@rig7:/etc/rigmon/rig7.pem ~/.config/rigmon/rig7.pem" in out.stdout
