"""`rigmon setup agent` and TLS: a TLS agent the printed dashboard line reaches, the names and addresses in its
certificate, the README lab recipe end to end."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rigmon.setup.command import certificate_names, route_addresses
from rigmon.sim.rig import SimRig, get_scenario
from tests.ports import free_port as free_port
from tests.setup.helpers import ENV, setup_agent, token_file


def test_the_installed_agent_serves_tls_that_the_printed_line_reaches(tmp_path: Path) -> None:
    root = tmp_path / "node"
    root.mkdir()
    out = setup_agent(root, "--tls-name", "localhost")
    assert out.returncode == 0, out.stderr
    etc = root / "etc/rigmon"
    port = free_port()
    # The configuration as installed, its paths moved below the test's root.
    config = (etc / "agent.toml").read_text().replace('"/etc/rigmon/', f'"{etc}/')
    config = config.replace('"/var/lib/rigmon"', f'"{tmp_path / "state"}"')
    config = config.replace('listen = "0.0.0.0:9871"', f'listen = "127.0.0.1:{port}"')
    (tmp_path / "agent.toml").write_text(config)
    agent = subprocess.Popen([sys.executable, "-m", "rigmon", "agent", "--config", str(tmp_path / "agent.toml"),
                              "--root", str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=ENV)
    try:
        assert agent.stdout is not None
        assert f"on https://127.0.0.1:{port}" in agent.stdout.readline()
        time.sleep(1.5)  # a frame or two, so the snapshot holds some

        def snapshot(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "rigmon", "snapshot", f"https://localhost:{port}",
                                   "--since", "1m", *args], capture_output=True, text=True, timeout=60, env=ENV)

        good = snapshot("--token-file", str(etc / "read.token"), "--ca-file", str(etc / "agent.pem"),
                        "-o", str(tmp_path / "b.tar.gz"))
        assert good.returncode == 0, good.stderr
        untrusted = snapshot("--token-file", str(etc / "read.token"), "-o", str(tmp_path / "c.tar.gz"))
        assert untrusted.returncode == 3 and "give --ca-file FILE" in untrusted.stderr
        no_token = snapshot("--ca-file", str(etc / "agent.pem"), "-o", str(tmp_path / "d.tar.gz"))
        assert "this agent needs a token: --token-file FILE" in no_token.stderr
    finally:
        agent.terminate()
        agent.wait(10)


def test_the_certificate_names_the_addresses_dashboards_and_mark_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    # Debian's /etc/hosts: the host name resolves to 127.0.1.1 only, no address another machine can use.
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "",
                                                                  ("127.0.1.1", 0))])
    names = certificate_names("rig7", ["rig7.lan"])
    # `rigmon mark` reaches an agent on [::]:PORT at [::1], one on 0.0.0.0:PORT at 127.0.0.1.
    assert {"rig7", "rig7.lan", "localhost", "127.0.0.1", "::1"} <= set(names)
    # The address this machine's routes send from (its LAN address), where it has a route.
    assert set(route_addresses()) <= set(names)
    assert route_addresses(((socket.AF_INET, "127.0.0.2"),)) == ["127.0.0.1"]
    # `--tls-name rig7.lan,10.0.0.9` is two names (a comma inside one entry made openssl fail).
    assert {"rig7.lan", "10.0.0.9", "box"} <= set(certificate_names("rig7", ["rig7.lan,10.0.0.9", " box "], []))
    assert "rig7.lan,10.0.0.9" not in certificate_names("rig7", ["rig7.lan,10.0.0.9"], [])
    given = certificate_names("rig7", [], addresses=["127.0.1.1", "10.0.0.5", "fe80::1%eth0", "fd00::2"])
    assert [n for n in given if n[0].isdigit() or ":" in n] == ["127.0.0.1", "::1", "10.0.0.5", "fd00::2"]


def san_of(cert: Path) -> str:
    out = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-ext", "subjectAltName"],
                         capture_output=True, text=True, timeout=30, check=True)
    return out.stdout


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_the_address_the_agent_listens_on_is_in_its_certificate(tmp_path: Path) -> None:
    # A node serving on its lab-network address only is reached at that address, which its routes
    # (and so the certificate's names) need not choose.
    out = setup_agent(tmp_path, "--listen", "10.213.7.9:9871")
    assert out.returncode == 0, out.stderr
    assert "IP Address:10.213.7.9" in san_of(tmp_path / "etc/rigmon/agent.pem")
    assert "note: the agent listens on" not in out.stdout


def test_an_agent_on_loopback_only_is_said_to_be_unreachable_from_elsewhere(tmp_path: Path) -> None:
    out = setup_agent(tmp_path, "--listen", "127.0.0.1:9871")
    assert out.returncode == 0, out.stderr
    assert "note: the agent listens on 127.0.0.1 only: no other machine can reach it" in out.stdout
    wide = setup_agent(tmp_path / "no-hardware", "--listen", "[::]:9871")
    assert wide.returncode == 0 and "note: the agent listens" not in wide.stdout


def test_the_lab_recipe_one_read_token_and_one_ca_file_reach_every_node(tmp_path: Path) -> None:
    # README "Monitoring a real rig": a token made once, given to each node's setup; Prometheus then
    # scrapes every node with that one token and one CA file of the nodes' certificates.
    import secrets
    import ssl

    import httpx

    rig = SimRig(get_scenario("lab"), 2, tmp_path / "rig")
    agent = None
    try:
        rig.step()
        lab = token_file(tmp_path / "lab.token", secrets.token_hex(24) + "\n")
        etcs = []
        for node in rig.nodes:
            root = tmp_path / f"root-{node.name}"
            root.mkdir()
            out = setup_agent(root, f"--node={node.name}", "--read-token-file", str(lab), "--tls-name", "localhost",
                              hw_root=node.tree.root)
            assert out.returncode == 0, out.stderr
            assert f"  url         https://{node.name}:9871/metrics" in out.stdout
            etcs.append(root / "etc/rigmon")
        assert [(etc / "read.token").read_text() for etc in etcs] == [lab.read_text()] * 2
        assert (etcs[0] / "control.token").read_text() != (etcs[1] / "control.token").read_text()
        # The simulated ADC has a by-id name saying rigmon: configured as the README says.
        assert 'port = "/dev/serial/by-id/usb-rigmon_rm1-if00"' in (etcs[0] / "agent.toml").read_text()
        ca = tmp_path / "rigmon-ca.pem"
        ca.write_bytes(b"".join((etc / "agent.pem").read_bytes() for etc in etcs))

        port = free_port()
        etc = etcs[0]
        config = (etc / "agent.toml").read_text().replace('"/etc/rigmon/', f'"{etc}/')
        config = config.replace('"/var/lib/rigmon"', f'"{tmp_path / "state"}"')
        config = config.replace('listen = "0.0.0.0:9871"', f'listen = "127.0.0.1:{port}"')
        (tmp_path / "agent.toml").write_text(config)
        agent = subprocess.Popen([sys.executable, "-m", "rigmon", "agent", "--config", str(tmp_path / "agent.toml"),
                                  "--root", str(rig.nodes[0].tree.root)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=ENV)
        assert agent.stdout is not None
        assert f"on https://127.0.0.1:{port}" in agent.stdout.readline()
        url = f"https://localhost:{port}/metrics"
        with httpx.Client(verify=ssl.create_default_context(cafile=str(ca)), timeout=30) as client:
            # The agent answers as soon as it says it serves; its series come with its first frame.
            for _ in range(200):
                scraped = client.get(url, headers={"Authorization": f"Bearer {lab.read_text().strip()}"})
                assert scraped.status_code == 200, scraped.text
                if f'node="{rig.nodes[0].name}"' in scraped.text:
                    break
                time.sleep(0.05)
            assert f'node="{rig.nodes[0].name}"' in scraped.text
            assert client.get(url).status_code == 401
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(10)
        rig.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_a_name_asked_of_a_kept_certificate_is_said_to_be_missing_from_it(tmp_path: Path) -> None:
    """Prometheus said `x509: certificate is valid for ..., not v100-b.lab`; a second setup with
    `--tls-name v100-b.lab` kept the certificate and said nothing of the name it still lacks."""
    first = setup_agent(tmp_path, "--tls-name", "v100-b")
    assert first.returncode == 0, first.stderr
    cert = tmp_path / "etc/rigmon/agent.pem"
    before = cert.read_bytes()
    again = setup_agent(tmp_path, "--tls-name", "v100-b,v100-b.lab", "--tls-name", "10.0.0.7")
    assert again.returncode == 0, again.stderr
    assert cert.read_bytes() == before  # kept: every client trusts this one
    [warning] = [line for line in again.stdout.splitlines() if line.startswith("warning: the kept certificate")]
    assert warning.startswith("warning: the kept certificate /etc/rigmon/agent.pem is not valid for v100-b.lab, "
                              "10.0.0.7 (--tls-name, --listen): "), warning
    assert "Delete /etc/rigmon/agent.pem and /etc/rigmon/agent.key and run this again" in warning
    same = setup_agent(tmp_path, "--tls-name", "V100-B", "--tls-name", "::1")
    assert same.returncode == 0 and "warning: the kept certificate" not in same.stdout, same.stdout
