"""The shipped Grafana dashboard: valid PromQL, and every rigmon series it draws exists."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from rigmon.agent.metrics import RECORD_METRICS
from rigmon.sim.rig import running_rig

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "rigmon.json"
PROMTOOL = shutil.which("promtool")


def expressions() -> list[str]:
    data = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in data["panels"] for t in p.get("targets", [])]
    exprs += [a["expr"] for a in data["annotations"]["list"]]
    return exprs


def promql(expr: str) -> str:
    """A panel's query as Prometheus gets it from Grafana (all nodes, a one-minute step)."""
    return expr.replace("$node", ".*").replace("$__interval", "1m")

def promtool_test(path: Path, tests: dict[str, object]) -> None:
    """Write ``tests`` (a promtool unit-test file) to ``path`` and run `promtool test rules` on it."""
    path.write_text(yaml.safe_dump(tests))
    assert PROMTOOL is not None
    out = subprocess.run([PROMTOOL, "test", "rules", str(path)], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_dashboard_is_grafana_json() -> None:
    data = json.loads(DASHBOARD.read_text())
    assert data["uid"] and data["title"] == "rigmon"
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids))
    assert len(expressions()) >= 15


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")
def test_every_expression_is_valid_promql(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    rules = {"groups": [{"name": "grafana", "rules": [
        {"record": f"rigmon_dashboard_expr_{i}", "expr": promql(e)} for i, e in enumerate(expressions())
    ]}]}
    path = tmp_path / "exprs.yml"
    path.write_text(yaml.safe_dump(rules))
    out = subprocess.run([PROMTOOL, "check", "rules", str(path)], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_series_of_one_kind_in_a_panel_are_told_apart_by_the_same_labels() -> None:
    # The path resistance panel named each path's resistance ({{path}}) but not its baseline: two
    # supply paths drew two lines both called "v100-a baseline".
    data = json.loads(DASHBOARD.read_text())
    prefixes = sorted((f"rigmon_{spec.prefix}_" for spec in RECORD_METRICS.values()), key=len, reverse=True)
    wrong = []
    for panel in data["panels"]:
        seen: dict[str, tuple[str, set[str]]] = {}
        for target in panel.get("targets", []):
            if " by (" in target["expr"]:
                continue  # aggregated: its legend names what it keeps
            [metric] = set(re.findall(r"\brigmon_[a-z0-9_]+", target["expr"]))
            kind = next((p for p in prefixes if metric.startswith(p)), metric)
            labels = set(re.findall(r"{{(\w+)}}", target["legendFormat"]))
            first = seen.setdefault(kind, (target["legendFormat"], labels))
            if first[1] != labels:
                wrong.append(f"{panel['title']}: {first[0]!r} and {target['legendFormat']!r}")
    assert not wrong, wrong


def test_every_legend_names_labels_its_series_carry() -> None:
    # The GPU temperature panel named AMD GPUs by {{card}}, the DRM card number of one boot, which is not
    # a label of their series since the series follow the GPU's PCI address across reboots.
    data = json.loads(DASHBOARD.read_text())
    specs = [(f"rigmon_{spec.prefix}_", spec) for spec in RECORD_METRICS.values()]
    wrong = []
    for panel in data["panels"]:
        for target in panel.get("targets", []):
            if " by (" in target["expr"] or " on (" in target["expr"]:
                continue  # aggregated or joined: its legend names what it keeps
            [metric] = set(re.findall(r"\brigmon_[a-z0-9_]+", target["expr"]))
            # A nested record (an NVLink of a GPU) carries its parent's labels too.
            kinds = [spec for prefix, spec in specs if metric.startswith(prefix)]
            if not kinds:
                continue
            carried = {"node", *(s.key_label for s in kinds), *(label.rpartition("=")[2] for s in kinds for label in s.labels)}
            missing = set(re.findall(r"{{(\w+)}}", target["legendFormat"])) - carried
            if missing:
                wrong.append(f"{panel['title']}: {target['legendFormat']!r} names {sorted(missing)}")
    assert not wrong, wrong


def incidents_without_a_row(dashboard: dict[str, object]) -> list[int]:
    """The hardware incidents of the design (1-7; 8 is the job itself) that no row of ``dashboard`` names."""
    named: set[int] = set()
    for panel in dashboard["panels"]:  # type: ignore[attr-defined]
        if panel["type"] != "row" or not (m := re.search(r"\(incidents? ([0-9, -]+)\)", panel["title"])):
            continue
        for part in m.group(1).split(","):
            first, _, last = part.strip().partition("-")
            named.update(range(int(first), int(last or first) + 1))
    return sorted(set(range(1, 8)) - named)


def test_every_hardware_incident_has_its_row() -> None:
    # A lab that scales out with Grafana saw nothing of incident 7 (tensor parallelism over slow or silent
    # paths between nodes) though every agent exports its probed paths' p99 and loss.
    data = json.loads(DASHBOARD.read_text())
    assert incidents_without_a_row(data) == []
    assert {"rigmon_peer_path_rtt_p99_seconds", "rigmon_peer_path_loss_ratio", "rigmon_nvme_temp_celsius",
            "rigmon_nvme_temp_max_celsius"} <= used_series()
    # Incident 4's GPU that runs hot, NVIDIA's and a Strix Halo box's AMD GPU alike.
    assert {"rigmon_gpu_temp_celsius", "rigmon_amd_gpu_temp_celsius"} <= used_series()


#: Families of every kind of source the simulated nodes have, checked by promtool below.
FAMILIES = ("rigmon_gpu_power_watts", "rigmon_psu_rail_lowest_volts", "rigmon_md_read_bytes_per_second",
            "rigmon_thunderbolt_link_state", "rigmon_psu_path_resistance_ohms", "rigmon_amd_gpu_power_watts",
            "rigmon_nvme_link_width", "rigmon_kernel_log_records_total")
#: Longest wait for the simulated nodes to export all of it (a hang, not a slow machine).
EXPOSED_WAIT_S = 60.0


def used_series() -> set[str]:
    """The rigmon series the dashboard's queries draw."""
    return {m for e in expressions() for m in re.findall(r"\brigmon_[a-z0-9_]+", e)}


def exported_series(texts: list[str]) -> set[str]:
    """The rigmon series names in expositions ``texts``."""
    return {line.split("{")[0].split(" ")[0] for text in texts for line in text.splitlines()
            if line.startswith("rigmon_")}


async def expositions(control_token: Path) -> list[str]:
    """/metrics of simulated nodes that together have every collector: GPUs, rail, storage, links, probed paths,
    and a training job marking its checkpoints (which the agent accepts with ``control_token``)."""
    marking = {"agent": {"control_token_file": str(control_token)}}
    async with (running_rig("undervolt-bus-drop", 1, base_port=0, speed=5) as a,
                running_rig("healthy-v100", 1, base_port=0, speed=5, extra_config=marking) as e,
                running_rig("tb-retrain-10g", 1, base_port=0, speed=10) as b,
                running_rig("corroding-connection", 1, base_port=0, speed=20000) as c,
                running_rig("tp-cluster", 2, base_port=0, speed=5) as d,
                httpx.AsyncClient(timeout=10) as client):
        # Until every series the dashboard draws and every family checked below is out (each shows
        # with its collector's first reading, the events' with the first event), or a deadline that
        # only bounds a hang: the tests then say what is missing.
        deadline = time.monotonic() + EXPOSED_WAIT_S
        while True:
            texts = [(await client.get(f"{url}/metrics")).text for url in a.urls + b.urls + c.urls + d.urls + e.urls]
            if (not used_series() - exported_series(texts) and all(f in "".join(texts) for f in FAMILIES)) \
                    or time.monotonic() > deadline:
                return texts
            await asyncio.sleep(0.5)


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    token = tmp_path_factory.mktemp("marks") / "control.token"
    token.write_text("marks-control-token\n")
    token.chmod(0o600)
    return asyncio.run(expositions(token))


def test_every_series_the_dashboard_draws_is_exported(exposed: list[str]) -> None:
    missing = used_series() - exported_series(exposed)
    assert not missing, f"dashboard draws series no simulated agent exports: {sorted(missing)}"


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")
def test_promtool_finds_nothing_on_simulated_nodes_with_every_collector(exposed: list[str]) -> None:
    assert PROMTOOL is not None
    for text in exposed:
        assert "rigmon_collector_up" in text
        out = subprocess.run([PROMTOOL, "check", "metrics"], check=False, input=text, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out.stdout + out.stderr
    families = "".join(exposed)
    for family in FAMILIES:
        assert family in families, family


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")
def test_the_events_annotation_marks_an_events_first_occurrence(tmp_path: Path) -> None:
    # A counter series appears with its first event (one Xid 79 is a series going from absent to 1):
    # changes() alone never sees it, and the incident's one event drew no annotation.
    data = json.loads(DASHBOARD.read_text())
    [annotation] = [a for a in data["annotations"]["list"] if a["name"] == "rigmon events"]
    expr = promql(annotation["expr"])
    xid = 'rigmon_events_total{node="v100-a",kind="xid",subject="gpu:3",code="79"}'
    link = 'rigmon_events_total{node="strix-1",kind="tb_link_changed",subject="link:0-1"}'
    # Both first happen at 10 s; the link changes again at 120 s.
    link_values = " ".join(["_", "_"] + ["1"] * 22 + ["2"] * 20)
    tests = {"evaluation_interval": "5s", "tests": [{
        "interval": "5s",
        "input_series": [{"series": xid, "values": "_ _ 1x40"}, {"series": link, "values": link_values}],
        "promql_expr_test": [
            {"expr": expr, "eval_time": "5s", "exp_samples": []},
            {"expr": expr, "eval_time": "10s",
             "exp_samples": [{"labels": xid, "value": 1}, {"labels": link, "value": 1}]},
            {"expr": expr, "eval_time": "90s", "exp_samples": []},
            {"expr": expr, "eval_time": "120s", "exp_samples": [
                {"labels": '{node="strix-1",kind="tb_link_changed",subject="link:0-1"}', "value": 1}]},
        ]}]}
    promtool_test(tmp_path / "annotation.test.yml", tests)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")
def test_the_events_annotation_marks_the_same_event_after_an_agent_restart(tmp_path: Path) -> None:
    # A new run counts from 0 again: the same Xid on the same GPU after the agent restarted between two
    # scrapes reads 1 -> 1 (no change, and the series was there a minute before), and drew no annotation.
    data = json.loads(DASHBOARD.read_text())
    [annotation] = [a for a in data["annotations"]["list"] if a["name"] == "rigmon events"]
    expr = promql(annotation["expr"])
    xid = 'rigmon_events_total{node="v100-a",kind="xid",subject="gpu:3",code="79"}'
    start = 'rigmon_agent_start_timestamp_seconds{node="v100-a"}'
    tests = {"evaluation_interval": "5s", "tests": [{
        "interval": "5s",
        # Xid 79 at 10 s; the agent restarts at 3 min and GPU 3 falls off again at once.
        "input_series": [{"series": xid, "values": "_ _ 1x60"}, {"series": start, "values": "1000x35 1180x26"}],
        "promql_expr_test": [
            {"expr": expr, "eval_time": "10s", "exp_samples": [{"labels": xid, "value": 1}]},
            {"expr": expr, "eval_time": "150s", "exp_samples": []},
            {"expr": expr, "eval_time": "180s", "exp_samples": [{"labels": xid, "value": 1}]},
            {"expr": expr, "eval_time": "245s", "exp_samples": []},
        ]}]}
    promtool_test(tmp_path / "annotation.test.yml", tests)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")
def test_the_marks_annotation_names_what_the_job_was_doing(tmp_path: Path) -> None:
    # Incident 8: the job's own marks (`rigmon mark "epoch 3 checkpoint"`) on the timeline beside the hardware's
    # events; the agent exported them (rigmon_marks_total, rigmon_mark_last_info) and the dashboard drew none.
    data = json.loads(DASHBOARD.read_text())
    [annotation] = [a for a in data["annotations"]["list"] if a["name"] == "rigmon marks"]
    assert annotation["titleFormat"] == "{{node}}: {{text}}"
    expr = promql(annotation["expr"])
    total = 'rigmon_marks_total{node="v100-a"}'
    info = 'rigmon_mark_last_info{node="v100-a",text="%s"}'
    # Epoch 3's checkpoint at 30 s, epoch 4's at 150 s (the agent exports the last mark's text only: the
    # scrape after the next mark finds epoch 3's gone, which Prometheus marks stale).
    tests = {"evaluation_interval": "5s", "tests": [{
        "interval": "5s",
        "input_series": [{"series": total, "values": "2x5 3x23 4x10"},
                         {"series": info % "epoch 3 checkpoint", "values": "_x5 1x23 stale"},
                         {"series": info % "epoch 4 checkpoint", "values": "_x29 1x10"}],
        "promql_expr_test": [
            {"expr": expr, "eval_time": "25s", "exp_samples": []},
            {"expr": expr, "eval_time": "30s", "exp_samples": [{"labels": info % "epoch 3 checkpoint", "value": 1}]},
            {"expr": expr, "eval_time": "120s", "exp_samples": []},
            {"expr": expr, "eval_time": "150s", "exp_samples": [{"labels": info % "epoch 4 checkpoint", "value": 1}]},
        ]}]}
    promtool_test(tmp_path / "marks.test.yml", tests)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")
def test_links_degraded_counts_every_kind_of_link(tmp_path: Path) -> None:
    # The stat counted Thunderbolt links only: a lab's RDMA port down (tensor parallelism stalls) or an NVMe
    # trained at Gen3 read "0" on the dashboard's first row while their alerts fired; so did a 10 GbE data
    # link that lost its carrier (RigmonNetworkLinkDown).
    data = json.loads(DASHBOARD.read_text())
    [panel] = [p for p in data["panels"] if p["title"] == "Links degraded"]
    [target] = panel["targets"]
    expr = promql(target["expr"])
    series = [
        ('rigmon_thunderbolt_link_state{node="strix-1",device="0-1",kind="device",link_state="degraded"}', "1x3"),
        ('rigmon_thunderbolt_link_state{node="strix-1",device="0-1",kind="device",link_state="ok"}', "0x3"),
        ('rigmon_nvme_link_state{node="strix-1",controller="nvme0",link_state="degraded"}', "1x3"),
        ('rigmon_nvme_link_state{node="strix-2",controller="nvme0",link_state="lost"}', "1x3"),
        (('rigmon_infiniband_link_state{node="strix-3",device="mlx5_0",port="1",link_layer="Ethernet",'
         'link_state="down"}'), "1x3"),
        # A free second port, never up: every state is a series, the current one 1.
        (('rigmon_infiniband_link_state{node="strix-4",device="mlx5_0",port="2",link_layer="Ethernet",'
         'link_state="unused"}'), "1x3"),
        (('rigmon_infiniband_link_state{node="strix-4",device="mlx5_0",port="2",link_layer="Ethernet",'
         'link_state="down"}'), "0x3"),
        # The 10 GbE data port whose switch port reset (net_link_down), and a management port still up.
        ('rigmon_network_link_lost{node="strix-5",interface="enp2s0"}', "1x3"),
        ('rigmon_network_link_lost{node="strix-5",interface="eno1"}', "0x3"),
    ]
    tests = {"evaluation_interval": "5s", "tests": [{
        "interval": "5s",
        "input_series": [{"series": s, "values": v} for s, v in series],
        "promql_expr_test": [{"expr": expr, "eval_time": "10s", "exp_samples": [
            {"labels": '{node="strix-1"}', "value": 2}, {"labels": '{node="strix-2"}', "value": 1},
            {"labels": '{node="strix-3"}', "value": 1}, {"labels": '{node="strix-4"}', "value": 0},
            {"labels": '{node="strix-5"}', "value": 1}]}]}]}
    promtool_test(tmp_path / "links.test.yml", tests)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")
def test_rail_minimum_and_power_peak_panels_keep_the_worst_of_each_step(tmp_path: Path) -> None:
    # Zoomed out, Grafana asks for one point per step (a minute and more): a plain series shows the sample
    # at the step and skips a sag or a peak between two steps, which the alerts saw.
    data = json.loads(DASHBOARD.read_text())
    targets = {t["legendFormat"]: t["expr"] for p in data["panels"] if p["type"] == "timeseries"
               for t in p.get("targets", [])}
    rail = {"node": "v100-a"}
    gpu = {"node": "v100-a", "gpu": "3", "uuid": "GPU-3"}
    cases = [  # (legend, metric, labels, values every 5 s from 0 s, worst value in the minute before 60 s)
        ("{{node}} min", "rigmon_psu_rail_min_volts", rail, "12.0 12.0 11.9 11.31 11.9 12.0x8", 11.31),
        ("{{node}} lowest 60 s", "rigmon_psu_rail_lowest_volts", rail, "12.0 12.0 11.9 11.31x8 11.9", 11.31),
        ("{{node}} GPU {{gpu}} peak", "rigmon_gpu_power_peak_watts", gpu, "250 250 250 410 250x9", 410),
        ("{{node}} GPU {{gpu}} highest 60 s", "rigmon_gpu_power_highest_watts", gpu, "250 250 250 410x8 250", 410),
    ]
    exprs = []
    for legend, metric, labels, values, worst in cases:
        series = metric + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
        sample_labels = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
        exprs.append({"expr": promql(targets[legend]), "eval_time": "60s",
                      "exp_samples": [{"labels": sample_labels, "value": worst}], "series": (series, values)})
    tests = {"evaluation_interval": "5s", "tests": [{
        "interval": "5s",
        "input_series": [{"series": e["series"][0], "values": e["series"][1]} for e in exprs],
        "promql_expr_test": [{k: v for k, v in e.items() if k != "series"} for e in exprs]}]}
    promtool_test(tmp_path / "worst.test.yml", tests)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")
def test_node_gpu_power_draws_every_node_with_gpus(tmp_path: Path) -> None:
    # A lab's Strix Halo box reports its GPU as an amdgpu card (rigmon_amd_gpu_power_watts): the panel
    # summed NVIDIA GPUs only and left that node out.
    data = json.loads(DASHBOARD.read_text())
    [panel] = [p for p in data["panels"] if p["title"] == "Node GPU power"]
    nvidia = [(f'rigmon_gpu_power_watts{{node="v100-a",gpu="{i}",uuid="GPU-{i}"}}', "250x12") for i in range(4)]
    amd = [('rigmon_amd_gpu_power_watts{node="strix-1",pci_bus_id="0000:c3:00.0"}', "90x12")]
    tests = {"evaluation_interval": "5s", "tests": [{
        "interval": "5s",
        "input_series": [{"series": series, "values": values} for series, values in nvidia + amd],
        "promql_expr_test": [{
            "expr": " or ".join(f"({promql(t['expr'])})" for t in panel["targets"]), "eval_time": "30s",
            "exp_samples": [{"labels": '{node="v100-a"}', "value": 1000}, {"labels": '{node="strix-1"}', "value": 90}],
        }]}]}
    promtool_test(tmp_path / "gpu-power.test.yml", tests)
