"""The rules in force for an agent: the defaults combined with its ``[alarms]`` rules file, disables and
single-key overrides, each checked against what the agent's frames carry, errors naming where a key was set."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from rigmon.alarms.frame_paths import path_problem
from rigmon.alarms.rules import (
    DEFAULT_RULES_RESOURCE,
    CounterRule,
    Rule,
    RuleError,
    RuleKeyError,
    StalenessRule,
    StateRule,
    ThresholdRule,
    TrendRule,
    default_rules,
    load_rules_file,
    to_table,
)
from rigmon.alarms.selector import parse_selector
from rigmon.config import AlarmsSection
from rigmon.typed import TypedDataError, from_data


def combine_rules(
    defaults: Sequence[Rule],
    extra: Sequence[Rule] = (),
    disable: Sequence[str] = (),
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    source: str = "alarms",
) -> tuple[Rule, ...]:
    """The rules in force: defaults, replaced or extended by ``extra`` (same name replaces),
    without ``disable``d ones, with single keys ``overrides``n by rule name.

    Raises:
        RuleKeyError: an override or a disabled name refers to no rule, or makes it invalid.
    """
    by_name: dict[str, Rule] = {r.name: r for r in defaults}
    for rule in extra:
        by_name[rule.name] = rule
    for name, keys in (overrides or {}).items():
        if name not in by_name:
            raise RuleKeyError(f"{source}.overrides.{name}: no rule of that name "
                               f"(known: {', '.join(sorted(by_name))})")
        by_name[name] = override_rule(by_name[name], keys, f"{source}.overrides.{name}")
    for index, name in enumerate(disable):
        if name in disable[:index]:
            raise RuleKeyError(f"{source}.disable: {name!r} appears twice")
        if name not in by_name:
            raise RuleKeyError(f"{source}.disable: no rule named {name!r}")
        del by_name[name]
    return tuple(r for r in by_name.values() if r.enabled)


#: Keys an override may not change: they say which rule it is and what it is.
FIXED_KEYS = ("name", "kind")
#: Conditions of which a rule gives exactly one: an override giving one replaces the rule's.
ALTERNATIVE_KEYS = (("below", "above"), ("equals", "one_of", "not_one_of", "below_first_seen", "expected", "vanished"))


def override_rule(rule: Rule, keys: Mapping[str, Any], where: str) -> Rule:
    """``rule`` with single keys replaced, each checked as the rule's own file would check it
    (``data = { xid = [79] }`` of an event rule replaces its whole ``data`` table).

    A key of `ALTERNATIVE_KEYS` replaces the alternative the rule gave: ``expected = { eth0 = 10000 }``
    on ``net_link_slower`` (``below_first_seen``) needs no ``below_first_seen = false``, and
    ``above`` turns a ``below`` rule around (TOML has no null to unset the other key with).

    Args:
        where: the override's key (``alarms.overrides.gpu_xid_fatal``), which errors name.

    Raises:
        RuleKeyError: naming ``where`` and the key: unknown, of the wrong shape or value, ``name``
            or ``kind``, or leaving the rule invalid as a whole.
    """
    for key in FIXED_KEYS:
        if key in keys and keys[key] != getattr(rule, key):
            raise RuleKeyError(f"{where}.{key}: cannot be overridden (it is {getattr(rule, key)!r}); "
                               f"define a rule of its own in alarms.rules_file instead")
    table = to_table(rule)
    for group in ALTERNATIVE_KEYS:
        if any(key in keys for key in group):
            for key in group:
                table.pop(key, None)
    try:
        return from_data(type(rule), {**table, **dict(keys)}, strict=True)
    except TypedDataError as exc:
        # A check of the rule as a whole ("give exactly one of below or above") has no key to name.
        raise RuleKeyError(f"{where}: {exc.reason}" if exc.path == "<root>" else f"{where}.{exc}") from None


def rules_from_config(section: AlarmsSection, collectors: Collection[str] | None = None) -> tuple[Rule, ...]:
    """The rules in force for an agent's ``[alarms]``: none with ``enabled = false``, but every one checked.

    Every rule's ``select`` must be a path the frame's records have (`path_problem`): a misspelt
    one matches nothing ever, so its rule would never fire.

    Args:
        section: the agent's ``[alarms]``.
        collectors: every collector name a frame of this agent can carry; when given, a state
            rule's ``collector`` must be one of them (a misspelt one was never ok, so the rule
            never ran).

    Raises:
        RuleError: the rules file or an override is invalid (naming the rule).
    """
    defaults = default_rules() if section.defaults else ()
    extra = load_rules_file(section.rules_file, "alarms.rules_file") if section.rules_file else ()
    rules = combine_rules(defaults, extra, section.disable, section.overrides, source="alarms")
    from_file = {r.name for r in extra}
    for rule in rules:
        selector = rule.selector
        problem = path_problem(selector, numeric=_compares_numbers(rule)) if selector is not None else None
        if problem is not None:
            raise _misfit(rule.name, "select", problem, section, from_file)
        if isinstance(rule, ThresholdRule) and rule.unknown_select:
            problem = path_problem(parse_selector(rule.unknown_select))
            if problem is not None:
                raise _misfit(rule.name, "unknown_select", problem, section, from_file)
        if collectors is not None and isinstance(rule, StateRule) and rule.collector \
                and rule.collector not in collectors:
            raise _misfit(rule.name, "collector", f"no collector named {rule.collector!r} "
                          f"(known: {', '.join(sorted(collectors))})", section, from_file)
    return rules if section.enabled else ()


def _compares_numbers(rule: Rule) -> bool:
    """Whether the rule skips readings that are not numbers (so a path to text never fires)."""
    if isinstance(rule, StateRule):
        return rule.below_first_seen or bool(rule.expected)
    return isinstance(rule, (ThresholdRule, CounterRule, TrendRule, StalenessRule))


def _misfit(name: str, key: str, problem: str, section: AlarmsSection, from_file: set[str]) -> RuleError:
    """The error for a key of rule ``name`` that does not fit the agent, naming where it was set: the
    override's key (the command adds the agent's file), else the rules file, else the defaults."""
    if key in section.overrides.get(name, {}):
        return RuleKeyError(f"alarms.overrides.{name}.{key}: {problem}")
    where = section.rules_file if name in from_file else f"rigmon/alarms/{DEFAULT_RULES_RESOURCE}"
    return RuleError(f"{where}: rule {name!r}: {key}: {problem}")
