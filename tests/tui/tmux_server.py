"""The tmux server the terminal tests drive: this test process's own (``tmux -L``).

Not the default server: that is the developer's own, and the suite's pytest-xdist workers would
share it, where one test's last session ending stops the server under another's ``new-session``
("server exited unexpectedly").
"""

from __future__ import annotations

import atexit
import os
import subprocess
from pathlib import Path

#: The socket name of this process's server (below tmux's own socket directory).
TMUX_SOCKET = f"rigmon-test-{os.getpid()}"


def tmux_command(*args: str) -> list[str]:
    """``tmux -L TMUX_SOCKET ARGS...``."""
    return ["tmux", "-L", TMUX_SOCKET, *args]


def tmux(*args: str) -> str:
    """Run a tmux command on this process's server; its standard output (raises if it fails)."""
    return subprocess.run(tmux_command(*args), check=True, capture_output=True, text=True).stdout


@atexit.register
def _remove_server() -> None:
    """At the process's end: stop its server if a test left it running, and remove the socket file
    tmux leaves behind (``/tmp/tmux-UID/rigmon-test-PID``)."""
    subprocess.run(tmux_command("kill-server"), capture_output=True, check=False)
    socket_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
    (socket_dir / TMUX_SOCKET).unlink(missing_ok=True)
