"""`rigmon setup agent --uninstall`: what it removes, what it keeps (the operator's edits, the node's tokens and
certificate) until ``--purge``, and what it says."""

from __future__ import annotations

from pathlib import Path

from rigmon.setup.conffiles import format_record, parse_record
from tests.setup.helpers import files_of, setup_agent
from tests.setup.test_setup_serial import FTDI_BY_ID, usb_tty

CONFIG = "etc/rigmon/agent.toml"
RULES = "etc/udev/rules.d/99-rigmon-adc.rules"
IDENTITY = ("etc/rigmon/read.token", "etc/rigmon/control.token", "etc/rigmon/agent.pem", "etc/rigmon/agent.key")
CALIBRATION = '\n[psu.scale]\n"12V" = 1.0132\n'


def test_an_uninstall_keeps_the_configuration_the_operator_edited_until_purge(tmp_path: Path) -> None:
    # An operator who uninstalled to reinstall lost the agent.toml holding their calibration and notifiers,
    # without --purge and without a word.
    assert setup_agent(tmp_path).returncode == 0
    config = tmp_path / CONFIG
    edited = config.read_text() + CALIBRATION
    config.write_text(edited)
    identity = {rel: (tmp_path / rel).read_bytes() for rel in IDENTITY}

    out = setup_agent(tmp_path, "--uninstall")
    assert out.returncode == 0, out.stderr
    assert config.read_text() == edited
    assert "kept /etc/rigmon/agent.toml: changed since setup wrote it; --purge removes it" in out.stdout
    # What setup wrote and nobody changed goes, as before.
    assert not (tmp_path / "etc/systemd/system/rigmon-agent.service").exists()
    assert not (tmp_path / RULES).exists()
    assert "removed /etc/udev/rules.d/99-rigmon-adc.rules" in out.stdout
    # The tokens and certificate the dashboards and Prometheus hold stay, and say so.
    assert {rel: (tmp_path / rel).read_bytes() for rel in IDENTITY} == identity
    assert "kept /etc/rigmon/read.token, /etc/rigmon/control.token, /etc/rigmon/agent.pem, /etc/rigmon/agent.key: " \
           "the node's tokens and certificate" in out.stdout and "--purge removes them" in out.stdout

    # Installed again, the node is the one its clients know, with the operator's configuration.
    again = setup_agent(tmp_path)
    assert again.returncode == 0, again.stderr
    assert config.read_text() == edited
    assert {rel: (tmp_path / rel).read_bytes() for rel in IDENTITY} == identity
    # ... and a second uninstall still knows the configuration is the operator's.
    assert "kept /etc/rigmon/agent.toml: changed since" in setup_agent(tmp_path, "--uninstall").stdout

    purged = setup_agent(tmp_path, "--uninstall", "--purge")
    assert purged.returncode == 0, purged.stderr
    assert files_of(tmp_path) == {} and not (tmp_path / "etc/rigmon").exists()
    assert "removed /etc/rigmon/agent.toml" in purged.stdout and "kept" not in purged.stdout
    assert setup_agent(tmp_path, "--uninstall").stdout.strip() == "nothing to remove"


def test_an_uninstall_removes_the_configuration_as_setup_wrote_it(tmp_path: Path) -> None:
    assert setup_agent(tmp_path).returncode == 0
    assert setup_agent(tmp_path).returncode == 0  # a re-run that changed nothing
    out = setup_agent(tmp_path, "--uninstall")
    assert out.returncode == 0, out.stderr
    assert "removed /etc/rigmon/agent.toml" in out.stdout
    assert set(files_of(tmp_path)) == set(IDENTITY)  # the record of what setup wrote goes with the files


def test_an_uninstall_keeps_the_udev_rule_with_a_line_the_operator_uncommented(tmp_path: Path) -> None:
    node = tmp_path / "node"
    usb_tty(node, "ttyUSB0", "0403", "6001", "A50285BI", FTDI_BY_ID)
    root = tmp_path / "root"
    root.mkdir()
    assert setup_agent(root, "--no-tls", hw_root=node).returncode == 0
    rules = root / RULES
    line = next(x for x in rules.read_text().splitlines() if x.startswith("# SUBSYSTEM") and "rigmon-psu0" in x)
    edited = rules.read_text().replace(line, line[2:])
    rules.write_text(edited)
    dry = setup_agent(root, "--uninstall", "--dry-run", hw_root=node)
    assert "kept /etc/udev/rules.d/99-rigmon-adc.rules: changed since setup wrote it" in dry.stdout
    out = setup_agent(root, "--uninstall", hw_root=node)
    assert out.returncode == 0, out.stderr
    assert rules.read_text() == edited
    assert "kept /etc/udev/rules.d/99-rigmon-adc.rules: changed since setup wrote it; --purge removes it" in out.stdout
    assert "removed /etc/rigmon/agent.toml" in out.stdout
    assert {p.name for p in (root / "etc/rigmon").iterdir()} == {"read.token", "control.token", "setup-written.sha256"}
    assert setup_agent(root, "--uninstall", "--purge", hw_root=node).returncode == 0
    assert not rules.exists()


def test_an_installation_without_a_record_keeps_its_configuration(tmp_path: Path) -> None:
    # Installed by a rigmon from before the record: setup cannot tell its agent.toml from the operator's
    # edits, so it keeps it; the udev rule of comments only is setup's (a line uncommented would be kept).
    assert setup_agent(tmp_path).returncode == 0
    (tmp_path / "etc/rigmon/setup-written.sha256").unlink()
    out = setup_agent(tmp_path, "--uninstall")
    assert out.returncode == 0, out.stderr
    assert "kept /etc/rigmon/agent.toml: setup has no record in /etc/rigmon/setup-written.sha256 of writing it " \
           "as it is; --purge removes it" in out.stdout
    assert "removed /etc/udev/rules.d/99-rigmon-adc.rules" in out.stdout


def test_the_record_is_what_sha256sum_checks() -> None:
    records = {"/etc/rigmon/agent.toml": "a" * 64, "/etc/udev/rules.d/99-rigmon-adc.rules": "0" * 64}
    text = format_record(records)
    assert text.splitlines()[0] == f"{'a' * 64}  /etc/rigmon/agent.toml"
    assert parse_record(text + "garbage\nxyz  /etc/x\n") == records


def test_an_uninstall_keeps_the_units_drop_ins_until_purge(tmp_path: Path) -> None:
    # Setup rewrites its unit on every run and tells the operator to keep changes in a drop-in
    # (`systemctl edit rigmon-agent`: MemoryMax=, Environment=). An uninstall left that directory without a word,
    # and --purge left it too: a drop-in for a unit no longer there.
    assert setup_agent(tmp_path).returncode == 0
    drop_in = tmp_path / "etc/systemd/system/rigmon-agent.service.d/override.conf"
    drop_in.parent.mkdir()
    drop_in.write_text("[Service]\nMemoryMax=512M\n")

    out = setup_agent(tmp_path, "--uninstall")
    assert out.returncode == 0, out.stderr
    assert drop_in.read_text() == "[Service]\nMemoryMax=512M\n"
    assert ("kept /etc/systemd/system/rigmon-agent.service.d/: your drop-ins for the unit (systemctl edit); "
            "a new setup agent uses them again; --purge removes them") in out.stdout
    assert not (tmp_path / "etc/systemd/system/rigmon-agent.service").exists()

    purged = setup_agent(tmp_path, "--uninstall", "--purge")
    assert purged.returncode == 0, purged.stderr
    assert not drop_in.parent.exists()
    assert "removed /etc/systemd/system/rigmon-agent.service.d" in purged.stdout
