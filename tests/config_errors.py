"""A configuration file's error as the agent says it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.config import ConfigError, load_agent_config


def config_error(tmp_path: Path, toml: str) -> tuple[Path, str]:
    """The file ``toml`` was written to (``agent.toml`` under ``tmp_path``) and the error loading it raised."""
    path = tmp_path / "agent.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_agent_config(path, environ={})
    return path, str(info.value)
