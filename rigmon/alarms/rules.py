"""Alarm rules: one frozen record (a `msgspec.Struct`) per rule kind, read from TOML, with errors naming the rule.

A rules file is a list of ``[[rule]]`` tables; ``kind`` picks the rule class, and every other
key must be a field of it (an unknown key is an error, so a typo never silently disables a
rule). The package ships `default_rules.toml`; an agent's ``[alarms]`` section may add a file
of its own, drop rules by name and override single keys of a rule.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from rigmon.alarms.event_kinds import check_event_rule
from rigmon.alarms.selector import Selector, SelectorError, parse_selector
from rigmon.alarms.templates import check_template
from rigmon.config import ConfigKeyError
from rigmon.schema import Severity
from rigmon.typed import TypedDataError, from_data

RuleKind = Literal["threshold", "state", "counter", "event", "staleness", "trend"]
Aggregate = Literal["last", "min", "mean", "max"]
Scalar = str | int | float | bool

SECONDS_PER_DAY = 86400.0
DEFAULT_RULES_RESOURCE = "default_rules.toml"


class RuleError(ValueError):
    """A rules file or override is invalid; the message names the file and the rule."""


class RuleKeyError(RuleError, ConfigKeyError):
    """An ``[alarms]`` ``disable`` or ``overrides`` key of the agent's file is invalid: the message names
    the key, and the command that loaded the file adds its name."""


class RuleBase(msgspec.Struct, frozen=True, gc=False):
    """Keys every rule has.

    A frozen `msgspec.Struct`, not a dataclass (whose generated code was most of these modules' import
    time); ``gc=False``: a rule holds only plain data, so it cannot be part of a cycle.

    Attributes:
        name: unique name (``psu_rail_low_warning``); alarms and overrides refer to it.
        kind: which rule class the rule is.
        severity: of the alarm when it fires.
        description: why the rule exists (shown in /v1/info and the README).
        message: ``str.format`` template for the alarm's text; fields ``value``,
            ``subject``, ``node``, ``rule``, the subject's identity labels (``index``,
            ``name``, ``key``...) and the rule's own keys (``below``, ``max_age_s``...).
        subject: template for the alarm's subject (``gpu:{index}``); default: the
            selector's canonical path of the record (``gpus[index=0]``).
        identity: template for what makes two readings one alarm when the subject's text may change
            (``md:{uuid}``: an md array renumbered md127 -> md126 by a reboot); default, or when it
            cannot render (no ``uuid`` label on an older kernel), the subject.
        hold_s: the condition must hold this long before the alarm fires (pending before).
        clear_hold_s: the condition must stay clear this long before the alarm resolves.
        absent_resolve_s: a firing alarm whose subject is no longer reported resolves after
            this long (a link unplugged, a collector failing); a pending one is dropped at once.
        enabled: false switches the rule off.
    """

    name: str
    kind: RuleKind
    severity: Severity = "warning"
    description: str = ""
    message: str = ""
    subject: str = ""
    identity: str = ""
    hold_s: float = 0.0
    clear_hold_s: float = 0.0
    absent_resolve_s: float = 60.0
    enabled: bool = True

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"name must be letters, digits, '_' or '-', got {self.name!r}")
        if RULE_CLASSES.get(self.kind) is not type(self):
            raise ValueError(f"kind {self.kind!r} does not fit {type(self).__name__}")
        for key in ("hold_s", "clear_hold_s", "absent_resolve_s"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must not be negative")
        for key in ("message", "subject", "identity"):
            try:
                check_template(getattr(self, key))
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None

    @property
    def selector(self) -> Selector | None:
        """The parsed selector of rules that read frames; ``None`` for event rules."""
        text = getattr(self, "select", None)
        return parse_selector(text) if isinstance(text, str) else None


def _check_selector(text: str) -> None:
    try:
        parse_selector(text)
    except SelectorError as exc:
        raise ValueError(f"select: {exc}") from None


class ThresholdRule(RuleBase, frozen=True, gc=False):
    """Fires while a number is above or below a limit.

    Attributes:
        select: the reading (``psu_rail.volts.min_volts``).
        below: fire while the value is below this.
        above: fire while the value is above this.
        hysteresis: once firing, the value must come back past the limit by this much
            (in the reading's unit) to clear, so a value hovering at the limit does not flap.
        aggregate: compare the ``min``, ``mean`` or ``max`` of the values seen over
            ``window_s`` instead of the ``last`` one.
        window_s: the aggregation window.
        unknown_select: a reading of the same records as ``select`` (``raid[*].health`` beside
            ``raid[*].vs_fastest_array_pct``) that says, with one of ``unknown_values``, that the
            record's readings are not known now (an md array's health ``unknown`` while /proc/mdstat
            cannot be read, its rates null): no verdict on that record, so an alarm neither resolves
            (not even by the number's absence) nor fires on no news (a pending one stays pending).
        unknown_values: the values of ``unknown_select`` that say so; given with it.
    """

    select: str = ""
    below: float | None = None
    above: float | None = None
    hysteresis: float = 0.0
    aggregate: Aggregate = "last"
    window_s: float = 0.0
    unknown_select: str = ""
    unknown_values: tuple[Scalar, ...] = ()

    def __post_init__(self) -> None:
        RuleBase.__post_init__(self)
        _check_selector(self.select)
        if (self.below is None) == (self.above is None):
            raise ValueError("give exactly one of below or above")
        if self.hysteresis < 0 or self.window_s < 0:
            raise ValueError("hysteresis and window_s must not be negative")
        if self.aggregate != "last" and self.window_s <= 0:
            raise ValueError(f"aggregate {self.aggregate!r} needs a positive window_s")
        if self.aggregate == "last" and self.window_s > 0:
            # Without an aggregate the window is not used: the rule would look at each reading alone.
            raise ValueError("window_s needs aggregate = \"min\", \"mean\" or \"max\" (the last value has no window)")
        if bool(self.unknown_select) != bool(self.unknown_values):
            raise ValueError("give unknown_select and unknown_values together")
        if self.unknown_select:
            _check_selector(self.unknown_select)
            if parse_selector(self.unknown_select).steps[:-1] != parse_selector(self.select).steps[:-1]:
                # Another record's reading: its subjects are not the rule's, so it would never say anything.
                raise ValueError(f"unknown_select: {self.unknown_select} must read a field of the records "
                                 f"{self.select} reads (the same path up to its last field)")


class StateRule(RuleBase, frozen=True, gc=False):
    """Fires while a reading is in a bad state; exactly one condition is given.

    Attributes:
        select: the reading (``raid[*].health``, ``collectors.*.state``).
        equals: fire while the value equals this.
        one_of: fire while the value is one of these.
        not_one_of: fire while the value is none of these.
        below_first_seen: fire while a number is below the first value seen for the same
            subject (a link that trained at 40 Gb/s and now runs at 20).
        expected: fire while a number is below the value given for the subject's identity
            (``{ eth0 = 10000 }``: keys are the first identity label, e.g. the link name).
        vanished: fire for every subject that was seen before and is now missing (a GPU
            gone against the inventory seen at start); set ``collector`` so a collector
            failure does not count as every device vanishing.
        collector: evaluate only while this collector's state is ``ok``.
        unknown_values: values that say the reading is not known now (an md array's health
            ``unknown`` while /proc/mdstat cannot be read): no verdict on them, so an alarm
            neither resolves nor fires on no news (a pending one stays pending).
    """

    select: str = ""
    equals: Scalar | None = None
    one_of: tuple[Scalar, ...] = ()
    not_one_of: tuple[Scalar, ...] = ()
    below_first_seen: bool = False
    expected: dict[str, float] = msgspec.field(default_factory=dict)
    vanished: bool = False
    collector: str = ""
    unknown_values: tuple[Scalar, ...] = ()

    def __post_init__(self) -> None:
        RuleBase.__post_init__(self)
        _check_selector(self.select)
        given = [self.equals is not None, bool(self.one_of), bool(self.not_one_of), self.below_first_seen,
                 bool(self.expected), self.vanished]
        if sum(given) != 1:
            raise ValueError("give exactly one of equals, one_of, not_one_of, below_first_seen, expected, vanished")


class CounterRule(RuleBase, frozen=True, gc=False):
    """Fires while a raw counter (``*_total``) rises by more than ``max_increase`` within ``window_s``.

    A counter that goes down was reset (driver reload, device re-created): its history
    starts again from the new value.
    """

    select: str = ""
    max_increase: float = 0.0
    window_s: float = 0.0

    def __post_init__(self) -> None:
        RuleBase.__post_init__(self)
        _check_selector(self.select)
        if self.window_s <= 0:
            raise ValueError("window_s must be positive")
        if self.max_increase < 0:
            raise ValueError("max_increase must not be negative")


class EventRule(RuleBase, frozen=True, gc=False):
    """Fires when an event of kind ``event`` arrives (one alarm per event subject).

    An event is a moment, so its alarm is a latch: it stays firing until acknowledged, or
    until ``resolve_after_s`` passes without another matching event.

    Attributes:
        event: the event kind (``xid``, ``unclean_shutdown``): one of `rigmon.schema.events.EVENT_KINDS`.
        data: required values of the event's data: ``{ xid = [79, 48] }`` fires only for
            those Xid codes. Keys and value types are those the kind's events carry.
        resolve_after_s: resolve this long after the last matching event.
    """

    event: str = ""
    data: dict[str, tuple[Scalar, ...]] = msgspec.field(default_factory=dict)
    resolve_after_s: float = 3600.0

    def __post_init__(self) -> None:
        RuleBase.__post_init__(self)
        if not self.event:
            raise ValueError("event (the event kind) is required")
        if self.resolve_after_s <= 0:
            raise ValueError("resolve_after_s must be positive")
        # An event is a moment: its alarm fires at once and stays until acknowledged or
        # `resolve_after_s`. The timing keys of other rules would be taken and never used.
        for key, unused in (("hold_s", 0.0), ("clear_hold_s", 0.0), ("absent_resolve_s", 60.0)):
            if getattr(self, key) != unused:
                raise ValueError(f"{key}: an event rule fires at once and stays firing until acknowledged or "
                                 f"resolve_after_s after its last event; it has no {key}")
        check_event_rule(self.event, self.data)  # a kind, key or value no agent's events have never fires


class StalenessRule(RuleBase, frozen=True, gc=False):
    """Fires while a timestamp (a ``*_at`` field, Unix seconds) is older than its limit
    and has not changed for ``min_frames`` evaluations.

    Attributes:
        max_age_s: the limit in seconds.
        max_intervals: when positive, the limit of a subject whose ``key`` label names a
            collector is at least this many of that collector's intervals
            (``max(max_age_s, max_intervals * interval_s)``), so a collector configured to
            run every 300 s is not reported silent between its runs.
        min_frames: evaluations the timestamp must have stood still.
    """

    select: str = ""
    max_age_s: float = 0.0
    min_frames: int = 3
    max_intervals: float = 0.0

    def __post_init__(self) -> None:
        RuleBase.__post_init__(self)
        _check_selector(self.select)
        if self.max_age_s <= 0:
            raise ValueError("max_age_s must be positive")
        if self.min_frames < 1:
            raise ValueError("min_frames must be at least 1")
        if self.max_intervals < 0:
            raise ValueError("max_intervals must not be negative")


class TrendRule(RuleBase, frozen=True, gc=False):
    """Fires while a reading rises faster than ``max_rise_per_day`` (least-squares slope).

    Values are averaged into buckets of ``bucket_s`` (so days of history stay small) and
    the slope is fitted over the buckets of the last ``window_s``, once they span at least
    ``min_span_s``.
    """

    select: str = ""
    max_rise_per_day: float = 0.0
    window_s: float = 3 * SECONDS_PER_DAY
    bucket_s: float = 600.0
    min_span_s: float = SECONDS_PER_DAY

    def __post_init__(self) -> None:
        RuleBase.__post_init__(self)
        _check_selector(self.select)
        if self.window_s <= 0 or self.bucket_s <= 0:
            raise ValueError("window_s and bucket_s must be positive")
        if not 0 < self.min_span_s <= self.window_s:
            raise ValueError("min_span_s must be positive and at most window_s")


Rule = ThresholdRule | StateRule | CounterRule | EventRule | StalenessRule | TrendRule

RULE_CLASSES: dict[str, type[Rule]] = {
    "threshold": ThresholdRule,
    "state": StateRule,
    "counter": CounterRule,
    "event": EventRule,
    "staleness": StalenessRule,
    "trend": TrendRule,
}


def parse_rule(table: Mapping[str, Any], where: str) -> Rule:
    """Build one rule from its TOML table.

    Raises:
        RuleError: naming ``where`` and the rule.
    """
    name = table.get("name")
    label = f"{where}: rule {name!r}" if isinstance(name, str) else f"{where}: rule without a name"
    kind = table.get("kind")
    if kind not in RULE_CLASSES:
        raise RuleError(f"{label}: kind must be one of {', '.join(RULE_CLASSES)}, got {kind!r}")
    try:
        return from_data(RULE_CLASSES[kind], dict(table), strict=True)
    except TypedDataError as exc:
        # A check of the rule as a whole ("give exactly one of below or above") has no key to name.
        raise RuleError(f"{label}: {exc.reason if exc.path == '<root>' else exc}") from None


def parse_rules(text: str, source: str) -> tuple[Rule, ...]:
    """Parse a rules file (``[[rule]]`` tables).

    Raises:
        RuleError: bad TOML, a bad rule (named), or two rules with one name.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{source}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"rule"})
    if unknown:
        raise RuleError(f"{source}: unknown top-level key {unknown[0]!r} (rules are [[rule]] tables)")
    tables = data.get("rule", [])
    if not isinstance(tables, list):
        raise RuleError(f"{source}: rule must be an array of tables ([[rule]])")
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, table in enumerate(tables):
        if not isinstance(table, dict):
            raise RuleError(f"{source}: rule #{i + 1} is not a table")
        rule = parse_rule(table, f"{source} (rule #{i + 1})")
        if rule.name in seen:
            raise RuleError(f"{source}: rule {rule.name!r} is defined twice")
        seen.add(rule.name)
        rules.append(rule)
    return tuple(rules)


def default_rules() -> tuple[Rule, ...]:
    """The rules shipped with rigmon (`default_rules.toml`)."""
    # Next to this module in every install (the wheel is unpacked, never imported from a zip): read as a
    # plain file. importlib.resources, for this one read, cost 3-8 ms of the agent's start where nothing
    # else had imported it (its modules, then zipfile for the reader; benchmarks/results-startup2.md).
    text = Path(__file__).with_name(DEFAULT_RULES_RESOURCE).read_text(encoding="utf-8")
    return parse_rules(text, f"rigmon/alarms/{DEFAULT_RULES_RESOURCE}")


def load_rules_file(path: str, key: str = "") -> tuple[Rule, ...]:
    """Read and parse a rules file.

    Args:
        path: the file.
        key: the configuration key that names it (``alarms.rules_file``): a file that cannot be
            read is that key's error (`RuleKeyError`), which the command adds its file to.

    Raises:
        RuleError: unreadable (a `RuleKeyError` with ``key``), not UTF-8 text, or invalid.
    """
    error = RuleKeyError if key else RuleError
    where = f"{key}: {path}" if key else path
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise error(f"{where}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise RuleError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_rules(text, path)


def to_table(rule: Rule) -> dict[str, Any]:
    """The rule as a TOML-shaped table (the inverse of `parse_rule`)."""
    return {name: _plain(getattr(rule, name)) for name in rule.__struct_fields__}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
