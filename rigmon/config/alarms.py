"""``[alarms]``: which rules are in force (rigmon/alarms)."""

from __future__ import annotations

import msgspec

from rigmon.config.common import check_ranges


RuleScalar = str | int | float | bool
#: What a key of ``[alarms.overrides.RULE]`` may hold: every shape a rule's own key has (a number, a
#: list like ``one_of``, a table of numbers like ``expected`` or of lists like an event rule's
#: ``data``). Which one the key takes is checked against the rule itself (`rigmon.alarms.rules`).
RuleOverrideValue = RuleScalar | tuple[RuleScalar, ...] | dict[str, RuleScalar | tuple[RuleScalar, ...]]


class AlarmsSection(msgspec.Struct, frozen=True, gc=False):
    """``[alarms]``: which rules are in force."""

    enabled: bool = True
    """Evaluate node rules on every frame."""
    defaults: bool = True
    """Start from the rules shipped with rigmon."""
    rules_file: str = ""
    """TOML file of extra ``[[rule]]`` tables; a rule named like a default replaces it."""
    disable: tuple[str, ...] = ()
    """Names of rules to switch off."""
    overrides: dict[str, dict[str, RuleOverrideValue]] = msgspec.field(default_factory=dict)
    """Single keys of rules by name: ``[alarms.overrides.psu_rail_low_warning] below = 11.6``."""
    recent: int = 200
    """Resolved alarms kept for /v1/alarms."""
    persist: bool = True
    """Keep trends, first-seen speeds and alarms across restarts in ``<state_dir>/alarm-state.json``
    (only when the agent has a state directory)."""
    save_interval_s: float = 60.0
    """Seconds between writes of the alarm state file (also written soon after an alarm changes, and at a
    clean stop)."""

    def __post_init__(self) -> None:
        check_ranges(self, {"recent": (1, 1_000_000), "save_interval_s": (0.01, 86400.0)})
