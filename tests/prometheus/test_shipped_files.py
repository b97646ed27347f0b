"""The shipped Prometheus files pass the real promtool, and the alert rules mirror every default node rule."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from rigmon.agent.metrics import RAIL_LOWEST_SPAN_S

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")

needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], check=False, capture_output=True, text=True, cwd=DEPLOY, timeout=60)


@needs_promtool
def test_rules_check() -> None:
    out = promtool("check", "rules", "rigmon-rules.yml")
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_rules_unit_tests() -> None:
    files = sorted(p.name for p in DEPLOY.glob("*.test.yml"))
    assert {"rigmon-rules.test.yml", "rigmon-rules-probes.test.yml", "rigmon-rules-agent.test.yml",
            "rigmon-rules-restarts.test.yml", "rigmon-rules-trends.test.yml", "rigmon-rules-temps.test.yml",
            "rigmon-rules-links.test.yml"} <= set(files)
    out = promtool("test", "rules", *files)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("SUCCESS") == len(files)


#: Prometheus' default lookback: an instant query finds a series' newest sample only if it is this recent.
LOOKBACK_S = 300
_DURATION = re.compile(r"(\d+)([smh])")


def test_recorded_series_answer_an_instant_query_at_any_time() -> None:
    """A recording group that runs less often than the lookback leaves its series empty between runs."""
    rules = yaml.safe_load((DEPLOY / "rigmon-rules.yml").read_text())
    for group in rules["groups"]:
        if not any("record" in rule for rule in group["rules"]) or "interval" not in group:
            continue
        amount, unit = _DURATION.fullmatch(group["interval"]).groups()
        seconds = int(amount) * {"s": 1, "m": 60, "h": 3600}[unit]
        assert seconds < LOOKBACK_S, f"group {group['name']} records every {group['interval']}"


@needs_promtool
def test_example_config_check() -> None:
    # The example names a credentials file that only exists on a real Prometheus host.
    out = promtool("check", "config", "--syntax-only", "prometheus.yml")
    assert out.returncode == 0, out.stdout + out.stderr


#: Each default node rule and the shipped alert that mirrors it (None: not mirrored, with the reason).
MIRRORS: dict[str, str | None] = {
    "collector_failing": "RigmonCollectorFailing",
    "collector_hung": "RigmonCollectorHung",
    "collector_silent": "RigmonCollectorSilent",
    "unclean_shutdown": "RigmonUncleanShutdown",
    "psu_rail_low_warning": "RigmonRailLow",
    "psu_rail_low_critical": "RigmonRailCritical",
    "psu_adc_silent": "RigmonRailAdcSilent",
    "psu_rail_undervoltage_latched": "RigmonRailUndervoltageLatched",
    "psu_path_resistance_rising": "RigmonPathResistanceRising",
    "gpu_lost": "RigmonGpuLost",
    "gpu_xid_fatal": "RigmonGpuXid",
    "gpu_pcie_replay_rising": "RigmonPcieReplaysRising",
    "gpu_nvlink_replay_rising": "RigmonNvlinkErrorsRising",
    "gpu_nvlink_crc_rising": "RigmonNvlinkErrorsRising",
    "thunderbolt_degraded": "RigmonThunderboltLinkDegraded",
    "rdma_port_down": "RigmonRdmaPortDown",
    "rdma_port_flapped": "RigmonRdmaPortFlapped",
    "rdma_counter_saturated": "RigmonRdmaCounterSaturated",
    "rdma_port_below_rate": "RigmonRdmaPortBelowRate",
    "rdma_port_errors_rising": "RigmonRdmaErrorsRising",
    "nvme_link_below_max": "RigmonNvmeLinkBelowMax",
    "nvme_link_lost": "RigmonNvmeLinkLost",
    "nvme_temp_over_warning": "RigmonNvmeTempOverWarning",
    "host_temp_critical": "RigmonHostTempCritical",
    "net_link_slower": "RigmonNetworkLinkSlower",
    "net_link_stalled": "RigmonNetworkLinkStalled",
    "net_link_down": "RigmonNetworkLinkDown",
    "net_link_flapped": "RigmonNetworkLinkFlapped",
    "md_array_degraded": "RigmonMdArrayDegraded",
    "md_array_broken": "RigmonMdArrayBroken",
    "md_array_lagging": "RigmonMdArrayLagging",
    "md_member_failed": "RigmonMdMemberFailed",
    "peer_path_silent": "RigmonPeerPathSilent",
    "peer_path_p99_high": "RigmonPeerPathSlow",
    "peer_path_loss": "RigmonPeerPathLoss",
    "peer_path_key_mismatch": "RigmonPeerPathKeyMismatch",
    "probe_port_flooded": "RigmonProbePortFlooded",
}


def test_every_default_node_rule_has_its_prometheus_alert() -> None:
    # The rules file says it mirrors rigmon's defaults: an operator on Prometheus alone missed
    # RDMA ports, peer paths, md members, slower links and unclean shutdowns before.
    defaults = tomllib.loads((REPO / "rigmon" / "alarms" / "default_rules.toml").read_text())
    names = [rule["name"] for rule in defaults["rule"]]
    unmapped = set(names) - set(MIRRORS)
    assert not unmapped, f"default rules not mapped in MIRRORS: {sorted(unmapped)}"
    rules = yaml.safe_load((DEPLOY / "rigmon-rules.yml").read_text())
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}
    missing = {name: alert for name, alert in MIRRORS.items() if alert is not None and alert not in alerts}
    assert not missing, f"default rules with no shipped Prometheus alert: {missing}"


def _seconds(duration: str | None) -> float:
    """A Prometheus duration (``30s``, ``1m``, ``5m30s``) in seconds; 0 when absent."""
    if duration is None:
        return 0.0
    parts = re.findall(r"(\d+)(ms|s|m|h|d)", duration)
    assert "".join(n + u for n, u in parts) == duration, duration
    unit_s = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    return sum(int(n) * unit_s[u] for n, u in parts)


#: Alerts whose expression already stays true for a span after the reading clears (a series over the
#: last `RAIL_LOWEST_SPAN_S`): that span is part of their clear hold.
SPAN_S = {"RigmonRailLow": RAIL_LOWEST_SPAN_S, "RigmonRailCritical": RAIL_LOWEST_SPAN_S,
          "RigmonRailUndervoltageLatched": RAIL_LOWEST_SPAN_S}


def test_every_mirror_waits_as_long_as_its_node_rule() -> None:
    # An alert that fires sooner than its node rule raises what the rule's hold exists to ignore (a
    # Thunderbolt enclosure bonding its second lane); one that fires later waits longer than the
    # operator was told (RigmonNvmeLinkBelowMax waited 1 min, nvme_link_below_max 30 s). A clear hold
    # shorter than the node rule's resolves and fires again where the node rule keeps one alarm; a
    # longer one keeps an alert firing after the node resolved it (the rail alerts 2 min on top of
    # lowest_volts' 60 s span, the PCIe/NVLink counter alerts 10 min where the node rules hold 2).
    defaults = tomllib.loads((REPO / "rigmon" / "alarms" / "default_rules.toml").read_text())
    node_rules = {rule["name"]: rule for rule in defaults["rule"]}
    rules = yaml.safe_load((DEPLOY / "rigmon-rules.yml").read_text())
    alerts = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule}
    wrong = {}
    for name, alert in MIRRORS.items():
        if alert is None or alert not in alerts or node_rules[name]["kind"] == "event":
            continue
        hold_s = float(node_rules[name].get("hold_s", 0.0))
        clear_hold_s = float(node_rules[name].get("clear_hold_s", 0.0))
        for_s = _seconds(alerts[alert].get("for"))
        keep_s = _seconds(alerts[alert].get("keep_firing_for")) + SPAN_S.get(alert, 0.0)
        if for_s != hold_s or keep_s != clear_hold_s:
            wrong[name] = f"{alert}: for {for_s:g} s, clear hold {keep_s:g} s; node rule hold_s {hold_s:g}, " \
                          f"clear_hold_s {clear_hold_s:g}"
    assert not wrong, wrong


#: What an operator is told to do, in the summary Alertmanager sends (the node rules' messages end so too).
_ACTION = re.compile(r"\b(check|re-plug|re-seat|re-torque|re-add|replace|lock|give|find|rigmon snapshot|mdadm)\b")


def summaries_without_an_action(rules_text: str) -> list[str]:
    """The alerts whose summary names no step to take (the text outside the templates' actions)."""
    rules = yaml.safe_load(rules_text)
    return [rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule
            and not _ACTION.search(re.sub(r"\{\{.*?\}\}", " ", rule["annotations"]["summary"]))]


def test_every_alert_summary_says_what_to_do() -> None:
    # RigmonMdArrayLagging said "reads at under 80 % of its fastest peer", RigmonRailLow "sagged to
    # 11.650 V (below 11.7 V)": a page at 3 am that leaves the operator to look up what to do.
    assert summaries_without_an_action((DEPLOY / "rigmon-rules.yml").read_text()) == []
