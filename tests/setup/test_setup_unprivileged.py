"""`rigmon setup agent --dry-run` by a user who cannot read what root installed (tokens and TLS key
mode 600, a tightened /etc/rigmon): it says what it would do and what it cannot read, never a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.setup.helpers import ENV, files_of, setup_agent

NOBODY = 65534
#: Prints "denied" when this interpreter runs, imports rigmon, can list the root and cannot read the token.
PROBE = """import os, sys
import msgspec, rigmon.cli
os.listdir(sys.argv[1])
try:
    open(sys.argv[2], "rb")
except PermissionError:
    print("denied")
"""


def unprivileged(root: Path) -> tuple[list[str], Callable[[Path], None]]:
    """A command prefix running as a user that cannot read root's private files below ``root``, and
    how to hand an installed file to "root" for that user.

    The user ``nobody`` where it can run this interpreter; else root itself without the capabilities
    that let it read others' files (then the installed files are handed to ``nobody``, which is the
    same situation turned around: the runner is not the owner and has no override).
    """
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux) to drop privileges in a subprocess")
    token = root / "etc/rigmon/read.token"
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    without_caps = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
    def keep(path: Path) -> None:
        """Root owns what setup installed: nobody cannot read its private files."""

    def to_nobody(path: Path) -> None:
        os.chown(path, NOBODY, NOBODY)

    for prefix, hand in ((as_nobody, keep), (without_caps, to_nobody)):
        hand(token)
        probe = subprocess.run([*prefix, sys.executable, "-c", PROBE, str(root), str(token)], capture_output=True,
                               text=True, timeout=60, env=ENV, cwd="/")
        os.chown(token, 0, 0)
        if probe.stdout.strip() == "denied":
            return prefix, hand
    pytest.skip("no unprivileged user here can run this interpreter, import rigmon and reach the test's root")


def dry_run(prefix: list[str], root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "rigmon", "setup", "agent", "--root", str(root),
                           "--node", "rig7", "--hw-root", str(root / "no-hardware"), "--dry-run", *args],
                          capture_output=True, text=True, timeout=120, env=ENV, cwd="/")


def test_a_dry_run_by_a_user_who_cannot_read_the_secrets_shows_the_plan(tmp_path: Path) -> None:
    assert setup_agent(tmp_path).returncode == 0
    prefix, hand = unprivileged(tmp_path)
    for path in (tmp_path / "etc/rigmon").iterdir():
        hand(path)
    before = files_of(tmp_path)

    out = dry_run(prefix, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert "kept /etc/rigmon/read.token (read token): this user cannot read it (Permission denied)" in out.stdout
    assert "kept /etc/rigmon/control.token (control token): this user cannot read it" in out.stdout
    assert "unchanged /etc/systemd/system/rigmon-agent.service" in out.stdout
    assert "(dry run: nothing was changed)" in out.stdout
    assert files_of(tmp_path) == before

    # A tightened /etc/rigmon: nothing in it can be seen, and the dry run says so for each file.
    (tmp_path / "etc/rigmon").chmod(0o700)
    hand(tmp_path / "etc/rigmon")
    out = dry_run(prefix, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert "cannot tell whether /etc/rigmon/agent.key is in place: this user cannot reach it" in out.stdout
    assert "kept /etc/rigmon/agent.toml (agent configuration): this user cannot read it" in out.stdout
    removal = dry_run(prefix, tmp_path, "--uninstall", "--purge")
    assert removal.returncode == 0, removal.stderr
    assert "Traceback" not in removal.stderr
    assert "would remove /etc/rigmon/read.token" in removal.stdout
    assert files_of(tmp_path) == before
    # Without --purge it cannot tell whether agent.toml was edited: it says it keeps it, and why.
    removal = dry_run(prefix, tmp_path, "--uninstall")
    assert removal.returncode == 0, removal.stderr
    assert "Traceback" not in removal.stderr
    assert "kept /etc/rigmon/agent.toml: this user cannot read it to tell whether you changed it" in removal.stdout, removal.stdout
    assert files_of(tmp_path) == before
