"""The tmux server the terminal tests drive: this test process's own (``tmux -L``).

Not the default server: that is the developer's own, and the suite's pytest-xdist workers would
share it. And one kept running between tests (``exit-empty off``): by default a server exits with
its last session, and a test's ``new-session`` right after the test before killed its own met the
server exiting ("server exited unexpectedly").
"""

from __future__ import annotations

import atexit
import os
import subprocess
from pathlib import Path

#: The socket name of this process's server (below tmux's own socket directory).
TMUX_SOCKET = f"rigmon-test-{os.getpid()}"


_started: list[bool] = []


def tmux_command(*args: str) -> list[str]:
    """``tmux -L TMUX_SOCKET ARGS...``, the server started (and kept running without sessions) first."""
    if not _started:
        subprocess.run(["tmux", "-L", TMUX_SOCKET, "start-server", ";", "set-option", "-s", "exit-empty", "off"],
                       check=True, capture_output=True)
        _started.append(True)
    return ["tmux", "-L", TMUX_SOCKET, *args]


def tmux(*args: str) -> str:
    """Run a tmux command on this process's server; its standard output (raises if it fails)."""
    return subprocess.run(tmux_command(*args), check=True, capture_output=True, text=True).stdout


@atexit.register
def _remove_server() -> None:
    """At the process's end: stop its server if a test left it running, and remove the socket file
    tmux leaves behind (``/tmp/tmux-UID/rigmon-test-PID``)."""
    if _started:
        subprocess.run(tmux_command("kill-server"), capture_output=True, check=False)
    socket_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
    (socket_dir / TMUX_SOCKET).unlink(missing_ok=True)
