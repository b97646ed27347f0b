"""Helpers of the `rigmon setup agent` tests: the command run into a temporary root, the files it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def setup_agent(root: Path, *args: str, hw_root: Path | None = None) -> subprocess.CompletedProcess[str]:
    if hw_root is None:
        hw_root = root / "no-hardware"  # an empty tree: a node without any of the hardware
        hw_root.mkdir(exist_ok=True)
    hw = ["--hw-root", str(hw_root)]
    return subprocess.run([sys.executable, "-m", "rigmon", "setup", "agent", "--root", str(root), "--node", "rig7",
                           *hw, *args], capture_output=True, text=True, timeout=120, env=ENV, cwd=root)


def files_of(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mode & 0o7777, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def token_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path
