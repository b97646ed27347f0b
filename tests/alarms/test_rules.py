"""Rules files: the shipped defaults, clear errors naming the rule, overrides and extra files."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.agent.agent import FRAME_COLLECTOR_NAMES
from rigmon.alarms.rule_config import combine_rules, rules_from_config
from rigmon.alarms.rules import (
    CounterRule,
    EventRule,
    RuleError,
    RuleKeyError,
    StateRule,
    ThresholdRule,
    TrendRule,
    default_rules,
    parse_rules,
)
from rigmon.config import AlarmsSection, ConfigError, in_config_file, load_agent_config
from rigmon.schema import Event
from tests.alarms.helpers import Step, event, run
from tests.config_errors import config_error


def test_defaults_cover_the_incidents() -> None:
    by_name = {r.name: r for r in default_rules()}
    rail_warn, rail_crit = by_name["psu_rail_low_warning"], by_name["psu_rail_low_critical"]
    assert isinstance(rail_warn, ThresholdRule) and rail_warn.select == "psu_rail.volts.min_volts"
    assert (rail_warn.below, rail_warn.severity) == (11.7, "warning")
    assert isinstance(rail_crit, ThresholdRule) and (rail_crit.below, rail_crit.severity) == (11.5, "critical")
    xid = by_name["gpu_xid_fatal"]
    assert isinstance(xid, EventRule) and xid.event == "xid" and set(xid.data["xid"]) == {79, 48, 74, 94, 95}
    lost = by_name["gpu_lost"]
    assert isinstance(lost, StateRule) and lost.select == "gpus[*].state" and lost.equals == "lost"
    assert by_name["thunderbolt_degraded"].severity == "warning"
    assert by_name["md_array_broken"].severity == "critical"
    counters = {r.select for r in by_name.values() if isinstance(r, CounterRule)}
    assert counters == {"gpus[*].pcie_replay_total", "gpus[*].nvlinks[*].replay_total", "gpus[*].nvlinks[*].crc_flit_total",
                        "infiniband[*].errors_total"}
    assert by_name["rdma_port_down"].select == by_name["rdma_port_below_rate"].select == "infiniband[*].link_state"
    trend = by_name["psu_path_resistance_rising"]
    assert isinstance(trend, TrendRule) and trend.select == "path_resistance[*].resistance_mohm"
    assert isinstance(by_name["unclean_shutdown"], EventRule)
    assert all(r.description for r in by_name.values())


RULE = '[[rule]]\nname = "r1"\nkind = "threshold"\nselect = "psu_rail.volts.min_volts"\nbelow = 11.7\n'


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (RULE.replace("below", "belwo"), "rule 'r1': belwo: unknown key"),
        (RULE.replace("11.7", '"low"'), "rule 'r1': below: expected a number"),
        (RULE + "above = 12.0\n", "rule 'r1'"),
        (RULE.replace('"threshold"', '"thresh"'), "rule 'r1': kind must be one of"),
        (RULE.replace("psu_rail.volts.min_volts", "psu[.x"), "rule 'r1'"),
        (RULE.replace("psu_rail.volts.min_volts", "peer_paths[key_mismatch=false,peer_flooded].rtt_p99_us"),
         "rule 'r1': select: bad filter [key_mismatch=false,peer_flooded] in selector"),
        (RULE.replace("psu_rail.volts.min_volts", "peer_paths[state=ok,state=silent].rtt_p99_us"),
         ("rule 'r1': select: bad filter [state=ok,state=silent] in selector "
          '"peer_paths[state=ok,state=silent].rtt_p99_us" at column 21: field \'state\' given twice')),
        (RULE + 'severity = "fatal"\n', "rule 'r1': severity: expected one of"),
        (RULE + "hold_s = -1.0\n", "rule 'r1'"),
        (RULE + RULE, "rule 'r1' is defined twice"),
        (RULE.replace('name = "r1"\n', ""), "rule without a name"),
        ('[[rule]]\nname = "e"\nkind = "event"\n', "rule 'e'"),
        ('[[rule]]\nname = "s"\nkind = "state"\nselect = "a.b"\n', "give exactly one of"),
        ('[[rule]]\nname = "s"\nkind = "state"\nselect = "a.b"\nequals = "x"\none_of = ["y"]\n', "exactly one"),
        ('[[rule]]\nname = "c"\nkind = "counter"\nselect = "a.b"\nmax_increase = 1\n', "window_s must be positive"),
        ("[rules]\n", "unknown top-level key 'rules'"),
        ("[[rule\n", "not valid TOML"),
        ('[[rule]]\nname = "bad name!"\nkind = "event"\nevent = "x"\n', "name must be"),
        # Values that loaded and then silently did nothing: refused, naming the key.
        ('[[rule]]\nname = "e"\nkind = "event"\nevent = "xid"\ndata = { xid = [] }\n',
         "rule 'e': data.xid: give at least one value"),
        (RULE + "window_s = 60.0\n", "rule 'r1': window_s needs aggregate"),
        ('[[rule]]\nname = "e"\nkind = "event"\nevent = "xid"\nhold_s = 5.0\n', "rule 'e': hold_s: an event rule"),
        ('[[rule]]\nname = "e"\nkind = "event"\nevent = "xid"\nclear_hold_s = 5.0\n',
         "rule 'e': clear_hold_s: an event rule fires at once"),
        (RULE + 'message = "rail {value:.3f V"\n', "rule 'r1': message: unmatched '{'"),
        (RULE + 'message = "rail } {value}"\n', "rule 'r1': message: Single '}'"),
        (RULE + 'message = "rail {} V"\n', "rule 'r1': message: field {} has no name"),
        (RULE + 'subject = "gpu:{0}"\n', "rule 'r1': subject: field {0} has no name"),
        (RULE + 'message = "{value!x}"\n', "rule 'r1': message: field {value!x}: unknown conversion"),
        # A threshold's unknown readings: both keys, and a field of the records the rule reads.
        (RULE + 'unknown_select = "psu_rail.stale"\n', "rule 'r1': give unknown_select and unknown_values together"),
        (RULE.replace("psu_rail.volts.min_volts", "raid[*].vs_fastest_array_pct")
         + 'unknown_select = "gpus[*].state"\nunknown_values = ["unknown"]\n',
         "rule 'r1': unknown_select: gpus[*].state must read a field of the records raid[*].vs_fastest_array_pct"),
    ],
)
def test_invalid_rules_are_clear_errors_naming_the_rule(text: str, says: str) -> None:
    with pytest.raises(RuleError) as info:
        parse_rules(text, "my-rules.toml")
    assert "my-rules.toml" in str(info.value)
    assert says in str(info.value)


def test_overrides_disable_and_extra_rules() -> None:
    extra = parse_rules(RULE + '\n[[rule]]\nname = "psu_rail_low_critical"\nkind = "threshold"\n'
                        'select = "psu_rail.volts.min_volts"\nbelow = 11.3\nseverity = "critical"\n', "extra")
    rules = combine_rules(default_rules(), extra, disable=["collector_silent"],
                          overrides={"psu_rail_low_warning": {"below": 11.6, "hold_s": 2}})
    by_name = {r.name: r for r in rules}
    assert "collector_silent" not in by_name and "r1" in by_name
    warn = by_name["psu_rail_low_warning"]
    assert isinstance(warn, ThresholdRule) and (warn.below, warn.hold_s, warn.hysteresis) == (11.6, 2.0, 0.05)
    crit = by_name["psu_rail_low_critical"]
    assert isinstance(crit, ThresholdRule) and crit.below == 11.3


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"disable": ["nope"]}, "alarms.disable: no rule named 'nope'"),
        ({"overrides": {"nope": {"below": 1.0}}}, "alarms.overrides.nope: no rule of that name"),
        ({"overrides": {"psu_rail_low_warning": {"blow": 1.0}}}, "alarms.overrides.psu_rail_low_warning.blow: unknown key"),
        ({"overrides": {"psu_rail_low_warning": {"above": 1.0, "below": 2.0}}},
         "alarms.overrides.psu_rail_low_warning: give exactly one of below or above"),
        ({"overrides": {"net_link_slower": {"expected": {"eth0": 1.0}, "below_first_seen": True}}},
         "alarms.overrides.net_link_slower: give exactly one of equals"),
        ({"overrides": {"psu_rail_low_warning": {"kind": "state"}}},
         "alarms.overrides.psu_rail_low_warning.kind: cannot be overridden"),
        ({"overrides": {"psu_rail_low_warning": {"name": "mine"}}},
         "alarms.overrides.psu_rail_low_warning.name: cannot be overridden"),
    ],
)
def test_bad_overrides_name_the_rule(kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(RuleError) as info:
        combine_rules(default_rules(), **kwargs)  # type: ignore[arg-type]
    assert says in str(info.value)


def test_a_check_of_the_whole_rule_names_the_rule_not_a_root_path() -> None:
    with pytest.raises(RuleError) as info:
        parse_rules('[[rule]]\nname = "mine"\nkind = "threshold"\nselect = "psu_rail.volts.min_volts"\n',
                    "/etc/rigmon/rules.toml")
    assert str(info.value) == "/etc/rigmon/rules.toml (rule #1): rule 'mine': give exactly one of below or above"


def test_a_rules_file_that_cannot_be_read_names_the_key_and_one_not_utf8_its_file(tmp_path: Path) -> None:
    with pytest.raises(RuleKeyError) as info:
        rules_from_config(AlarmsSection(rules_file=str(tmp_path / "missing.toml")))
    assert str(info.value) == f"alarms.rules_file: {tmp_path / 'missing.toml'}: cannot read: No such file or directory"
    binary = tmp_path / "rules.toml"
    binary.write_bytes(b"\xff\xfe[[rule]]\n")
    with pytest.raises(RuleError) as info:
        rules_from_config(AlarmsSection(rules_file=str(binary)))
    assert str(info.value) == f"{binary}: not UTF-8 text (invalid start byte at byte 0)"


def test_disabled_by_enabled_false() -> None:
    rules = combine_rules(default_rules(), overrides={"gpu_lost": {"enabled": False}})
    assert "gpu_lost" not in {r.name for r in rules}


def test_agent_config_alarms_section(tmp_path: Path) -> None:
    extra = tmp_path / "rules.toml"
    extra.write_text(RULE)
    path = tmp_path / "agent.toml"
    path.write_text(f'[alarms]\nrules_file = "{extra}"\ndisable = ["collector_silent"]\n'
                    '[alarms.overrides.md_array_degraded]\nseverity = "critical"\n'
                    '[alarms.overrides.net_link_slower]\nexpected = { eth0 = 10000.0 }\nbelow_first_seen = false\n')
    config = load_agent_config(path, environ={})
    by_name = {r.name: r for r in rules_from_config(config.alarms)}
    assert "r1" in by_name and "collector_silent" not in by_name
    assert by_name["md_array_degraded"].severity == "critical"
    slower = by_name["net_link_slower"]
    assert isinstance(slower, StateRule) and slower.expected == {"eth0": 10000.0}
    assert rules_from_config(AlarmsSection(defaults=False)) == ()


def test_missing_rules_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match="cannot read"):
        rules_from_config(AlarmsSection(rules_file=str(tmp_path / "missing.toml")))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[[notify]]\nkind = "pager"\nurl = "http://x"\n', "notify[0].kind"),
        ('[[notify]]\nkind = "webhook"\n', "notify[0]"),
        ('[[notify]]\nkind = "command"\nurl = "http://x"\n', "notify[0]"),
        ('[[notify]]\nkind = "webhook"\nurl = "http://x"\nretries = "3"\n', "notify[0].retries"),
        ('[[notify]]\nkind = "webhook"\nurl = "http://x"\nmin_severity = "loud"\n', "notify[0].min_severity"),
        ('[alarms]\nrecent = 0\n', "alarms"),
        ('[alarms]\ndisabled = ["x"]\n', "alarms.disabled"),
    ],
)
def test_bad_alarm_and_notify_config_names_the_key(tmp_path: Path, text: str, key: str) -> None:
    assert f": {key}" in config_error(tmp_path, text)[1]


def xid(source: str, code: int, gpu: int) -> Event:
    return event("xid", f"gpu:{gpu}", f"Xid {code} on GPU {gpu}", source=source, xid=code, gpu_index=gpu)


def test_an_overridden_event_rule_data_fires_for_the_listed_xids_only(tmp_path: Path) -> None:
    """``data`` of an event rule, overridden in agent.toml as the rules file spells it, was refused
    with "expected a string"; now it replaces the rule's table and the engine matches by it."""
    path = tmp_path / "agent.toml"
    path.write_text("[alarms.overrides.gpu_xid_fatal]\ndata = { xid = [79] }\n")
    by_name = {r.name: r for r in rules_from_config(load_agent_config(path, environ={}).alarms)}
    rule = by_name["gpu_xid_fatal"]
    assert isinstance(rule, EventRule) and rule.data == {"xid": (79,)}
    steps = [Step(0, {}, [xid("nvml", 48, 0)]),
             Step(1, {}, [xid("nvml", 79, 1)]),
             Step(2, {}, [xid("nvml", 74, 2)])]
    _, seen = run([rule], steps)
    assert seen == [(1, "firing", "gpu:1")]


def test_an_event_rule_data_override_matches_every_listed_key(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[alarms.overrides.gpu_xid_fatal]\ndata = { xid = [79, 48], source = ["kmsg"] }\n')
    (rule,) = [r for r in rules_from_config(load_agent_config(path, environ={}).alarms) if r.name == "gpu_xid_fatal"]
    steps = [Step(0, {}, [xid("nvml", 79, 0)]),
             Step(10, {}, [xid("kmsg", 48, 1)])]
    assert run([rule], steps)[1] == [(10, "firing", "gpu:1")]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("data = { xid = 79 }", "alarms.overrides.gpu_xid_fatal.data.xid: expected a list, got 79"),
        ("data = [79]", "alarms.overrides.gpu_xid_fatal.data: expected a table/object, got [79]"),
        ("data = 79", "alarms.overrides.gpu_xid_fatal.data: expected a table/object, got 79"),
        ("data = { xid = { code = 79 } }",
         "alarms.overrides.gpu_xid_fatal.data.xid: expected a string, an integer, a number, true/false or a list"),
        ("data = { xid = [[79]] }", "alarms.overrides.gpu_xid_fatal.data.xid[0]: expected a string, an integer"),
    ],
)
def test_an_event_rule_data_override_of_a_wrong_shape_names_the_file_and_key(tmp_path: Path, text: str,
                                                                           says: str) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(f"[alarms.overrides.gpu_xid_fatal]\n{text}\n")
    with pytest.raises((ConfigError, RuleKeyError)) as info:
        rules_from_config(load_agent_config(path, environ={}).alarms)
    message = in_config_file(path, info.value) if isinstance(info.value, RuleKeyError) else str(info.value)
    assert message.startswith(f"{path}: {says}"), message
    assert "expected a string, got" not in message


@pytest.mark.parametrize("template", ["{value:.3f} V", "gpu:{index}", "{value!r} {{literal}}", "{value:{digits}f}",
                                      "{event_message}", ""])
def test_templates_that_can_render_are_accepted(template: str) -> None:
    (rule,) = parse_rules(RULE + f'message = "{template}"\nsubject = "{template}"\n', "rules.toml")
    assert rule.message == rule.subject == template


def test_a_bad_template_or_window_in_an_override_names_the_key() -> None:
    with pytest.raises(RuleKeyError, match=r"^alarms.overrides.psu_rail_low_warning: message: field \{\} has no name"):
        combine_rules(default_rules(), overrides={"psu_rail_low_warning": {"message": "{} V"}})
    with pytest.raises(RuleKeyError, match=r"^alarms.overrides.psu_rail_low_warning: window_s needs aggregate"):
        combine_rules(default_rules(), overrides={"psu_rail_low_warning": {"window_s": 30.0}})
    (warn,) = [r for r in combine_rules(default_rules(), overrides={
        "psu_rail_low_warning": {"window_s": 30.0, "aggregate": "min"}}) if r.name == "psu_rail_low_warning"]
    assert isinstance(warn, ThresholdRule) and (warn.aggregate, warn.window_s) == ("min", 30.0)


def test_a_state_rule_collector_must_name_a_collector_of_the_agent(tmp_path: Path) -> None:
    """A misspelt ``collector`` was never ok, so its rule never ran: refused, naming where it was set."""
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "gpus_gone"\nkind = "state"\nselect = "gpus[*].uuid"\nvanished = true\n'
                     'collector = "gpus"\n')
    known = FRAME_COLLECTOR_NAMES
    with pytest.raises(RuleError) as info:
        rules_from_config(AlarmsSection(rules_file=str(rules)), known)
    assert str(info.value).startswith(f"{rules}: rule 'gpus_gone': collector: no collector named 'gpus' (known: ")
    assert not isinstance(info.value, RuleKeyError)  # the rules file's error, not agent.toml's
    with pytest.raises(RuleKeyError, match=r"^alarms.overrides.gpus_gone.collector: no collector named 'gpux'"):
        rules_from_config(AlarmsSection(rules_file=str(rules), overrides={"gpus_gone": {"collector": "gpux"}}), known)
    fixed = rules_from_config(AlarmsSection(rules_file=str(rules), overrides={"gpus_gone": {"collector": "gpu"}}),
                              known)
    assert [r.collector for r in fixed if isinstance(r, StateRule) and r.name == "gpus_gone"] == ["gpu"]
    # The agent's own parts are collectors of its frames too.
    assert {"gpu", "psu", "rail_path", "guard", "journal"} <= set(known)


def test_disabling_a_rule_twice_says_so() -> None:
    with pytest.raises(RuleKeyError, match=r"^alarms.disable: 'gpu_lost' appears twice$"):
        combine_rules(default_rules(), disable=["gpu_lost", "collector_silent", "gpu_lost"])


def test_an_override_giving_another_condition_replaces_the_rule_s() -> None:
    """README: "give the link an `expected` speed instead" of the first one seen. As an override, that
    was refused ("give exactly one of ...") unless it also unset below_first_seen; a threshold could
    not be turned from below to above at all (TOML has no null)."""
    by_name = {r.name: r for r in combine_rules(default_rules(), overrides={
        "net_link_slower": {"expected": {"eth0": 10000}},
        "psu_rail_low_warning": {"above": 12.3},
        "md_array_degraded": {"equals": "degraded"},
    })}
    slower = by_name["net_link_slower"]
    assert isinstance(slower, StateRule) and (slower.expected, slower.below_first_seen) == ({"eth0": 10000.0}, False)
    rail = by_name["psu_rail_low_warning"]
    assert isinstance(rail, ThresholdRule) and (rail.below, rail.above, rail.hysteresis) == (None, 12.3, 0.05)
    degraded = by_name["md_array_degraded"]
    assert isinstance(degraded, StateRule) and (degraded.equals, degraded.one_of) == ("degraded", ())
    steps = [Step(0, {"net": [{"name": "eth0", "speed_mbps": 10000}]}),
             Step(40, {"net": [{"name": "eth0", "speed_mbps": 1000}]})]
    assert run([slower], steps)[1] == [(40, "pending", "link:eth0")]


@pytest.mark.parametrize(
    ("select", "says"),
    [
        ("psu_rial.volts.min_volts", "select: the frame has no field 'psu_rial' (it has: amd_gpus,"),
        ("gpus[*].powr_w", "select: gpus[*] has no field 'powr_w'"),
        ("net[nmae=eth0].speed_mbps", "select: items of net have no field 'nmae'"),
        ("host[*].cpu_pct", "select: host is not a list: [*] cannot apply"),
        ("host.cpu_pct.now", "select: host.cpu_pct is a single value, without a field 'now'"),
        ("psu_rail.volts", "select: psu_rail.volts holds fields, not a value"),
        ("collectors.*.stat", "select: collectors.* has no field 'stat'"),
        ("peer_paths[key_mismatch=false,peer_floded=false].rtt_p99_us",
         "select: items of peer_paths have no field 'peer_floded'"),
        # Each [...] filters what the one before it kept: the second meets a path, not a list.
        ("peer_paths[key_mismatch=false][peer_flooded=false].rtt_p99_us",
         ("select: peer_paths[key_mismatch=false] is not a list: [peer_flooded=false] cannot apply (to match the "
          "same items on both fields, write [key_mismatch=false,peer_flooded=false])")),
        # A value with a comma is quoted where the message quotes the filter, so the hint parses as meant.
        ("net[name='a,b'][speed_mbps=1000].mtu",
         ('select: net[name="a,b"] is not a list: [speed_mbps=1000] cannot apply (to match the same items on '
          'both fields, write [name="a,b",speed_mbps=1000])')),
        # So is one with a bracket (a plain a]b would not parse back).
        ("net[name='a]b'][speed_mbps=1000].mtu",
         ('select: net[name="a]b"] is not a list: [speed_mbps=1000] cannot apply (to match the same items on '
          'both fields, write [name="a]b",speed_mbps=1000])')),
    ],
)
def test_a_select_path_no_frame_has_is_refused_naming_the_file_rule_and_key(tmp_path: Path, select: str,
                                                                           says: str) -> None:
    """A path that names no field of the frame's records matches nothing, ever: the rule never fired."""
    rules = tmp_path / "rules.toml"
    rules.write_text(RULE.replace("psu_rail.volts.min_volts", select))
    with pytest.raises(RuleError) as info:
        rules_from_config(AlarmsSection(rules_file=str(rules)))
    assert str(info.value).startswith(f"{rules}: rule 'r1': {says}"), str(info.value)


def test_a_selector_typo_is_refused_at_load_naming_the_rule_key_and_column(tmp_path: Path) -> None:
    """An unclosed quote was read as one value, the conditions after it included: the rule loaded and
    never fired."""
    select = "gpus[name='abc,kind=x].power_w"
    rules = tmp_path / "rules.toml"
    rules.write_text(RULE + RULE.replace("r1", "r2").replace("psu_rail.volts.min_volts", select))
    with pytest.raises(RuleError) as info:
        rules_from_config(AlarmsSection(rules_file=str(rules)))
    assert str(info.value).startswith(f'{rules} (rule #2): rule \'r2\': select: bad selector "{select}" at column 11: '
                                      "quote ' not closed"), str(info.value)
    with pytest.raises(RuleKeyError) as info:
        rules_from_config(AlarmsSection(overrides={"gpu_lost": {"select": "gpus[name=eth0'].state"}}))
    assert str(info.value).startswith("alarms.overrides.gpu_lost: select: bad filter [name=eth0'] in selector "
                                      "\"gpus[name=eth0'].state\" at column 15: the value of 'name' ends with a quote")


def test_a_select_override_no_frame_has_names_the_key_and_paths_to_absent_hardware_are_fine() -> None:
    with pytest.raises(RuleKeyError, match=r"^alarms.overrides.gpu_lost.select: gpus\[\*\] has no field 'sate'"):
        rules_from_config(AlarmsSection(overrides={"gpu_lost": {"select": "gpus[*].sate"}}))
    # Every shipped rule reads a path the frame has; one for hardware a node lacks is not an error.
    assert rules_from_config(AlarmsSection()) == combine_rules(default_rules())
    ok = ("collectors.host.state", "temperatures[-1].temp_c", "gpus[index=3].nvlinks[*].crc_flit_total", "node",
          "net[name=eth0].speed_mbps", "collectors.*.sampled_at", "taken_at",
          "peer_paths[key_mismatch=false,peer_flooded=false].state")
    for select in ok:
        assert rules_from_config(AlarmsSection(overrides={"gpu_lost": {"select": select}}))


@pytest.mark.parametrize(
    ("rule", "select", "says"),
    [
        ("psu_rail_low_warning", "gpus[*].state", "gpus[*].state is one of ['ok', 'lost'], and this rule compares numbers"),
        ("psu_rail_low_warning", "psu_rail.stale", "psu_rail.stale is true/false, and this rule compares numbers"),
        ("gpu_pcie_replay_rising", "gpus[*].name", "gpus[*].name is text, and this rule compares numbers"),
        ("net_link_slower", "net[*].operstate", "net[*].operstate is text, and this rule compares numbers"),
    ],
)
def test_a_rule_comparing_numbers_refuses_a_path_to_text(rule: str, select: str, says: str) -> None:
    """A threshold, counter, trend or staleness rule (or a state rule against a first-seen or expected
    number) skips readings that are not numbers: on a path to text it could never fire."""
    with pytest.raises(RuleKeyError) as info:
        rules_from_config(AlarmsSection(overrides={rule: {"select": select}}))
    assert str(info.value) == f"alarms.overrides.{rule}.select: {says}"
    # A state rule comparing equality reads text and numbers alike.
    assert rules_from_config(AlarmsSection(overrides={"gpu_lost": {"select": "gpus[*].power_w"}}))


def test_a_threshold_unknown_select_must_be_a_path_frames_have() -> None:
    """A misspelt ``unknown_select`` never matches: the rule would resolve on no news again, silently."""
    with pytest.raises(RuleKeyError, match=r"^alarms.overrides.md_array_lagging.unknown_select: .*helth"):
        rules_from_config(AlarmsSection(overrides={"md_array_lagging": {"unknown_select": "raid[*].helth"}}))
