"""`rigmon setup agent` into a temporary root: files, modes, idempotence, uninstall, the unit, and a
TLS agent the printed dashboard line reaches."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rigmon.config import load_agent_config
from rigmon.setup.command import certificate_names, hidden_from_service, route_addresses
from rigmon.setup.detect import detect_hardware
from rigmon.setup.render import Settings, agent_toml, systemd_unit
from rigmon.sim.rig import SimRig, get_scenario

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
FILES = {  # path on the node -> mode
    "etc/rigmon/agent.toml": 0o644,
    "etc/rigmon/read.token": 0o600,
    "etc/rigmon/control.token": 0o600,
    "etc/rigmon/agent.pem": 0o644,
    "etc/rigmon/agent.key": 0o600,
    "etc/systemd/system/rigmon-agent.service": 0o644,
    "etc/udev/rules.d/99-rigmon-adc.rules": 0o644,
}


def setup_agent(root: Path, *args: str, hw_root: Path | None = None) -> subprocess.CompletedProcess[str]:
    if hw_root is None:
        hw_root = root / "no-hardware"  # an empty tree: a node without any of the hardware
        hw_root.mkdir(exist_ok=True)
    hw = ["--hw-root", str(hw_root)]
    return subprocess.run([sys.executable, "-m", "rigmon", "setup", "agent", "--root", str(root), "--node", "rig7",
                           *hw, *args], capture_output=True, text=True, timeout=120, env=ENV, cwd=root)


def files_of(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mode & 0o7777, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def test_dry_run_prints_and_writes_nothing(tmp_path: Path) -> None:
    out = setup_agent(tmp_path, "--dry-run")
    assert out.returncode == 0, out.stderr
    assert files_of(tmp_path) == {}
    assert "would create /etc/rigmon/read.token (read token), mode 600" in out.stdout
    assert "--- /etc/rigmon/agent.toml (would be written) ---" in out.stdout
    assert 'node = "rig7"' in out.stdout and "ExecStart=" in out.stdout
    assert "(dry run: nothing was changed)" in out.stdout
    assert "rigmon dash https://rig7:9871 --token-file ~/.config/rigmon/rig7.token" in out.stdout


def test_install_is_idempotent_and_uninstall_removes_it(tmp_path: Path) -> None:
    had_user = user_exists("rigmon-test-nobody")
    first = setup_agent(tmp_path, "--user", "rigmon-test-nobody")
    assert first.returncode == 0, first.stderr
    files = files_of(tmp_path)
    assert {name: mode for name, (mode, _) in files.items()} == FILES
    read, control = files["etc/rigmon/read.token"][1], files["etc/rigmon/control.token"][1]
    assert read != control and len(read.strip()) >= 40
    # Below --root no user is created: the command is only listed.
    assert re.search(r"not run \(--root .*\): useradd --system .* rigmon-test-nobody", first.stdout)
    assert user_exists("rigmon-test-nobody") == had_user
    unit = files["etc/systemd/system/rigmon-agent.service"][1].decode()
    assert "User=rigmon-test-nobody" in unit and "\nExecStart=" in unit
    exec_start = unit.split("\nExecStart=")[1].split("\n")[0]
    assert exec_start.endswith(" agent --config /etc/rigmon/agent.toml")
    assert Path(exec_start.split()[0]).exists()
    assert "rigmon dash https://rig7:9871 --token-file ~/.config/rigmon/rig7.token " \
           "--ca-file ~/.config/rigmon/rig7.pem" in first.stdout

    second = setup_agent(tmp_path, "--user", "rigmon-test-nobody")
    assert second.returncode == 0, second.stderr
    assert files_of(tmp_path) == files
    assert "created" not in second.stdout and "updated" not in second.stdout
    assert "kept /etc/rigmon/read.token" in second.stdout and "unchanged /etc/systemd/system" in second.stdout
    assert "systemctl start rigmon-agent.service" in second.stdout  # nothing changed: no restart

    # An edited configuration is kept; a loosened token is made private again.
    (tmp_path / "etc/rigmon/agent.toml").write_text("[agent]\nnode = \"mine\"\n")
    (tmp_path / "etc/rigmon/read.token").chmod(0o644)
    third = setup_agent(tmp_path)
    assert (tmp_path / "etc/rigmon/agent.toml").read_text() == "[agent]\nnode = \"mine\"\n"
    assert (tmp_path / "etc/rigmon/read.token").stat().st_mode & 0o777 == 0o600
    assert "set mode 600 on /etc/rigmon/read.token" in third.stdout

    removed = setup_agent(tmp_path, "--uninstall")
    assert removed.returncode == 0, removed.stderr
    assert files_of(tmp_path) == {} and not (tmp_path / "etc/rigmon").exists()
    assert "removed /etc/systemd/system/rigmon-agent.service" in removed.stdout
    again = setup_agent(tmp_path, "--uninstall")
    assert again.returncode == 0 and again.stdout.strip() == "nothing to remove"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (apt-get install systemd)")
def test_the_generated_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    assert setup_agent(tmp_path).returncode == 0
    unit = tmp_path / "etc/systemd/system/rigmon-agent.service"
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    # The shipped example is verified the same way once its ExecStart names an existing rigmon.
    shipped = (REPO / "deploy/systemd/rigmon-agent.service").read_text()
    example = tmp_path / "rigmon-agent.service"
    example.write_text(re.sub(r"ExecStart=\S+", f"ExecStart={sys.executable} -m", shipped))
    result = subprocess.run(["systemd-analyze", "verify", str(example)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_hardware_of_a_simulated_rig_is_written_into_the_config(tmp_path: Path) -> None:
    rig = SimRig(get_scenario("lab"), 3, tmp_path / "rig")
    try:
        rig.step()  # the fake NVML serves a node's GPUs from its first step on
        v100 = detect_hardware(str(rig.nodes[0].tree.root))
        tb = detect_hardware(str(rig.nodes[2].tree.root))
    finally:
        rig.close()
    assert len(v100.gpus) == 4 and all("V100" in (g.name or "") for g in v100.gpus)
    assert v100.states["gpu"] == "ok" and v100.states["raid"].startswith("absent")
    settings = Settings(node="v100-a", listen="0.0.0.0:9871", user="rigmon", groups=("dialout",),
                        exec_start=("/opt/pipx/venvs/rigmon/bin/rigmon",), tls=True)
    text = agent_toml(settings, v100)
    assert "# NVIDIA GPUs (NVML): 4" in text and v100.gpus[0].uuid in text
    assert 'port = "/dev/serial/by-id/usb-rigmon_rm1-if00"' in text  # the ADC udev named for rigmon
    assert tb.arrays and tb.thunderbolt
    text = agent_toml(settings, tb)
    assert f"#   {tb.arrays[0].name}  " in text and "# Thunderbolt/USB4:" in text
    assert "ExecStart=/opt/pipx/venvs/rigmon/bin/rigmon agent --config /etc/rigmon/agent.toml" \
        in systemd_unit(settings)
    assert "SupplementaryGroups=dialout\n" in systemd_unit(settings)


def test_an_installation_under_home_is_refused_for_the_service() -> None:
    assert hidden_from_service(("/home/op/.local/bin/rigmon",)) == "/home/op/.local/bin/rigmon"
    assert hidden_from_service(("/root/.local/pipx/venvs/rigmon/bin/rigmon",)) is not None
    # A venv under /opt whose python is a pyenv interpreter under /root: the service cannot run it.
    assert hidden_from_service(("/opt/pipx/venvs/rigmon/bin/rigmon",),
                               "/root/.pyenv/versions/3.11.7/bin/python3.11") is not None
    if not str(REPO).startswith(("/root/", "/home/")):
        assert hidden_from_service(("/opt/pipx/venvs/rigmon/bin/rigmon",), "/usr/bin/python3.11") is None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def test_rdma_ports_are_listed_and_their_rates_offered_for_pinning(tmp_path: Path) -> None:
    fixture = REPO / "tests" / "fixtures" / "hosts" / "rdma-mlx5-roce-dual-port"
    hw = detect_hardware(str(fixture), collectors=("infiniband",))
    assert hw.states["infiniband"] == "ok" and hw.rdma
    settings = Settings(node="tp-1", listen="0.0.0.0:9871", user="rigmon", groups=(),
                        exec_start=("/usr/bin/rigmon",), tls=False)
    text = agent_toml(settings, hw)
    assert f"# RDMA ports (InfiniBand/RoCE): {len(hw.rdma)}" in text
    active = [p for p in hw.rdma if p.state == "ACTIVE"]
    assert active and f'"{active[0].name}" = {active[0].rate_gbps:g}' in text
    unused = [p for p in hw.rdma if p.state != "ACTIVE"]
    assert all(f'"{p.name}" =' not in text for p in unused)  # only trained ports are offered
    # The file is a valid agent config, and so is it with the offered line uncommented.
    (tmp_path / "as-written.toml").write_text(text.replace("/etc/rigmon/", str(tmp_path) + "/"))
    load_agent_config(tmp_path / "as-written.toml", environ={})
    pinned = text.replace("# infiniband_expected_gbps", "infiniband_expected_gbps")
    (tmp_path / "pinned.toml").write_text(pinned)
    config = load_agent_config(tmp_path / "pinned.toml", environ={})
    assert config.storage.infiniband_expected_gbps[active[0].name] == active[0].rate_gbps
    assert "# RDMA ports: none" in agent_toml(settings, detect_hardware(str(tmp_path), collectors=("infiniband",)))


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


def test_the_config_of_a_node_without_hardware_says_none_for_each_kind() -> None:
    from rigmon.setup.detect import Hardware

    states = {"gpu": "absent: NVML: NVML Shared Library Not Found", "raid": "absent: no /proc/mdstat",
              "nvme": "absent: no NVMe controllers", "thunderbolt": "absent: no Thunderbolt/USB4 bus",
              "infiniband": "absent: no RDMA devices"}
    settings = Settings(node="vm", listen="0.0.0.0:9871", user="rigmon", groups=(), exec_start=("/usr/bin/rigmon",),
                        tls=False)
    text = agent_toml(settings, Hardware(states=states))
    for line in ("# NVIDIA GPUs: none (absent: NVML", "# md arrays: none (absent", "# NVMe: none (absent: no NVMe",
                 "# Thunderbolt/USB4: none (absent", "# RDMA ports: none (absent"):
        assert line in text


def test_a_rerun_with_other_flags_prints_the_lines_of_the_configuration_kept(tmp_path: Path) -> None:
    assert setup_agent(tmp_path).returncode == 0
    again = setup_agent(tmp_path, "--listen", "0.0.0.0:9999", "--no-tls")
    assert again.returncode == 0, again.stderr
    # agent.toml is kept, so the agent still serves https on 9871: the lines to paste say that.
    assert "note: /etc/rigmon/agent.toml is kept as it is, so the agent serves https on 0.0.0.0:9871" in again.stdout
    assert "rigmon dash https://rig7:9871 --token-file" in again.stdout
    assert ":9999" not in again.stdout.split("note:")[1]
    first = setup_agent(tmp_path)
    assert "note:" not in first.stdout and "rigmon dash https://rig7:9871" in first.stdout


@pytest.mark.parametrize("user", ["", "Root", "9lives", "a b", "x" * 33])
def test_a_user_name_useradd_would_refuse_is_a_bad_argument(tmp_path: Path, user: str) -> None:
    # An empty --user wrote "User=" into the unit, which systemd reads as no user: the agent as root.
    out = setup_agent(tmp_path, "--user", user)
    assert out.returncode == 2 and "is not a system user name" in out.stderr, out.stderr
    assert files_of(tmp_path) == {}


def test_the_udev_rules_installed_match_nothing_until_a_line_is_uncommented() -> None:
    # README: "give it its udev name (uncomment its line ...)". The RP2040 example was an active rule
    # with a placeholder serial, unlike the other examples and the lines setup writes for devices found.
    from rigmon.setup.detect import Hardware
    from rigmon.setup.render import udev_rules

    active = [line for line in udev_rules(Hardware()).splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert active == []


def token_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_given_read_token_is_installed_then_kept_then_replaced(tmp_path: Path) -> None:
    # A lab: one token made once, copied to every node, so one Prometheus job reaches them all.
    root = tmp_path / "node"
    root.mkdir()
    lab = token_file(tmp_path / "lab.token", "c0ffee" * 8 + "\n")
    first = setup_agent(root, "--read-token-file", str(lab))
    assert first.returncode == 0, first.stderr
    files = files_of(root)
    assert files["etc/rigmon/read.token"] == (0o600, b"c0ffee" * 8 + b"\n")
    control = files["etc/rigmon/control.token"][1]
    assert control.strip() and control.strip() != b"c0ffee" * 8  # still its own, generated
    assert "created /etc/rigmon/read.token (read token, as given), mode 600" in first.stdout
    assert "token file  /etc/rigmon/read.token (as given with --read-token-file)" in first.stdout
    # The dashboard uses its one copy of the lab token for every node, not a per-node copy.
    assert "cp lab.token ~/.config/rigmon/ && chmod 600 ~/.config/rigmon/lab.token" in first.stdout
    assert "rigmon dash https://rig7:9871 --token-file ~/.config/rigmon/lab.token --ca-file " \
           "~/.config/rigmon/rig7.pem" in first.stdout
    assert 'token_file = "~/.config/rigmon/lab.token"' in first.stdout and "rig7.token" not in first.stdout

    # Without the flag a re-run keeps the token in place (given or generated) and restarts nothing.
    kept = setup_agent(root)
    assert kept.returncode == 0, kept.stderr
    assert files_of(root) == files and "kept /etc/rigmon/read.token" in kept.stdout
    assert "systemctl start rigmon-agent.service" in kept.stdout

    # With the flag it replaces the token in place, and the agent is restarted to take it.
    other = token_file(tmp_path / "other.token", "  beef" * 1 + "0123456789abcdef0123\n\n")
    replaced = setup_agent(root, "--read-token-file", str(other), "--control-token-file", str(lab))
    assert replaced.returncode == 0, replaced.stderr
    assert (root / "etc/rigmon/read.token").read_text() == "beef0123456789abcdef0123\n"
    assert (root / "etc/rigmon/control.token").read_text() == "c0ffee" * 8 + "\n"
    assert {(root / "etc/rigmon" / n).stat().st_mode & 0o777 for n in ("read.token", "control.token")} == {0o600}
    assert "updated /etc/rigmon/read.token (read token, as given), mode 600" in replaced.stdout
    assert "systemctl restart rigmon-agent.service" in replaced.stdout
    # The same file again: nothing to do.
    again = setup_agent(root, "--read-token-file", str(other))
    assert "unchanged /etc/rigmon/read.token" in again.stdout and "systemctl start rigmon-agent" in again.stdout
    # The installed token is one the agent takes (its own checks) from the installed configuration.
    from rigmon.agent.server import read_token_file

    config = load_agent_config(root / "etc/rigmon/agent.toml", environ={})
    assert config.agent.token_file == "/etc/rigmon/read.token"
    assert read_token_file(str(root / "etc/rigmon/read.token")) == "beef0123456789abcdef0123"


@pytest.mark.parametrize(("name", "text", "mode", "says"), [
    ("others-read", "abcdef0123456789\n", 0o644, "is readable or writable by other users; chmod 600 it"),
    ("group-read", "abcdef0123456789\n", 0o640, "is readable or writable by other users; chmod 600 it"),
    ("empty", "\n", 0o600, "is empty"),
    ("two-lines", "abcdef\n0123456789\n", 0o600, "holds spaces, line breaks or control characters"),
    ("directory", "", 0o700, "is a directory"),
    ("fifo", "", 0o600, "is a FIFO; a token file must be a regular file"),
    ("absent", "", 0o600, "No such file or directory"),
])
def test_a_token_file_the_agent_would_refuse_is_refused_before_anything_is_written(
        tmp_path: Path, name: str, text: str, mode: int, says: str) -> None:
    root = tmp_path / "node"
    root.mkdir()
    path = tmp_path / f"{name}.token"
    if name == "directory":
        path.mkdir(mode=mode)
    elif name == "fifo":
        os.mkfifo(path, mode)
    elif name != "absent":
        token_file(path, text, mode)
    for flag in ("--read-token-file", "--control-token-file"):
        out = setup_agent(root, flag, str(path), "--dry-run")
        assert out.returncode == 2, out.stderr
        assert out.stderr.startswith(f"rigmon: {flag} {path}") and says in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and out.stdout == ""
    assert files_of(root) == {}


def test_the_same_token_for_read_and_control_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "node"
    root.mkdir()
    lab = token_file(tmp_path / "lab.token", "0123456789abcdef0123456789abcdef\n")
    both = setup_agent(root, "--read-token-file", str(lab), "--control-token-file", str(lab))
    assert both.returncode == 2 and "the same token for read and control" in both.stderr, both.stderr
    assert files_of(root) == {}
    # Also against the token in place that a re-run keeps: the agent would refuse to start.
    assert setup_agent(root, "--read-token-file", str(lab)).returncode == 0
    installed = files_of(root)
    clash = setup_agent(root, "--control-token-file", str(lab))
    assert clash.returncode == 2 and "(the read token in place under " in clash.stderr, clash.stderr
    assert len(clash.stderr.strip().splitlines()) == 1 and files_of(root) == installed


@pytest.mark.parametrize("tls", [True, False])
def test_setup_prints_what_a_prometheus_job_needs_for_this_node(tmp_path: Path, tls: bool) -> None:
    out = setup_agent(tmp_path, "--listen", "0.0.0.0:9333", *(() if tls else ("--no-tls",)))
    assert out.returncode == 0, out.stderr
    block = out.stdout.split("\nFor Prometheus")[1]
    scheme = "https" if tls else "http"
    assert f"  url         {scheme}://rig7:9333/metrics   (target rig7:9333, scheme {scheme})" in block
    assert ("  ca_file     copy /etc/rigmon/agent.pem" in block) == tls
    assert "  token file  /etc/rigmon/read.token (one job: the same read token on every node, " \
           "rigmon setup agent --read-token-file FILE)" in block
    # What it names is what was installed, and the configuration serves that way.
    assert (tmp_path / "etc/rigmon/read.token").is_file()
    assert (tmp_path / "etc/rigmon/agent.pem").is_file() == tls
    config = load_agent_config(tmp_path / "etc/rigmon/agent.toml", environ={})
    assert config.agent.listen == "0.0.0.0:9333" and bool(config.agent.tls_cert_file) == tls


def test_token_files_go_without_uninstall(tmp_path: Path) -> None:
    lab = token_file(tmp_path / "lab.token", "0123456789abcdef\n")
    out = setup_agent(tmp_path, "--uninstall", "--read-token-file", str(lab))
    assert out.returncode == 2 and "go without --uninstall" in out.stderr


@pytest.mark.parametrize("node", ["rig 7", "rig/7", "-x", 'a"b', "rig7:9871", "ö"])
def test_a_node_name_that_is_no_host_name_is_refused(tmp_path: Path, node: str) -> None:
    # It became the host of the printed URLs ("https://rig 7:9871"), token file names and a certificate name.
    out = setup_agent(tmp_path, f"--node={node}")
    assert out.returncode == 2 and "is not a host name" in out.stderr, out.stderr
    assert files_of(tmp_path) == {}


def test_host_names_with_dots_and_underscores_are_node_names(tmp_path: Path) -> None:
    for node in ("rig7.lab.example", "gpu_01", "N1"):
        out = setup_agent(tmp_path, "--node", node, "--dry-run")
        assert out.returncode == 0, out.stderr


def test_a_hardware_root_that_is_not_there_is_refused(tmp_path: Path) -> None:
    # A mistyped --hw-root wrote a configuration saying the node had no hardware at all.
    out = setup_agent(tmp_path, hw_root=tmp_path / "typo")
    assert out.returncode == 2 and out.stderr.strip() == f"rigmon: --hw-root {tmp_path / 'typo'} is not a directory"
    assert files_of(tmp_path) == {}


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


def test_the_printed_lines_follow_the_token_and_certificate_files_a_kept_config_names(tmp_path: Path) -> None:
    # An edited agent.toml that reads another token file: the given token would not be the agent's.
    assert setup_agent(tmp_path).returncode == 0
    config = tmp_path / "etc/rigmon/agent.toml"
    config.write_text(config.read_text().replace('token_file = "/etc/rigmon/read.token"',
                                                 'token_file = "/etc/rigmon/lab.token"')
                      .replace('"/etc/rigmon/agent.pem"', '"/etc/rigmon/rig7.pem"'))
    lab = token_file(tmp_path / "lab.token", "0123456789abcdef0123\n")
    out = setup_agent(tmp_path, "--read-token-file", str(lab))
    assert out.returncode == 0, out.stderr
    assert "reads its read token from /etc/rigmon/lab.token, not /etc/rigmon/read.token" in out.stdout
    assert "  token file  /etc/rigmon/lab.token (one job:" in out.stdout
    assert "  ca_file     copy /etc/rigmon/rig7.pem" in out.stdout
    assert "scp root@rig7:/etc/rigmon/lab.token ~/.config/rigmon/rig7.token" in out.stdout
    assert "scp root@rig7:/etc/rigmon/rig7.pem ~/.config/rigmon/rig7.pem" in out.stdout
