"""Event rules checked against the events agents emit: a kind, data key or value type no event has is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.agent.agent import FRAME_COLLECTOR_NAMES
from rigmon.alarms.rule_config import rules_from_config
from rigmon.alarms.rules import EventRule, RuleError, RuleKeyError, default_rules, parse_rules
from rigmon.config import AlarmsSection, ConfigError, in_config_file, load_agent_config
from rigmon.schema.events import EVENT_KINDS
from tests.alarms.helpers import Step, event, run

RULE = '[[rule]]\nname = "my_xid"\nkind = "event"\n'


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ('event = "gpu_xid"', "rule 'my_xid': event: no event kind 'gpu_xid'; did you mean 'xid'? (known: "),
        ('event = "gpu_xid_event"', "rule 'my_xid': event: no event kind 'gpu_xid_event'; did you mean 'xid'?"),
        ('event = "xid"\ndata = { xid = ["79"] }',
         "rule 'my_xid': data.xid: 'xid' events carry xid as a whole number, got '79': it would never match"),
        ('event = "xid"\ndata = { xid = [79, "48"] }',
         "rule 'my_xid': data.xid: 'xid' events carry xid as a whole number, got '48'"),
        # Xid codes, GPU indices, steps are integers: a decimal loaded and never matched.
        ('event = "xid"\ndata = { xid = [79.5] }',
         "rule 'my_xid': data.xid: 'xid' events carry xid as a whole number, got 79.5: it would never match"),
        ('event = "gpu_lost"\ndata = { gpu_index = [0, 1.5] }',
         "rule 'my_xid': data.gpu_index: 'gpu_lost' events carry gpu_index as a whole number, got 1.5"),
        ('event = "guard_step"\ndata = { step = [true] }',
         "rule 'my_xid': data.step: 'guard_step' events carry step as a whole number, got true"),
        ('event = "agent_stalled"\ndata = { stalled_s = ["5"] }',
         "rule 'my_xid': data.stalled_s: 'agent_stalled' events carry stalled_s as a number, got '5'"),
        ('event = "xid"\ndata = { code = [79] }',
         "rule 'my_xid': data.code: 'xid' events carry no 'code' (they carry: "),
        ('event = "xid"\ndata = { source = [1] }',
         "rule 'my_xid': data.source: 'xid' events carry source as text, got 1"),
        ('event = "xid"\ndata = { xid = [] }', "rule 'my_xid': data.xid: give at least one value"),
        ('event = "agent_started"\ndata = { node = ["a"] }',
         "rule 'my_xid': data.node: 'agent_started' events carry no data"),
        ('event = "tb_authorized_changed"\ndata = { authorized = [1] }',
         "rule 'my_xid': data.authorized: 'tb_authorized_changed' events carry authorized as true or false, got 1"),
    ],
)
def test_an_event_rule_no_event_can_match_is_refused_naming_file_rule_and_key(tmp_path: Path, keys: str,
                                                                            says: str) -> None:
    """It loaded and never fired, silently: a misspelt kind, a key its events never carry, Xids as text."""
    rules = tmp_path / "rules.toml"
    rules.write_text(f"{RULE}{keys}\n")
    with pytest.raises(RuleError) as info:
        rules_from_config(AlarmsSection(rules_file=str(rules)), FRAME_COLLECTOR_NAMES)
    assert str(info.value).startswith(f"{rules} (rule #1): {says}"), str(info.value)


def test_the_known_kinds_and_keys_are_named() -> None:
    with pytest.raises(RuleError) as info:
        parse_rules(f'{RULE}event = "gpu_xid"\n', "r.toml")
    assert all(kind in str(info.value) for kind in EVENT_KINDS)
    with pytest.raises(RuleError) as info:
        parse_rules(f'{RULE}event = "xid"\ndata = {{ xid_code = [79] }}\n', "r.toml")
    assert "did you mean 'xid'?" in str(info.value)
    assert all(key in str(info.value) for key in EVENT_KINDS["xid"])


@pytest.mark.parametrize(
    "keys",
    ['event = "xid"\ndata = { xid = [79.0], source = ["kmsg"], gpu_index = [0] }',
     'event = "unclean_shutdown"\ndata = { "min:psu_rail.volts.min_volts" = [11.2] }',
     'event = "alarm_firing"\ndata = { value = ["lost", 1, true], restored = [true] }',
     'event = "raid_member_changed"\ndata = { to = ["faulty"] }',
     'event = "agent_stalled"\ndata = { stalled_s = [2.5] }',
     'event = "rdma_link_downed"\ndata = { port = [1], downs = [1, 2.0] }'],
)
def test_rules_on_what_events_carry_load(keys: str) -> None:
    (rule,) = parse_rules(f"{RULE}{keys}\n", "r.toml")
    assert isinstance(rule, EventRule)


def test_the_default_event_rules_name_kinds_and_keys_agents_emit() -> None:
    rules = [r for r in default_rules() if isinstance(r, EventRule)]
    assert {r.event for r in rules} == {"xid", "unclean_shutdown", "rdma_link_downed", "rdma_counter_saturated",
                                        "net_link_flapped"}


def test_a_good_event_rule_still_fires(tmp_path: Path) -> None:
    (rule,) = parse_rules(f'{RULE}event = "xid"\ndata = {{ xid = [79.0] }}\n', "r.toml")
    steps = [Step(0, {}, [event("xid", "gpu:0", "Xid 48", source="nvml", xid=48, gpu_index=0)]),
             Step(1, {}, [event("xid", "gpu:1", "Xid 79", source="nvml", xid=79, gpu_index=1)])]
    assert run([rule], steps)[1] == [(1, "firing", "gpu:1")]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('data = { xid = ["79"] }', "alarms.overrides.gpu_xid_fatal: data.xid: 'xid' events carry xid as a whole number"),
        ("data = { code = [79] }", "alarms.overrides.gpu_xid_fatal: data.code: 'xid' events carry no 'code'"),
        ('event = "xid79"', "alarms.overrides.gpu_xid_fatal: event: no event kind 'xid79'; did you mean 'xid'?"),
    ],
)
@pytest.mark.parametrize("enabled", ["true", "false"])
def test_an_override_of_an_event_rule_is_checked_alike_even_with_alarms_disabled(
        tmp_path: Path, text: str, says: str, enabled: str) -> None:
    """With ``enabled = false`` overrides were not checked at all: the typo waited until alarms were enabled."""
    path = tmp_path / "agent.toml"
    path.write_text(f"[alarms]\nenabled = {enabled}\n[alarms.overrides.gpu_xid_fatal]\n{text}\n")
    with pytest.raises(RuleKeyError) as info:
        rules_from_config(load_agent_config(path, environ={}).alarms, FRAME_COLLECTOR_NAMES)
    assert in_config_file(path, info.value).startswith(f"{path}: {says}")


def test_disabled_alarms_check_every_rule_and_put_none_in_force(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(f'{RULE}event = "xid"\n')
    assert rules_from_config(AlarmsSection(enabled=False, rules_file=str(rules))) == ()
    assert len(rules_from_config(AlarmsSection(enabled=True, rules_file=str(rules)))) == len(default_rules()) + 1
    with pytest.raises(RuleKeyError, match=r"^alarms.overrides.gpu_lostt: no rule of that name"):
        rules_from_config(AlarmsSection(enabled=False, overrides={"gpu_lostt": {"severity": "info"}}))
    with pytest.raises(RuleError, match="select: "):
        rules_from_config(AlarmsSection(enabled=False, overrides={"gpu_lost": {"select": "gpus[*].stat"}}))


def test_the_simulator_refuses_a_bad_override_with_alarms_disabled(tmp_path: Path) -> None:
    from rigmon.cli_sim import load_sim_agent_config

    path = tmp_path / "agent.toml"
    path.write_text('[alarms]\nenabled = false\n[alarms.overrides.gpu_xid_fatal]\ndata = { xid = ["79"] }\n')
    with pytest.raises(ConfigError, match="gpu_xid_fatal: data.xid: 'xid' events carry xid as a whole number"):
        load_sim_agent_config(str(path))
