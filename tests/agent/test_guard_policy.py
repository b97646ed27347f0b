"""The undervolt guard's pure decisions: trigger, steps, restore, rate ceiling, clock derivation, config checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.agent.guard.policy import (
    GuardState,
    Observation,
    decide,
    derive_app_clocks,
    hold,
    observe,
    plan_settings,
    release,
    steps_of,
)
from rigmon.config import ConfigError, GuardSection, load_agent_config
from rigmon.schema import (
    Alarm,
    AlarmState,
    CollectorStatus,
    Event,
    Frame,
    GpuReading,
    GuardGpuSettings,
    PsuAdcCounters,
    PsuRailReading,
    Readings,
    VoltageEnvelope,
)

GPUS = (0, 1, 2, 3)
CFG = GuardSection(enabled=True, rail_below_volts=11.5, rail_count=2, rail_window_s=30.0, step_after_s=10.0,
                   restore_after_s=60.0, max_actions_per_hour=3)


def obs(at: float, volts: float | None = 11.9, **kw: object) -> Observation:
    return Observation(at=at, rail_min_volts=volts, gpus=GPUS, **kw)  # type: ignore[arg-type]


def run(config: GuardSection, observations: list[Observation], state: GuardState | None = None):
    state = state or GuardState()
    out = []
    for o in observations:
        state, decisions = decide(state, o, config)
        out += [(o.at, d.kind, d.step, d.step_name) for d in decisions]
    return state, out


def test_one_sag_below_the_count_does_not_trigger() -> None:
    state, out = run(CFG, [obs(0, 11.3), obs(1), obs(2, 11.6)])
    assert out == [] and state.step == 0 and len(state.sags) == 1


def test_n_sags_within_the_window_engage_step_one_on_every_gpu() -> None:
    state, out = run(CFG, [obs(0, 11.3), obs(5), obs(10, 11.4)])
    assert out == [(10, "engage", 1, "app_clocks")]
    assert state.gpus == GPUS and state.engaged_at == 10 and state.trigger and "11.400 V" in state.trigger


def test_the_trigger_gives_the_sag_to_the_millivolt() -> None:
    # Two decimals made a sag to 11.497 V read "rail minimum 11.50 V below 11.5 V".
    state, _ = run(CFG, [obs(0, 11.497), obs(5, 11.497)])
    assert state.trigger and state.trigger.startswith("rail minimum 11.497 V below 11.5 V")


def test_sags_further_apart_than_the_window_do_not_trigger() -> None:
    _, out = run(CFG, [obs(0, 11.3), obs(31, 11.3), obs(62, 11.3)])
    assert out == []


def test_a_repeated_window_is_not_a_new_sag() -> None:
    _, out = run(CFG, [obs(0, 11.3), obs(1, None), obs(2, None)])
    assert out == []
    # The same ADC window (same seq) in three frames is one sag; a new window is another.
    same = [Observation(at=t, rail_min_volts=11.3, rail_window=7.0, gpus=GPUS) for t in (0, 1, 2)]
    _, out = run(CFG, same)
    assert out == []
    _, out = run(CFG, same + [Observation(at=3, rail_min_volts=11.3, rail_window=8.0, gpus=GPUS)])
    assert out == [(3, "engage", 1, "app_clocks")]


def test_alarm_firing_triggers_at_once() -> None:
    _, out = run(CFG, [obs(0, alarms_fired=("psu_rail_low_critical",))])
    assert out == [(0, "engage", 1, "app_clocks")]


def test_hw_slowdown_needs_enough_gpus() -> None:
    _, out = run(CFG, [obs(0, throttled_gpus=(1,))])
    assert out == []
    _, out = run(CFG, [obs(0, throttled_gpus=(1, 2))])
    assert out == [(0, "engage", 1, "app_clocks")]
    _, out = run(GuardSection(throttle_gpus=0), [obs(0, throttled_gpus=GPUS)])
    assert out == []


def test_steps_escalate_only_after_step_after_s_and_stop_at_the_last() -> None:
    config = GuardSection(rail_count=1, step_after_s=10.0, restore_after_s=600.0, max_actions_per_hour=10)
    _, out = run(config, [obs(0, 11.3), obs(5, 11.3), obs(10, 11.3), obs(21, 11.3), obs(40, 11.3)])
    assert out == [(0, "engage", 1, "app_clocks"), (10, "step", 2, "locked_clocks"), (21, "step", 3, "power_limit")]


def test_steps_follow_the_configuration() -> None:
    assert steps_of(GuardSection()) == ("app_clocks", "locked_clocks", "power_limit")
    assert steps_of(GuardSection(locked_clocks=False, power_limit_w=0)) == ("app_clocks",)
    config = GuardSection(rail_count=1, step_after_s=0, locked_clocks=False, power_limit_w=0)
    _, out = run(config, [obs(0, 11.3), obs(1, 11.3)])
    assert out == [(0, "engage", 1, "app_clocks")]


def test_restore_after_healthy_for_restore_after_s() -> None:
    state, out = run(CFG, [obs(0, 11.3), obs(1, 11.3), obs(30), obs(60.5)])
    assert out == [(1, "engage", 1, "app_clocks")]
    state, out = run(CFG, [obs(61)], state)
    assert out == [(61, "restore", 0, None)] and state.step == 0 and state.sags == ()


def test_a_new_trigger_postpones_the_restore() -> None:
    state, out = run(CFG, [obs(0, 11.3), obs(1, 11.3), obs(49, 11.3), obs(50, 11.3), obs(100)])
    assert [k for _, k, _, _ in out] == ["engage", "step"]
    _, out = run(CFG, [obs(111)], state)
    assert out == [(111, "restore", 0, None)]


def test_held_guard_does_not_restore_until_released() -> None:
    state, _ = run(CFG, [obs(0, 11.3), obs(1, 11.3)])
    state = hold(state)
    state, out = run(CFG, [obs(500)], state)
    assert out == [] and state.step == 1
    state, decisions = release(state, 501, "operator")
    assert [d.kind for d in decisions] == ["restore"] and decisions[0].gpus == GPUS and not state.held


def test_ceiling_on_actions_per_hour_stops_engaging_and_says_so_once() -> None:
    config = GuardSection(rail_count=1, restore_after_s=5.0, max_actions_per_hour=2, step_after_s=1000)
    seq = [obs(0, 11.3), obs(10), obs(20, 11.3), obs(30), obs(40, 11.3), obs(41, 11.3), obs(50)]
    _, out = run(config, seq)
    assert [(t, k) for t, k, _, _ in out] == [(0, "engage"), (10, "restore"), (20, "engage"), (30, "restore"),
                                             (40, "limited")]
    # An hour after the first action the ceiling lets one more through.
    state, out = run(config, seq + [obs(3601, 11.3)])
    assert out[-1][:2] == (3601, "engage")


def test_an_operators_release_keeps_the_guard_away_for_the_quiet_time() -> None:
    state, _ = run(CFG, [obs(0, 11.3), obs(1, 11.3)])
    state, decisions = release(state, 2, "operator", quiet_s=60)
    assert [d.kind for d in decisions] == ["restore"] and state.released_until == 62
    state, out = run(CFG, [obs(3, 11.3), obs(4, 11.3), obs(61, 11.3)], state)
    assert out == []
    _, out = run(CFG, [obs(62, 11.3), obs(63, 11.3)], state)
    assert out == [(62, "engage", 1, "app_clocks")]  # the sags of the quiet time count


def test_release_when_armed_does_nothing() -> None:
    state, decisions = release(GuardState(held=True), 1.0, "operator")
    assert decisions == [] and not state.held


def test_configured_gpus_only() -> None:
    state, _ = run(GuardSection(rail_count=1, gpus=(3,)), [obs(0, 11.3)])
    assert state.gpus == (3,)


def test_derive_app_clocks_from_supported_clocks() -> None:
    v100 = {877: list(range(1530, 134, -7))}
    mem, graphics = derive_app_clocks(v100, 1530, 0.66) or (0, 0)
    assert mem == 877 and graphics <= 1530 * 0.66 and graphics > 990
    assert derive_app_clocks({}, None, 0.66) is None
    assert derive_app_clocks({877: [1530, 1400]}, 1530, 0.5) == (877, 1400)  # nothing fits: the lowest


def test_plan_settings_per_step() -> None:
    base = GuardGpuSettings(index=0, app_clock_mem_mhz=877, app_clock_graphics_mhz=1312, power_limit_w=300.0)
    one = plan_settings("app_clocks", base, (877, 1005), 200.0)
    assert (one.app_clock_mem_mhz, one.app_clock_graphics_mhz) == (877, 1005)
    two = plan_settings("locked_clocks", one, (877, 1005), 200.0)
    assert two.locked_clock_max_mhz == 1005
    three = plan_settings("power_limit", two, (877, 1005), 200.0)
    assert three.power_limit_w == 200.0 and three.locked_clock_max_mhz == 1005


def test_a_step_never_raises_what_the_operator_set_lower() -> None:
    low = GuardGpuSettings(index=0, app_clock_mem_mhz=877, app_clock_graphics_mhz=900, power_limit_w=160.0)
    one = plan_settings("app_clocks", low, (877, 1005), 200.0)
    assert (one.app_clock_mem_mhz, one.app_clock_graphics_mhz) == (877, 900)
    assert plan_settings("locked_clocks", one, (877, 1005), 200.0).locked_clock_max_mhz == 900
    assert plan_settings("power_limit", one, (877, 1005), 200.0).power_limit_w == 160.0


def _frame(events: tuple[Event, ...] = (), windows: int = 1, stale: bool = False) -> Frame:
    rail = PsuRailReading(
        port="/dev/x", protocol="rm1", connected=True, stale=stale, envelope_source="device", windows=windows,
        volts=VoltageEnvelope(11.8, 11.31, 12.0), amps=None, channels_volts={}, channels_amps={}, samples=None,
        window_s=1.0, flags=0, under_voltage_latched=False, sag=True, seq=1, device_id=None, firmware=None,
        sensor=None, last_window_at=None, counters=PsuAdcCounters(),
    )
    gpus = tuple(
        GpuReading(index=i, uuid=None, name=None, serial=None, pci_bus_id=None, pci_bus_id_nvml=None,
                   pci_bus_id_xid=None, state="lost" if i == 3 else "ok",
                   clock_reasons=("hw_power_brake_slowdown",) if i == 1 else ("gpu_idle",))
        for i in range(4)
    )
    return Frame(schema=1, node="n", run_id="r", seq=1, taken_at=100.0, agent_start=0.0,
                 collectors={"psu": CollectorStatus("ok", True)}, readings=Readings(psu_rail=rail, gpus=gpus),
                 events=events)


def alarm(alarm_id: str, rule: str, state: AlarmState = "firing") -> Alarm:
    """An alarm of ``rule`` as the alarm engine has it in force."""
    return Alarm(id=alarm_id, rule=rule, rule_kind="threshold", severity="critical", node="n", subject="psu",
                 state=state, message="x", started_at=90.0, updated_at=90.0)


def test_observe_reads_rail_alarms_and_throttle_reasons() -> None:
    firing = Event("e1", 99.0, "alarm_firing", "critical", "psu", "x", {"rule": "psu_rail_low_critical"})
    restored = Event("e2", 99.0, "alarm_firing", "critical", "psu", "x",
                     {"rule": "psu_rail_low_critical", "restored": True})
    other = Event("e3", 99.0, "alarm_firing", "warning", "psu", "x", {"rule": "psu_rail_low_warning"})
    active = [alarm("a1", "psu_rail_low_critical"), alarm("a2", "psu_rail_low_critical", "pending"),
              alarm("a3", "psu_rail_low_warning")]
    o = observe(_frame((firing, restored, other)), GuardSection(), active)
    # The restored alarm does not trigger anew; whether one fires is what the alarm engine has in force
    # (a pending one does not, nor one of a rule that is no trigger).
    assert o == Observation(at=100.0, rail_min_volts=11.31, rail_window=1.0, alarms_fired=("psu_rail_low_critical",),
                            alarms_active=("a1",), throttled_gpus=(1,), gpus=(0, 1, 2))
    assert observe(_frame(windows=0), GuardSection()).rail_window == 1.0  # the seq tells
    assert observe(_frame(stale=True), GuardSection()).rail_min_volts is None


def test_guard_is_off_by_default_and_bad_values_name_the_key(tmp_path: Path) -> None:
    assert load_agent_config(None, environ={}).guard.enabled is False
    cases = {
        "mode = \"yes\"": "guard",
        "rail_count = 0": "rail_count",
        "app_clocks_mhz = [877]": "app_clocks_mhz",
        "app_clocks_mhz = [877, 99999]": "app_clocks_mhz",
        "power_limit_w = 20": "power_limit_w",
        "restore_after_s = 0": "restore_after_s",
        "max_actions_per_hour = 0": "max_actions_per_hour",
        "call_timeout_s = -1": "call_timeout_s",
        "derive_fraction = 2": "derive_fraction",
        "rail_below_volts = 120": "rail_below_volts",
        "gpus = [-1]": "gpus",
        "gpus = [0, 0]": "gpus: 0 is listed more than once",
        "bogus = 1": "bogus",
    }
    for line, key in cases.items():
        path = tmp_path / "agent.toml"
        path.write_text(f"[guard]\n{line}\n")
        with pytest.raises(ConfigError, match=key):
            load_agent_config(path, environ={})
    path.write_text("[guard]\nenabled = true\nmode = \"enforce\"\napp_clocks_mhz = [877, 1005]\n")
    guard = load_agent_config(path, environ={}).guard
    assert guard.mode == "enforce" and guard.app_clocks_mhz == (877, 1005)


def test_a_guard_trigger_naming_no_rule_in_force_is_refused_naming_the_key(tmp_path: Path) -> None:
    """A misspelt or disabled rule in ``alarm_rules`` loaded and then could never engage the guard."""
    from rigmon.agent.agent import Agent
    from rigmon.config import ConfigKeyError

    path = tmp_path / "agent.toml"
    state = tmp_path / "state"
    for alarms, name in (("", "psu_rail_low_critcal"), ('disable = ["psu_rail_low_critical"]', "psu_rail_low_critical")):
        path.write_text(f'[agent]\nroot = "{tmp_path}"\nstate_dir = "{state}"\n[alarms]\n{alarms}\n'
                        f'[guard]\nenabled = true\nalarm_rules = ["{name}"]\n')
        with pytest.raises(ConfigKeyError, match=f"guard.alarm_rules: no alarm rule named '{name}' is in force"):
            Agent(load_agent_config(path, environ={}))
    path.write_text(f'[agent]\nroot = "{tmp_path}"\nstate_dir = "{state}"\n[guard]\nenabled = true\n')
    agent = Agent(load_agent_config(path, environ={}))  # the default trigger's rule is in force
    assert agent.guard is not None
    agent.guard.close()
