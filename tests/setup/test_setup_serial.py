"""`rigmon setup agent` and the node's serial devices: which one becomes `[psu]`, with which protocol, and
what the generated udev rule offers for the others."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from rigmon.config import load_agent_config
from rigmon.hw.serial_ports import SerialDevice
from rigmon.setup.detect import Hardware, detect_hardware
from rigmon.setup.render import Settings, agent_toml, udev_rules
from tests.setup.helpers import setup_agent
from tests.setup.udev_match import rule_matches, symlinks

SETTINGS = Settings(node="pzem-1", listen="0.0.0.0:9871", user="rigmon", groups=("dialout",),
                    exec_start=("/usr/bin/rigmon",), tls=False)
FTDI_BY_ID = "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A50285BI-if00-port0"


def usb_tty(root: Path, tty: str, vendor: str, product: str, serial: str, *links: str) -> None:
    """A USB serial device as the kernel and udev show it: sysfs identity, /dev/TTY and relative links to it."""
    usb = root / "sys/devices/pci0000:00/usb1/1-2"
    (usb / "1-2:1.0" / tty).mkdir(parents=True)
    (usb / "1-2:1.0" / tty / "device").symlink_to("..")
    for name, value in (("idVendor", vendor), ("idProduct", product), ("serial", serial)):
        (usb / name).write_text(value + "\n")
    (root / "sys/class/tty").mkdir(parents=True, exist_ok=True)
    (root / "sys/class/tty" / tty).symlink_to(f"../../devices/pci0000:00/usb1/1-2/1-2:1.0/{tty}")
    (root / "dev" / tty).parent.mkdir(parents=True, exist_ok=True)
    (root / "dev" / tty).touch()
    for link in links:
        path = root / link.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(os.path.relpath(root / "dev" / tty, path.parent))


def test_a_pzem017_named_by_the_shipped_udev_rule_is_configured_as_one(tmp_path: Path) -> None:
    # deploy/udev/99-rigmon-adc.rules names a PZEM-017's RS-485 adapter /dev/rigmon-pzem0. Set-up configured
    # it with protocol "rm1": the agent waited for RM1 lines that a Modbus meter never sends, so a node
    # with a meter never had a rail reading.
    node = tmp_path / "node"
    usb_tty(node, "ttyUSB0", "0403", "6001", "A50285BI", "/dev/rigmon-pzem0", FTDI_BY_ID)
    hw = detect_hardware(str(node), collectors=())
    text = agent_toml(SETTINGS, hw)
    (tmp_path / "agent.toml").write_text(text)
    psu = load_agent_config(tmp_path / "agent.toml", environ={}).psu
    assert (psu.port, psu.protocol) == ("/dev/rigmon-pzem0", "pzem017")
    # Its by-id name is the same adapter, not another serial device; and no rule offers it a second name.
    assert "other serial device" not in text
    assert "# Serial devices `rigmon setup agent` found" not in udev_rules(hw)


def test_the_rm1_adc_keeps_protocol_rm1_and_other_devices_are_listed(tmp_path: Path) -> None:
    node = tmp_path / "node"
    usb_tty(node, "ttyACM0", "2e8a", "000a", "E6614C311B2A1234", "/dev/rigmon-psu0",
            "/dev/serial/by-id/usb-rigmon_rm1_E6614C311B2A1234-if00")
    hw = detect_hardware(str(node), collectors=())
    (tmp_path / "agent.toml").write_text(agent_toml(SETTINGS, hw))
    psu = load_agent_config(tmp_path / "agent.toml", environ={}).psu
    assert psu.protocol == "rm1" and psu.port in ("/dev/rigmon-psu0",
                                                  "/dev/serial/by-id/usb-rigmon_rm1_E6614C311B2A1234-if00")
    other = tmp_path / "other"
    usb_tty(other, "ttyUSB0", "0403", "6001", "A50285BI", FTDI_BY_ID)
    hw = detect_hardware(str(other), collectors=())
    text = agent_toml(SETTINGS, hw)
    assert '# port = "/dev/rigmon-psu0"' in text and f"# other serial device: {FTDI_BY_ID} (USB 0403:6001" in text
    assert 'ATTRS{serial}=="A50285BI", SYMLINK+="rigmon-psu0"' in udev_rules(hw)


def test_setup_writes_the_pzem017_protocol_into_the_installed_config(tmp_path: Path) -> None:
    node = tmp_path / "node"
    usb_tty(node, "ttyUSB0", "0403", "6001", "A50285BI", "/dev/rigmon-pzem0", FTDI_BY_ID)
    root = tmp_path / "root"
    root.mkdir()
    out = setup_agent(root, "--no-tls", hw_root=node)
    assert out.returncode == 0, out.stderr
    text = (root / "etc/rigmon/agent.toml").read_text()
    assert 'port = "/dev/rigmon-pzem0"\nprotocol = "pzem017"' in text


def test_a_rerun_keeps_the_udev_rule_line_the_operator_uncommented(tmp_path: Path) -> None:
    # README: give the ADC its udev name by uncommenting its line, then re-run setup on every node with
    # --read-token-file. The re-run rewrote the file: the line was gone, udev reloaded and triggered,
    # /dev/rigmon-psu0 vanished and the agent's ADC with it.
    node = tmp_path / "node"
    usb_tty(node, "ttyUSB0", "0403", "6001", "A50285BI", FTDI_BY_ID)
    root = tmp_path / "root"
    root.mkdir()
    assert setup_agent(root, "--no-tls", hw_root=node).returncode == 0
    rules = root / "etc/udev/rules.d/99-rigmon-adc.rules"
    line = next(x for x in rules.read_text().splitlines() if x.startswith("# SUBSYSTEM") and "A50285BI" in x
                and "rigmon-psu0" in x)
    edited = rules.read_text().replace(line, line[2:])
    rules.write_text(edited)
    (node / "dev/rigmon-psu0").symlink_to("ttyUSB0")  # udev applied it
    token = tmp_path / "lab.token"
    token.write_text("0123456789abcdef0123456789abcdef\n")
    token.chmod(0o600)
    again = setup_agent(root, "--no-tls", "--read-token-file", str(token), hw_root=node)
    assert again.returncode == 0, again.stderr
    assert rules.read_text() == edited
    assert "kept /etc/udev/rules.d/99-rigmon-adc.rules (udev rule for the ADC, with your uncommented lines)" \
        in again.stdout
    assert "udevadm trigger" not in again.stdout
    # A file of comments only is still brought up to date (the devices found now).
    rules.write_text("# nothing\n")
    third = setup_agent(root, "--no-tls", hw_root=node)
    assert "updated /etc/udev/rules.d/99-rigmon-adc.rules" in third.stdout and rules.read_text() != "# nothing\n"


def usb_serial_tty(root: Path, tty: str, vendor: str, product: str, serial: str | None, *links: str,
                   usb_dev: str = "1-2.3") -> None:
    """A USB-UART bridge (CH340, FTDI) as the kernel lays it out (udev.md 5.5): the tty class device is the
    child of a usb-serial port of the same name, below the USB interface, below the USB device."""
    usb = root / "sys/devices/pci0000:00/0000:00:14.0/usb1" / usb_dev
    port = usb / f"{usb_dev}:1.0" / tty
    (port / "tty" / tty).mkdir(parents=True)
    (port / "tty" / tty / "device").symlink_to("../..")
    (port / "tty" / tty / "dev").write_text("188:0\n")
    ids = {"idVendor": vendor, "idProduct": product, **({"serial": serial} if serial else {})}
    for name, value in ids.items():
        (usb / name).write_text(value + "\n")
    (usb / f"{usb_dev}:1.0" / "bInterfaceNumber").write_text("00\n")
    (root / "sys/class/tty").mkdir(parents=True, exist_ok=True)
    (root / "sys/class/tty" / tty).symlink_to(os.path.relpath(port / "tty" / tty, root / "sys/class/tty"))
    (root / "dev").mkdir(parents=True, exist_ok=True)
    (root / "dev" / tty).touch()
    for link in links:
        path = root / link.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(os.path.relpath(root / "dev" / tty, path.parent))


CH340_BY_PATH_ID = "/dev/serial/by-id/usb-1a86_USB_Serial-if00-port0"


def test_a_usb_uart_bridge_behind_ttyusb_is_identified_and_offered_a_udev_line(tmp_path: Path) -> None:
    # /sys/class/tty/ttyUSB0/device is the usb-serial port, whose parent is the USB interface: set-up read
    # idVendor there, found none, and wrote "(no USB identity)" for every FTDI or CH340 adapter (the PZEM's
    # RS-485 dongle, a CH340 ADC board) and no udev line to uncomment for it.
    node = tmp_path / "node"
    usb_serial_tty(node, "ttyUSB0", "0403", "6001", "A50285BI", FTDI_BY_ID)
    hw = detect_hardware(str(node), collectors=())
    assert [(d.vendor_id, d.product_id, d.serial) for d in hw.serial] == [("0403", "6001", "A50285BI")]
    assert f"# other serial device: {FTDI_BY_ID} (USB 0403:6001 serial A50285BI)" in agent_toml(SETTINGS, hw)
    assert 'ATTRS{idVendor}=="0403", ATTRS{idProduct}=="6001", ATTRS{serial}=="A50285BI"' in udev_rules(hw)


def _example(rules: str, marker: str) -> str:
    """The commented example line of the shipped udev rule that follows the comment saying ``marker``."""
    lines = rules.splitlines()
    at = next(i for i, line in enumerate(lines) if marker in line)
    return next(line[2:] for line in lines[at:] if line.startswith("# SUBSYSTEM"))


def test_the_shipped_udev_examples_match_the_devices_they_are_for(tmp_path: Path) -> None:
    # The CH340 example matched KERNELS=="1-2.3:1.0" (the USB interface) and ATTRS{idVendor} (which only
    # the USB device 1-2.3 has): udev wants every parent key on one device, so it named nothing, and an
    # operator who uncommented it had no /dev/rigmon-psu0.
    rules = udev_rules(detect_hardware(str(tmp_path / "empty"), collectors=()))
    ch340 = tmp_path / "ch340"
    usb_serial_tty(ch340, "ttyUSB0", "1a86", "7523", None, CH340_BY_PATH_ID, usb_dev="1-2.3")
    line = _example(rules, "CH340")
    assert rule_matches(line, ch340, "ttyUSB0") and symlinks(line) == ["rigmon-psu0"]
    other_port = tmp_path / "ch340-b"
    usb_serial_tty(other_port, "ttyUSB0", "1a86", "7523", None, CH340_BY_PATH_ID, usb_dev="1-4")
    assert not rule_matches(line, other_port, "ttyUSB0")  # pinned to its port, as the comment says
    ftdi = tmp_path / "ftdi"
    usb_serial_tty(ftdi, "ttyUSB0", "0403", "6001", "A50285BI", FTDI_BY_ID)
    line = _example(rules, "PZEM-017")
    assert rule_matches(line, ftdi, "ttyUSB0") and symlinks(line) == ["rigmon-pzem0"]
    pico = tmp_path / "pico"
    usb_tty(pico, "ttyACM0", "2e8a", "000a", "E6614C311B2A1234")
    line = _example(rules, "RP2040")
    assert rule_matches(line, pico, "ttyACM0") and not rule_matches(line, ftdi, "ttyUSB0")


def test_the_udev_line_offered_for_a_device_without_a_serial_names_only_that_device(tmp_path: Path) -> None:
    # A CH340 has no serial number: the line offered for it matched every CH340 on the node, so a second
    # one (a console cable) took /dev/rigmon-psu0 too, and the agent read whichever udev linked last.
    node = tmp_path / "node"
    usb_serial_tty(node, "ttyUSB0", "1a86", "7523", None, CH340_BY_PATH_ID, usb_dev="1-2.3")
    hw = detect_hardware(str(node), collectors=())
    offered = [line[2:] for line in udev_rules(hw).split("found; uncomment")[1].splitlines()
               if line.startswith("# SUBSYSTEM") and 'SYMLINK+="rigmon-psu0"' in line]
    assert len(offered) == 1 and rule_matches(offered[0], node, "ttyUSB0")
    other = tmp_path / "other"
    usb_serial_tty(other, "ttyUSB0", "1a86", "7523", None, CH340_BY_PATH_ID, usb_dev="1-4")
    assert not rule_matches(offered[0], other, "ttyUSB0")


def test_a_device_without_a_serial_or_a_usb_port_is_said_to_match_every_adapter_of_its_model() -> None:
    # The comment above its lines said "the lines name its USB port" when no port was found either: the lines
    # matched every adapter of that vendor and product, and the comment said the opposite.
    device = SerialDevice(path="/dev/serial/by-id/usb-1a86_USB_Serial-if00-port0", tty="ttyUSB0",
                          vendor_id="1a86", product_id="7523", serial=None, named_by_rigmon=False, usb_device=None)
    rules = udev_rules(Hardware(serial=[device])).split("found; uncomment")[1]
    assert "the lines name its USB port" not in rules
    assert ("# /dev/serial/by-id/usb-1a86_USB_Serial-if00-port0 (no serial number and no USB port found: the lines "
            "name every 1a86:7523 adapter; use one only if this is the only one)") in rules
    assert all("KERNELS" not in line for line in rules.splitlines() if line.startswith("# SUBSYSTEM"))


def test_a_pzem017_adapter_found_is_offered_the_meters_name(tmp_path: Path) -> None:
    # README: "A PZEM-017 DC meter instead: its line names it /dev/rigmon-pzem0". The line offered for the
    # meter's RS-485 adapter named it rigmon-psu0: uncommented, set-up configured it as an RM1 ADC (protocol
    # rm1, which the Modbus meter never speaks) and the README's port = "/dev/rigmon-pzem0" did not exist.
    node = tmp_path / "node"
    usb_serial_tty(node, "ttyUSB0", "0403", "6001", "A50285BI", FTDI_BY_ID)
    rules = udev_rules(detect_hardware(str(node), collectors=()))
    offered = [line[2:] for line in rules.split("found; uncomment")[1].splitlines() if line.startswith("# SUBSYSTEM")]
    pzem = [line for line in offered if symlinks(line) == ["rigmon-pzem0"]]
    assert len(pzem) == 1 and rule_matches(pzem[0], node, "ttyUSB0")
    # udev applies it: set-up now configures the meter as one.
    (node / "dev/rigmon-pzem0").symlink_to("ttyUSB0")
    text = agent_toml(SETTINGS, detect_hardware(str(node), collectors=()))
    assert 'port = "/dev/rigmon-pzem0"\nprotocol = "pzem017"' in text


OLD_CH340_LINE = ('SUBSYSTEM=="tty", KERNELS=="1-2.3:1.0", ATTRS{idVendor}=="1a86", ATTRS{idProduct}=="7523", '
                  'SYMLINK+="rigmon-psu0", GROUP="dialout", MODE="0660", ENV{ID_MM_DEVICE_IGNORE}="1"')


def test_a_kept_udev_rule_with_the_old_ch340_line_is_a_warning(tmp_path: Path) -> None:
    # An operator who uncommented the old CH340 example keeps it (a file with an active line is kept), and
    # it never named the board: the re-run after the upgrade said "kept" and nothing else.
    node = tmp_path / "node"
    usb_serial_tty(node, "ttyUSB0", "1a86", "7523", None, CH340_BY_PATH_ID, usb_dev="1-2.3")
    assert not rule_matches(OLD_CH340_LINE, node, "ttyUSB0")
    root = tmp_path / "root"
    root.mkdir()
    assert setup_agent(root, "--no-tls", hw_root=node).returncode == 0
    rules = root / "etc/udev/rules.d/99-rigmon-adc.rules"
    rules.write_text(rules.read_text() + OLD_CH340_LINE + "\n")
    again = setup_agent(root, "--no-tls", "--strict", hw_root=node)
    assert again.returncode == 3, again.stdout + again.stderr  # a warning (--strict)
    assert f"warning: /etc/udev/rules.d/99-rigmon-adc.rules: this line never matches (its KERNELS is a USB " \
           f"interface, its ATTRS are the USB device's; udev wants both on one device): {OLD_CH340_LINE}; " in again.stdout
    fixed = OLD_CH340_LINE.replace('"1-2.3:1.0"', '"1-2.3"')
    assert rule_matches(fixed, node, "ttyUSB0")
    rules.write_text(rules.read_text().replace(OLD_CH340_LINE, fixed))
    last = setup_agent(root, "--no-tls", hw_root=node)
    assert last.returncode == 0 and "never matches" not in last.stdout, last.stdout


def test_readme_and_the_rule_file_reload_udev_as_setup_does() -> None:
    # README and the rule file told the operator `udevadm trigger`: a change event for every device of the
    # node (md arrays, NVMe, network links) during a training run, where setup triggers the tty devices only.
    from tests.setup.helpers import REPO

    told = (REPO / "README.md").read_text() + (REPO / "deploy/udev/99-rigmon-adc.rules").read_text()
    triggers = re.findall(r"udevadm control --reload && (?:sudo )?(udevadm trigger[^`\n]*)", told)
    assert len(triggers) == 2 and all(t == "udevadm trigger --subsystem-match=tty" for t in triggers), triggers


def _offered(node: Path) -> list[str]:
    rules = udev_rules(detect_hardware(str(node), collectors=()))
    return [line[2:] for line in rules.split("found; uncomment")[1].splitlines() if line.startswith("# SUBSYSTEM")]


@pytest.mark.parametrize(("serial", "other"), [("A5*", "A5XY"), ("A5?", "A5X"), ("A5[0-9]", "A55"),
                                               ("A5]]", "A5]")])
def test_a_serial_number_with_glob_characters_names_only_its_device(tmp_path: Path, serial: str, other: str) -> None:
    # udev match values are globs: ATTRS{serial}=="A5*" named every adapter whose serial starts A5 (a console
    # cable took /dev/rigmon-psu0), and "A5[0-9]" named not the device whose serial it is but its neighbours.
    node, elsewhere = tmp_path / "node", tmp_path / "other"
    usb_serial_tty(node, "ttyUSB0", "0403", "6001", serial, FTDI_BY_ID)
    usb_serial_tty(elsewhere, "ttyUSB0", "0403", "6001", other, FTDI_BY_ID)
    offered = _offered(node)
    assert len(offered) == 2 and all("ATTRS{serial}" in line for line in offered)
    assert all(rule_matches(line, node, "ttyUSB0") and not rule_matches(line, elsewhere, "ttyUSB0")
               for line in offered)


@pytest.mark.parametrize(("serial", "other"), [('AB"C', "AB"), ("AB\\", "AB"), ("A5|B7", "B7"), ("A5\nX", "A5")])
def test_a_serial_number_no_udev_value_can_hold_gives_lines_by_usb_port(tmp_path: Path, serial: str,
                                                                          other: str) -> None:
    # A `"` ended the value early (the rest of the line garbled: SYMLINK+= went missing or was misread), a
    # trailing backslash made newer udev read the closing quote as part of the value, `|` made "A5|B7" match
    # a device with serial B7, and a newline put the rest of the line on an uncommented line of its own.
    node, elsewhere = tmp_path / "node", tmp_path / "other"
    usb_serial_tty(node, "ttyUSB0", "0403", "6001", serial, FTDI_BY_ID, usb_dev="1-2.3")
    usb_serial_tty(elsewhere, "ttyUSB0", "0403", "6001", other, FTDI_BY_ID, usb_dev="1-4")
    rules = udev_rules(detect_hardware(str(node), collectors=()))
    assert all(not line.strip() or line.startswith("#") for line in rules.splitlines())
    offered = _offered(node)
    assert len(offered) == 2 and all("ATTRS{serial}" not in line and 'KERNELS=="1-2.3"' in line for line in offered)
    assert [symlinks(line) for line in offered] == [["rigmon-psu0"], ["rigmon-pzem0"]]
    assert all(rule_matches(line, node, "ttyUSB0") and not rule_matches(line, elsewhere, "ttyUSB0")
               for line in offered)
    assert "holds a character no udev match value can" in rules


def test_a_serial_number_no_udev_value_can_hold_without_a_usb_port_gives_no_line() -> None:
    from rigmon.hw.serial_ports import SerialDevice
    from rigmon.setup.detect import Hardware

    dev = SerialDevice(path=FTDI_BY_ID, tty="ttyUSB0", vendor_id="0403", product_id="6001", serial='AB"C',
                       named_by_rigmon=False)
    rules = udev_rules(Hardware(serial=[dev]))
    found = rules.split("found; uncomment")[1]
    assert "SUBSYSTEM" not in found
    assert f'# {FTDI_BY_ID}: no line: its USB serial number "AB\\"C" holds a character' in found
