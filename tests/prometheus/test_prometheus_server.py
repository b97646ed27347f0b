"""A real Prometheus server on loopback scrapes a simulated rig's agent and answers queries."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from rigmon.setup.tls import make_self_signed
from tests.ports import free_port as free_port
from tests.prometheus.test_grafana_dashboard import expressions, promql

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
PROMETHEUS = shutil.which("prometheus")

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (.ci/run installs it)")



@contextlib.contextmanager
def running_agent(tmp_path: Path, *tls_args: str) -> Iterator[tuple[str, Path]]:
    """An agent with a token on a simulated tree (``--tree-only``), with the given TLS options."""
    token = tmp_path / "token"
    token.write_text("prom-token\n")
    token.chmod(0o600)
    tree = tmp_path / "tree"
    sim = subprocess.Popen([sys.executable, "-m", "rigmon", "sim", "--tree-only", str(tree), "--nodes", "1",
                            "--duration", "120"], stdout=subprocess.PIPE, text=True, env=ENV)
    assert sim.stdout is not None
    root = sim.stdout.readline().split()[1]
    port = free_port()
    agent = subprocess.Popen([sys.executable, "-m", "rigmon", "agent", "--root", root, "--node", "rig-a",
                              "--listen", f"127.0.0.1:{port}", "--token-file", str(token),
                              "--state-dir", str(tree / "state"), *tls_args],
                             stdout=subprocess.DEVNULL, env=ENV)
    try:
        yield f"127.0.0.1:{port}", token
    finally:
        for proc in (agent, sim):
            proc.terminate()
            proc.wait(10)


@pytest.fixture
def agent_target(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with running_agent(tmp_path) as target:
        yield target


@contextlib.contextmanager
def run_prometheus(tmp_path: Path, target: str | list[str], token: Path | None, ca_file: Path | None = None
                   ) -> Iterator[str]:
    """The example configuration with only its files and targets (one or several) replaced (plain HTTP without
    ``ca_file``)."""
    example = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    example["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    example["rule_files"] = [str(REPO / "deploy" / "prometheus" / name) for name in example["rule_files"]]
    job = example["scrape_configs"][0]
    if token is None:
        del job["authorization"]
    else:
        job["authorization"]["credentials_file"] = str(token)
    if ca_file is None:
        job["scheme"] = "http"
        job.pop("tls_config", None)
    else:
        job.setdefault("tls_config", {})["ca_file"] = str(ca_file)
    job["static_configs"] = [{"targets": [target] if isinstance(target, str) else target}]
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump(example))
    port = free_port()
    assert PROMETHEUS is not None
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.fixture
def prometheus(tmp_path: Path, agent_target: tuple[str, Path]) -> Iterator[str]:
    with run_prometheus(tmp_path, *agent_target) as url:
        yield url


def query(client: httpx.Client, url: str, promql: str, deadline_s: float = 60) -> list[dict[str, object]]:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            r = client.get(f"{url}/api/v1/query", params={"query": promql})
            if r.status_code == 200 and r.json()["data"]["result"]:
                return list(r.json()["data"]["result"])
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"no result for {promql}")


def test_prometheus_scrapes_the_agent_with_its_token(prometheus: str) -> None:
    with httpx.Client(timeout=5) as client:
        up = query(client, prometheus, 'up{job="rigmon"} == 1')
        assert up[0]["metric"]["job"] == "rigmon"  # type: ignore[index]
        cpus = query(client, prometheus, "rigmon_host_cpus")
        assert cpus[0]["metric"]["node"] == "rig-a"  # type: ignore[index]
        assert cpus[0]["value"][1] == "32"  # type: ignore[index]
        rate = query(client, prometheus, 'rate(rigmon_network_rx_bytes_total{interface="eth0"}[5s]) > 0')
        assert float(rate[0]["value"][1]) > 0  # type: ignore[index]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the setup's certificate")
def test_the_example_job_scrapes_an_agent_as_rigmon_setup_agent_makes_it(tmp_path: Path) -> None:
    # `rigmon setup agent` serves HTTPS with a self-signed certificate per node; the example job's CA file
    # holds every node's certificate (here another node's too), and its token is the agent's read token.
    cert, key = make_self_signed(["rig-a", "localhost", "127.0.0.1"])
    other, _ = make_self_signed(["rig-b", "localhost", "127.0.0.1"])
    (tmp_path / "agent.pem").write_bytes(cert)
    (tmp_path / "agent.key").write_bytes(key)
    (tmp_path / "agent.key").chmod(0o600)
    (tmp_path / "ca.pem").write_bytes(other + cert)
    with (running_agent(tmp_path, "--tls-cert", str(tmp_path / "agent.pem"), "--tls-key", str(tmp_path / "agent.key"))
          as (target, token),
          run_prometheus(tmp_path, target, token, tmp_path / "ca.pem") as url,
          httpx.Client(timeout=5) as client):
        up = query(client, url, 'up{job="rigmon"} == 1')
        assert up[0]["metric"]["instance"] == target  # type: ignore[index]
        cpus = query(client, url, "rigmon_host_cpus")
        assert cpus[0]["metric"]["node"] == "rig-a"  # type: ignore[index]


@contextlib.contextmanager
def scraped_scenario(tmp_path: Path, scenario: str, nodes: int = 1, *more: tuple[str, int],
                     control_token: Path | None = None) -> Iterator[tuple[str, httpx.Client]]:
    """``nodes`` simulated nodes of ``scenario`` (5x speed), each its own agent, and those of ``more``
    (scenario, nodes) beside them, scraped by one real Prometheus with the shipped rules; yields
    Prometheus' URL and a client. With ``control_token`` the agents accept the training jobs' marks."""
    control = ["--control-token-file", str(control_token)] if control_token is not None else []
    sims = [subprocess.Popen([sys.executable, "-m", "rigmon", "sim", "--scenario", name, "--nodes", str(count),
                              "--base-port", "0", "--speed", "5", "--duration", "120", *control],
                             stdout=subprocess.PIPE, text=True, env=ENV)
            for name, count in ((scenario, nodes), *more)]
    try:
        targets = []
        for sim, count in zip(sims, (nodes, *(count for _, count in more)), strict=True):
            assert sim.stdout is not None
            targets += [sim.stdout.readline().split()[1].removeprefix("http://") for _ in range(count)]
        with run_prometheus(tmp_path, targets, None) as url, httpx.Client(timeout=5) as client:
            yield url, client
    finally:
        for sim in sims:
            sim.terminate()
            sim.wait(10)


def test_prometheus_evaluates_the_shipped_rules_on_a_bus_drop(tmp_path: Path) -> None:
    with scraped_scenario(tmp_path, "undervolt-bus-drop") as (url, client):
        lost = query(client, url, 'ALERTS{alertname="RigmonGpuLost",alertstate="firing"}')
        assert lost[0]["metric"]["gpu"] == "3"  # type: ignore[index]
        rail = query(client, url, 'ALERTS{alertname="RigmonRailCritical",alertstate="firing"}')
        assert rail[0]["metric"]["node"] == "node01"  # type: ignore[index]
        xid = query(client, url, 'ALERTS{alertname="RigmonGpuXid"}')
        assert xid[0]["metric"]["code"] == "79"  # type: ignore[index]


def test_prometheus_evaluates_the_rdma_rules_on_a_port_flap(tmp_path: Path) -> None:
    # The port goes down at 30 s of simulated time and comes back slower at 45 s (6 and 9 s here).
    with scraped_scenario(tmp_path, "rdma-port-flap") as (url, client):
        down = query(client, url, 'ALERTS{alertname="RigmonRdmaPortDown",alertstate="firing"}')
        assert down[0]["metric"]["device"] == "mlx5_0"  # type: ignore[index]
        flapped = query(client, url, 'ALERTS{alertname="RigmonRdmaPortFlapped",alertstate="firing"}')
        assert flapped[0]["metric"]["node"] == "node01"  # type: ignore[index]
        slow = query(client, url, 'ALERTS{alertname="RigmonRdmaPortBelowRate",alertstate="firing"}')
        assert slow[0]["metric"]["port"] == "1"  # type: ignore[index]


def returns_data(client: httpx.Client, url: str, promql: str) -> bool:
    """Whether ``promql`` has any point in the last minute (a panel draws it; an annotation marks it)."""
    end = time.time()
    r = client.get(f"{url}/api/v1/query_range", params={"query": promql, "start": end - 60, "end": end, "step": 1})
    return r.status_code == 200 and bool(r.json()["data"]["result"])


def test_every_dashboard_query_draws_data_from_a_lab_of_agents(tmp_path: Path) -> None:
    # A lab as Grafana sees it through Prometheus: four agents (the undervolt node, the loose SXM2 one,
    # the Strix Halo box whose USB4 enclosure retrains, a healthy node whose job marks its checkpoints) and
    # two Strix Halo nodes probing the paths between them (tensor parallelism), one job. Each panel's query,
    # the events and marks annotations and the node variable return data, and each node's incident raises
    # its alert there.
    token = tmp_path / "control.token"
    token.write_text("lab-control-token\n")
    token.chmod(0o600)
    with scraped_scenario(tmp_path, "lab", 4, ("tp-cluster", 2), control_token=token) as (url, client):
        alerts = {("RigmonGpuLost", "node01"), ("RigmonPcieReplaysRising", "node02"),
                  ("RigmonThunderboltLinkDegraded", "node03")}
        for alert, node in sorted(alerts):
            query(client, url, f'ALERTS{{alertname="{alert}",alertstate="firing",node="{node}"}}', 90)
        exprs = [promql(e) for e in expressions()]
        deadline = time.monotonic() + 60
        while (empty := [e for e in exprs if not returns_data(client, url, e)]) and time.monotonic() < deadline:
            time.sleep(1)
        assert not empty, f"dashboard queries with no data: {empty}"
        nodes = client.get(f"{url}/api/v1/label/node/values", params={"match[]": "rigmon_collector_up"}).json()
        assert nodes["data"] == ["node01", "node02", "node03", "node04"]
