"""`rigmon setup agent` into a temporary root: files, modes, idempotence, uninstall, the unit, the hardware
in the config, refused arguments."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rigmon.config import load_agent_config
from rigmon.setup.service_access import HIDDEN_PREFIXES, hidden_from_service
from rigmon.setup.detect import Hardware, detect_hardware
from rigmon.setup.render import Settings, agent_toml, systemd_unit
from rigmon.sim.rig import SimRig, get_scenario
from tests.setup.helpers import REPO, files_of, setup_agent


FILES = {  # path on the node -> mode
    "etc/rigmon/agent.toml": 0o644,
    "etc/rigmon/read.token": 0o600,
    "etc/rigmon/control.token": 0o600,
    "etc/rigmon/agent.pem": 0o644,
    "etc/rigmon/agent.key": 0o600,
    "etc/rigmon/setup-written.sha256": 0o644,  # what setup wrote, for --uninstall
    "etc/systemd/system/rigmon-agent.service": 0o644,
    "etc/udev/rules.d/99-rigmon-adc.rules": 0o644,
}


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
    assert "\nType=notify\n" in unit  # the start waits for the agent to listen, and fails when it cannot
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
    # ... which after reinstalling the same version left the old agent running: setup says so.
    upgrade = "after reinstalling rigmon at the same version, `systemctl restart rigmon-agent` runs the new code"
    assert upgrade in second.stdout and upgrade not in first.stdout

    # An edited configuration is kept; a loosened token is made private again.
    (tmp_path / "etc/rigmon/agent.toml").write_text("[agent]\nnode = \"mine\"\n")
    (tmp_path / "etc/rigmon/read.token").chmod(0o644)
    third = setup_agent(tmp_path)
    assert (tmp_path / "etc/rigmon/agent.toml").read_text() == "[agent]\nnode = \"mine\"\n"
    assert (tmp_path / "etc/rigmon/read.token").stat().st_mode & 0o777 == 0o600
    assert "set mode 600 on /etc/rigmon/read.token" in third.stdout

    removed = setup_agent(tmp_path, "--uninstall", "--purge")  # without --purge: test_setup_uninstall.py
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


def test_gpus_not_read_yet_are_not_written_as_none() -> None:
    # A slow first nvmlInit (no persistence mode): the collector was starting, the GPUs may be there.
    settings = Settings(node="v100-a", listen="0.0.0.0:9871", user="rigmon", groups=(),
                        exec_start=("/usr/bin/rigmon",), tls=False)
    starting = Hardware(states={"gpu": "starting: NVML starting: nvmlInit has not returned for 2.0 s"})
    assert "# NVIDIA GPUs: not read yet (starting: NVML starting" in agent_toml(settings, starting)
    assert "# NVIDIA GPUs: none (absent: no GPU)" in agent_toml(settings, Hardware(states={"gpu": "absent: no GPU"}))


def test_an_installation_under_home_is_refused_for_the_service() -> None:
    assert hidden_from_service(("/home/op/.local/bin/rigmon",)) == "/home/op/.local/bin/rigmon"
    assert hidden_from_service(("/root/.local/pipx/venvs/rigmon/bin/rigmon",)) is not None
    # A venv under /opt whose python is a pyenv interpreter under /root: the service cannot run it.
    assert hidden_from_service(("/opt/pipx/venvs/rigmon/bin/rigmon",),
                               "/root/.pyenv/versions/3.11.7/bin/python3.11") is not None
    if not str(REPO).startswith(HIDDEN_PREFIXES):
        assert hidden_from_service(("/opt/pipx/venvs/rigmon/bin/rigmon",), "/usr/bin/python3.11") is None


def test_an_installation_under_tmp_is_refused_for_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    # The unit's PrivateTmp=yes gives the service an empty /tmp and /var/tmp of its own: a venv made with
    # `python -m venv /tmp/rigmon` was accepted, and the unit failed at every start (Restart=always).
    # The package as installed under /opt (a checkout under /tmp, as CI's may be, is itself hidden).
    import rigmon

    monkeypatch.setattr(rigmon, "__file__", "/opt/rigmon/lib/python3.11/site-packages/rigmon/__init__.py")
    assert hidden_from_service(("/tmp/rigmon/bin/rigmon",), "/usr/bin/python3.11") == "/tmp/rigmon/bin/rigmon"
    assert hidden_from_service(("/var/tmp/rigmon/bin/rigmon",), "/usr/bin/python3.11") is not None
    assert hidden_from_service(("/opt/rigmon/bin/rigmon",), "/tmp/python/bin/python3.11") == "/tmp/python/bin/python3.11"
    from rigmon.setup.service_access import hidden_because

    # The refusal names the unit's setting that hides it.
    assert hidden_because("/tmp/rigmon/bin/rigmon").startswith("PrivateTmp=yes")
    assert hidden_because("/home/op/.local/bin/rigmon") == "ProtectHome=yes"


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
    assert "warning: /etc/rigmon/agent.toml is kept as it is, so the agent serves https on 0.0.0.0:9871" in again.stdout
    assert "rigmon dash https://rig7:9871 --token-file" in again.stdout
    assert ":9999" not in again.stdout.split("warning: /etc/rigmon/agent.toml")[1]
    first = setup_agent(tmp_path)
    assert "is kept as it is" not in first.stdout and "rigmon dash https://rig7:9871" in first.stdout


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


@pytest.mark.parametrize(("state", "line"), [
    ("error: NVML: NVML Shared Library Not Found, but 4 NVIDIA GPUs on the PCI bus",
     "# NVIDIA GPUs: not read (error: NVML: NVML Shared Library Not Found, but 4 NVIDIA GPUs"),
    ("hung", "# NVIDIA GPUs: not read (hung)"),
    ("ok", "# NVIDIA GPUs: none\n"),
])
def test_gpus_a_failing_or_hung_collector_did_not_read_are_not_written_as_none(state: str, line: str) -> None:
    # A V100 node set up before its driver was loaded read "NVIDIA GPUs: none (error: ... but 4 NVIDIA GPUs
    # on the PCI bus ...)": none only when the collector says there are none.
    settings = Settings(node="v100-a", listen="0.0.0.0:9871", user="rigmon", groups=(),
                        exec_start=("/usr/bin/rigmon",), tls=False)
    assert line in agent_toml(settings, Hardware(states={"gpu": state}))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (apt-get install systemd)")
def test_a_rigmon_in_a_directory_with_spaces_or_percent_runs_from_the_unit(tmp_path: Path) -> None:
    # ExecStart= split "/opt/my tools/bin/rigmon" at the space and read "%/" as a specifier.
    with tempfile.TemporaryDirectory(dir=tempfile.gettempdir()) as tmp:
        script = Path(tmp) / "my tools 100%" / "bin" / "rigmon"
        script.parent.mkdir(parents=True)
        script.write_text("#!/bin/sh\n")
        script.chmod(0o755)
        settings = Settings(node="v100-a", listen="0.0.0.0:9871", user="rigmon", groups=(),
                            exec_start=(str(script),), tls=False)
        unit = tmp_path / "rigmon-agent.service"
        unit.write_text(systemd_unit(settings))
        result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert f'ExecStart="{tmp}/my tools 100%%/bin/rigmon" agent --config /etc/rigmon/agent.toml\n' in unit.read_text()


def test_the_refusal_says_to_install_the_checkout_or_wheel_not_a_pypi_name() -> None:
    # "pipx install --global rigmon" asked PyPI for a package of that name (there is none, or someone else's).
    from rigmon.setup.command import INSTALL_SYSTEM_WIDE

    commands = re.findall(r"`([^`]*pipx install[^`]*)`", INSTALL_SYSTEM_WIDE)
    assert len(commands) == 2 and all(c.split()[-1] == "./rigmon" for c in commands)


def test_the_shipped_units_manual_steps_make_the_configuration_its_execstart_reads() -> None:
    # Followed by hand, the steps made no /etc/rigmon/agent.toml: `rigmon agent --config` exited 2 at
    # every start (Restart=always).
    shipped = (REPO / "deploy/systemd/rigmon-agent.service").read_text()
    config = re.search(r"^ExecStart=.* --config (\S+)", shipped, re.M)
    assert config is not None
    steps = [line[1:].strip() for line in shipped.splitlines() if line.startswith("#   sudo ")]
    assert any(step.split("#")[0].rstrip().endswith(config.group(1)) for step in steps), steps


def test_a_rerun_says_which_of_the_operators_unit_settings_it_replaced(tmp_path: Path) -> None:
    # The README's re-runs (--read-token-file on every node, an upgrade) rewrote an edited unit without a
    # word: a MemoryMax= raised for a large buffer_frames was back at 512M, and the agent was OOM-killed.
    assert setup_agent(tmp_path, "--no-tls").returncode == 0
    unit = tmp_path / "etc/systemd/system/rigmon-agent.service"
    assert "systemctl edit rigmon-agent" in unit.read_text().split("[Unit]")[0]
    unit.write_text(unit.read_text().replace("MemoryMax=512M", "MemoryMax=2G"))
    again = setup_agent(tmp_path, "--no-tls")
    assert again.returncode == 0, again.stderr
    assert "\n  replaced in /etc/systemd/system/rigmon-agent.service: MemoryMax=2G (setup writes this file: keep " \
           "your changes in a drop-in, `systemctl edit rigmon-agent`, which it never touches)\n" in again.stdout
    assert "MemoryMax=512M" in unit.read_text()
    third = setup_agent(tmp_path, "--no-tls")
    assert "replaced in" not in third.stdout and "unchanged /etc/systemd/system/rigmon-agent.service" in third.stdout
