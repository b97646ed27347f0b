"""Agent configuration: frozen records (`msgspec.Struct`) loaded from TOML, with RIGMON_* environment overrides.

One module per section of ``agent.toml`` (``[agent]`` in `rigmon.config.agent`, ``[psu]`` in
`rigmon.config.psu`, ...) and the whole file with its loader in `rigmon.config.loader`; every
name is also importable from here (``from rigmon.config import AgentConfig``).
"""

from __future__ import annotations

from rigmon.config.agent import AGENT_RANGES, SYSTEM_STATE_DIR, AgentSection, CollectorSection, default_state_dir
from rigmon.config.alarms import AlarmsSection, RuleOverrideValue
from rigmon.config.common import (
    DEFAULT_CONFIG_PATH,
    DEFAULT_PORT,
    ConfigError,
    ConfigKeyError,
    check_ranges,
    config_file_in_use,
    in_config_file,
    local_url,
    split_listen,
)
from rigmon.config.gpu import GpuSection, KernelLogSection
from rigmon.config.guard import GuardMode, GuardSection
from rigmon.config.journal import JournalSection
from rigmon.config.loader import AgentConfig, load_agent_config, setting_origin
from rigmon.config.notify import NotifyKind, NotifySection
from rigmon.config.probes import DEFAULT_PROBE_PORT, MAX_PROBES_PER_WINDOW, PeerPathSection, PeerSection, ProbesSection
from rigmon.config.psu import PsuHwmonSection, PsuProtocol, PsuSection
from rigmon.config.storage import StorageSection

__all__ = [
    "AGENT_RANGES", "DEFAULT_CONFIG_PATH", "DEFAULT_PORT", "DEFAULT_PROBE_PORT", "MAX_PROBES_PER_WINDOW",
    "SYSTEM_STATE_DIR", "AgentConfig", "AgentSection", "AlarmsSection", "CollectorSection", "ConfigError",
    "ConfigKeyError", "config_file_in_use", "in_config_file",
    "GpuSection", "GuardMode", "GuardSection", "JournalSection", "KernelLogSection", "NotifyKind", "NotifySection",
    "PeerPathSection", "PeerSection", "ProbesSection", "PsuHwmonSection", "PsuProtocol", "PsuSection",
    "RuleOverrideValue", "StorageSection", "check_ranges", "default_state_dir", "load_agent_config", "local_url",
    "setting_origin", "split_listen",
]
