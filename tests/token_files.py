"""Token files as the agent takes them (mode 600), and the configuration that gives one as the control token."""

from __future__ import annotations

from pathlib import Path


def private_file(path: Path, text: str) -> Path:
    """``path`` holding ``text``, readable by its owner only (the agent refuses a token others can read)."""
    path.write_text(text)
    path.chmod(0o600)
    return path


def control_token_config(tmp_path: Path, token: str) -> dict[str, object]:
    """Agent configuration (``extra_config`` of a simulated rig) whose control token is ``token``."""
    path = private_file(tmp_path / "control.token", token + "\n")
    return {"agent": {"control_token_file": str(path)}}
