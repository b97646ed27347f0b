"""The shipped alerts on the series an agent really exports through an incident.

Frames the real collectors produced from simulated incidents (`tests/fixtures/frames`) go through the
agent's /metrics as Prometheus would scrape it, once a second, and become the input series of a
`promtool test rules` run of `deploy/prometheus/rigmon-rules.yml`: exactly the alerts the incident
should raise fire, with the labels the operator is told, and no others. Hand-written series in the
shipped unit tests say what a rule does; these say it does so on the names and labels really exported.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import msgspec
import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rigmon.agent.metrics import FrameCollector, make_registry
from rigmon.schema import Frame
from tests.tui.snapshot_apps.record_frames import load_frames

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rigmon-rules.yml"
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")

#: One scrape per second, half a second after the first frame's second (a frame pushed on the second
#: is in that second's scrape).
SCRAPE_S = 1.0
#: The alerts firing, as `count by (alertname)` of ALERTS, and what the operator reads on them.
FIRING = 'count by (alertname) (ALERTS{alertstate="firing"})'
#: Which Xid on which GPU `RigmonGpuXid` fires for.
XID = 'count by (subject, code) (ALERTS{alertname="RigmonGpuXid"})'

Scrape = dict[str, float]


def _series(name: str, labels: dict[str, str]) -> str:
    """A series as promtool reads it (label values escaped as in the exposition)."""
    def quoted(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    return name + "{" + ",".join(f"{k}={quoted(v)}" for k, v in sorted(labels.items())) + "}"


def scrapes(frames: list[Frame]) -> list[Scrape]:
    """What Prometheus scrapes from the agent that made ``frames`` (one run), once a second."""
    current: list[Frame] = []
    collector = FrameCollector(lambda: current[-1] if current else None)
    start = frames[0].taken_at
    end = frames[-1].taken_at
    pending = list(frames)
    out: list[Scrape] = []
    at = start + SCRAPE_S / 2
    while at <= end + SCRAPE_S / 2:
        while pending and pending[0].taken_at <= at:
            frame = pending.pop(0)
            collector.observe(frame)
            current.append(frame)
        text = generate_latest(make_registry(collector)).decode()
        out.append({_series(s.name, s.labels): s.value for family in text_string_to_metric_families(text)
                    for s in family.samples})
        at += SCRAPE_S
    return out


def held(scrape: Scrape, seconds: float) -> list[Scrape]:
    """The same scrape for ``seconds`` more: the node ran on with nothing new."""
    return [scrape] * int(seconds / SCRAPE_S)


def input_series(timeline: Iterable[Scrape | None]) -> list[dict[str, str]]:
    """promtool's input series: ``None`` is a failed scrape (the node down). A series missing from a
    scrape after it was there is marked stale, as Prometheus does; missing before, it is absent."""
    steps = list(timeline)
    names = sorted({name for scrape in steps if scrape is not None for name in scrape})
    out = []
    for name in names:
        values, seen = [], False
        for scrape in steps:
            value = None if scrape is None else scrape.get(name)
            if value is not None and math.isfinite(value):
                values.append(repr(float(value)))
                seen = True
            else:
                values.append("stale" if seen and values[-1] not in ("stale", "_") else "_")
        out.append({"series": name, "values": " ".join(values)})
    return out


def promtool_test(tmp_path: Path, timeline: Iterable[Scrape | None], checks: dict[str, dict[str, list[str]]]) -> None:
    """Run the shipped rules over ``timeline``; ``checks``: eval time -> {query: the label sets it returns,
    each with the value 1 (the queries count alerts)}."""
    tests = []
    for eval_time, queries in checks.items():
        for query, label_sets in queries.items():
            tests.append({"expr": query, "eval_time": eval_time,
                          "exp_samples": [{"labels": labels, "value": 1} for labels in label_sets]})
    rules = {"rule_files": [str(RULES)], "evaluation_interval": f"{SCRAPE_S:g}s",
             "tests": [{"interval": f"{SCRAPE_S:g}s", "input_series": input_series(timeline),
                        "promql_expr_test": tests}]}
    path = tmp_path / "incident.test.yml"
    path.write_text(yaml.safe_dump(rules, width=1 << 20))
    assert PROMTOOL is not None
    out = subprocess.run([PROMTOOL, "test", "rules", str(path)], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def firing(*names: str) -> list[str]:
    return [f'{{alertname="{name}"}}' for name in sorted(names)]


def test_undervolt_sag_and_gpu_off_the_bus(tmp_path: Path) -> None:
    # Incident 1: the rail sags to 11.26 V at 10 s (the ADC's comparator latches too), GPU 3 logs Xid 79
    # at 15 s and NVML loses it.
    timeline = scrapes(load_frames("v100-gpu-lost-rail-sag"))
    promtool_test(tmp_path, timeline, {
        "8s": {FIRING: []},
        "30s": {FIRING: firing("RigmonRailLow", "RigmonRailCritical", "RigmonRailUndervoltageLatched", "RigmonGpuXid",
                             "RigmonGpuLost"),
                'count by (node, gpu) (ALERTS{alertname="RigmonGpuLost"})': ['{node="node01",gpu="3"}'],
                XID: ['{subject="gpu:3",code="79"}']},
    })


def test_md_member_fails_and_the_array_recovers(tmp_path: Path) -> None:
    # nvme1n1 of the RAID1 md127 fails at 16 s; at 31 s a new member rebuilds it: one degraded alert
    # throughout, the failed member's until it is removed.
    timeline = scrapes(load_frames("raid1-member-failed-recovering"))
    promtool_test(tmp_path, timeline, {
        "10s": {FIRING: []},
        "20s": {FIRING: firing("RigmonMdArrayDegraded", "RigmonMdMemberFailed"),
                'count by (array, member) (ALERTS{alertname="RigmonMdMemberFailed"})':
                    ['{array="md127",member="nvme1n1"}']},
        "38s": {FIRING: firing("RigmonMdArrayDegraded"),
                'count by (array) (ALERTS{alertname="RigmonMdArrayDegraded"})': ['{array="md127"}']},
    })


def test_enclosure_link_trained_slow(tmp_path: Path) -> None:
    # The USB4 enclosure's link retrains from 20 to 10 Gb/s a lane at 21 s (held 5 s, as the node rule).
    timeline = scrapes(load_frames("enclosure-link-10g-array-lagging"))
    promtool_test(tmp_path, timeline, {
        "20s": {FIRING: []},
        "30s": {FIRING: firing("RigmonThunderboltLinkDegraded"),
                'count by (device) (ALERTS{alertname="RigmonThunderboltLinkDegraded"})': ['{device="0-1"}'],
                # What the summary names the enclosure by (`0-1 (OWC Express 1M2)`): its router's info series.
                'count by (device, vendor, model) (ALERTS{alertname="RigmonThunderboltLinkDegraded"}'
                ' * on (node, device) group_left (vendor, model) rigmon_thunderbolt_info)':
                    ['{device="0-1",vendor="OWC",model="Express 1M2"}']},
    })


def test_thunderbolt_net_link_trained_slow(tmp_path: Path) -> None:
    # The USB4 cable between two Strix Halo nodes retrains at 41 s: the link, and thunderbolt0 on it
    # at 20 of the 40 Gb/s it had (held 10 s).
    timeline = scrapes(load_frames("strix-usb4-thunderbolt-net"))
    promtool_test(tmp_path, timeline, {
        "40s": {FIRING: []},
        "56s": {FIRING: firing("RigmonThunderboltLinkDegraded", "RigmonNetworkLinkSlower"),
                'count by (interface) (ALERTS{alertname="RigmonNetworkLinkSlower"})': ['{interface="thunderbolt0"}'],
                # The link is an XDomain one to another host: its info names the peer (`0-1 (AMD node02)`).
                'count by (device, kind, model) (ALERTS{alertname="RigmonThunderboltLinkDegraded"}'
                ' * on (node, device) group_left (model) rigmon_thunderbolt_info)':
                    ['{device="0-1",kind="xdomain",model="node02"}']},
    })


def test_data_link_reset_and_a_flap_between_scrapes(tmp_path: Path) -> None:
    # Incident 7 on 10 GbE: the switch resets node01's enp2s0 at 20 s (no carrier until 35 s, held 30 s after as
    # the node rule), and at 50 s it drops and comes back within one step, which no scrape sees but the carrier
    # changes counter does. eno1, up throughout, is neither.
    timeline = scrapes(load_frames("net-link-flap"))
    by_link = 'count by (alertname, interface) (ALERTS{alertstate="firing"})'
    down = '{alertname="RigmonNetworkLinkDown",interface="enp2s0"}'
    flapped = '{alertname="RigmonNetworkLinkFlapped",interface="enp2s0"}'
    promtool_test(tmp_path, timeline, {
        "18s": {FIRING: []},
        "25s": {by_link: [down]},
        "45s": {by_link: [down]},
        "55s": {by_link: [down, flapped]},
        "68s": {by_link: [flapped]},
    })


def test_enclosure_fan_stops_and_its_drives_throttle(tmp_path: Path) -> None:
    # Incident 6: enclosure A's fan stops at 10 s; its two NVMe pass their 81.85 °C warning threshold at
    # 71 s (held 10 s) and throttle, md127 reading at ~71 % of md126 from 72 s (held 30 s).
    frames = scrapes(load_frames("nvme-enclosure-thermal-throttle"))
    timeline = frames + held(frames[-1], 40)
    # Every firing alert, one per drive for the drives' (each counted once, as `promtool_test` checks).
    by_drive = 'count by (alertname, controller) (ALERTS{alertstate="firing"})'
    hot = ['{alertname="RigmonNvmeTempOverWarning",controller="nvme0"}',
           '{alertname="RigmonNvmeTempOverWarning",controller="nvme1"}']
    promtool_test(tmp_path, timeline, {
        "65s": {FIRING: []},
        "85s": {by_drive: hot},
        "110s": {by_drive: ['{alertname="RigmonMdArrayLagging"}', *hot],
                 'count by (array) (ALERTS{alertname="RigmonMdArrayLagging"})': ['{array="md127"}']},
    })


def restarted(frames: list[Frame], run_id: str, agent_start: float) -> list[Frame]:
    """``frames`` as a later run of the agent made them: its own run id and start."""
    return [msgspec.structs.replace(f, agent_start=agent_start, run_id=run_id) for f in frames]


def test_the_same_xid_after_a_reboot_fires_again(tmp_path: Path) -> None:
    # GPU 3 falls off the bus, the node runs on for 5 minutes, is rebooted (down 1 minute), and GPU 3
    # falls off again 15 s into the new run: the new run's counter reads 1 again.
    first = scrapes(load_frames("v100-ddp-gpu-3-lost"))
    again = load_frames("v100-gpu-lost-rail-sag")
    second = scrapes(restarted(again, "run-2", again[0].taken_at))
    timeline = first + held(first[-1], 300) + [None] * 60 + second
    back_s = len(first) + 300 + 60
    promtool_test(tmp_path, timeline, {
        f"{back_s + 5}s": {FIRING: []},
        f"{back_s + 30}s": {FIRING: firing("RigmonRailLow", "RigmonRailCritical", "RigmonRailUndervoltageLatched",
                                           "RigmonGpuXid", "RigmonGpuLost"),
                            XID: ['{subject="gpu:3",code="79"}']},
    })
