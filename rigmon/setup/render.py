"""The text of what `rigmon setup agent` installs: agent.toml, the systemd unit, the udev rule."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from rigmon import __version__

if TYPE_CHECKING:
    # Types only: detect imports every collector, which `rigmon --help` has no use for.
    from rigmon.setup.detect import Hardware

#: Where things go on the node (below ``--root`` in tests).
CONFIG_DIR = "/etc/rigmon"
CONFIG_FILE = f"{CONFIG_DIR}/agent.toml"
READ_TOKEN = f"{CONFIG_DIR}/read.token"
CONTROL_TOKEN = f"{CONFIG_DIR}/control.token"
TLS_CERT = f"{CONFIG_DIR}/agent.pem"
TLS_KEY = f"{CONFIG_DIR}/agent.key"
STATE_DIR = "/var/lib/rigmon"
UNIT_FILE = "/etc/systemd/system/rigmon-agent.service"
UDEV_FILE = "/etc/udev/rules.d/99-rigmon-adc.rules"
UNIT_NAME = "rigmon-agent.service"


@dataclass(frozen=True, slots=True)
class Settings:
    """What the installed agent is told.

    Attributes:
        node: node name on dashboards.
        listen: HOST:PORT the agent serves on.
        user: the system user it runs as.
        groups: supplementary groups that exist on this machine (dialout, video, render).
        exec_start: the program and arguments that run ``rigmon`` of this installation.
        tls: serve HTTPS with the generated certificate.
    """

    node: str
    listen: str
    user: str
    groups: tuple[str, ...]
    exec_start: tuple[str, ...]
    tls: bool


def _template(*parts: str) -> str:
    # deploy/ is packaged through the rigmon/setup/deploy symlink (like rigmon/themes).
    return resources.files("rigmon.setup").joinpath("deploy", *parts).read_text(encoding="utf-8")


def _toml(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string for what we write


def _gib(size: int | None) -> str:
    return f"{size / 2**30:.0f} GiB" if size else "size unknown"


def _words(*parts: str | None) -> str:
    return " ".join(p for p in parts if p)


def _nothing(kind: str, state: str | None) -> str:
    """The comment line for a kind of hardware of which no record came: none only when the collector
    said it is absent; a collector that failed, hung or was still starting did not read any."""
    if state is None:
        return f"# {kind}: not checked"
    if state == "ok":
        return f"# {kind}: none"
    if state.startswith("absent"):
        return f"# {kind}: none ({state})"
    # "none (error: ... but 4 NVIDIA GPUs on the PCI bus ...)" told the operator there were none.
    return f"# {kind}: not read{' yet' if state.startswith('starting') else ''} ({state})"


def _hardware_comments(hw: Hardware) -> list[str]:
    lines = ["# Detected by `rigmon setup agent` through the agent's own collectors. rigmon finds all of",
             "# this by itself; the list is here so you can check what the agent will watch."]
    if hw.gpus:
        lines.append(f"# NVIDIA GPUs (NVML): {len(hw.gpus)}")
        lines += [f"#   {g.index}  {g.name or '?'}  {g.uuid or '?'}  {g.pci_bus_id or '?'}" for g in hw.gpus]
    else:
        lines.append(_nothing("NVIDIA GPUs", hw.states.get("gpu")))
    if hw.amd_gpus:
        lines.append("# AMD GPUs (amdgpu): " + ", ".join(_words(g.card, g.pci_bus_id) for g in hw.amd_gpus))
    if hw.arrays:
        lines.append(f"# md arrays: {len(hw.arrays)}")
        lines += [f"#   {a.name}  {a.level or '?'}  {_gib(a.size_bytes)}  members: "
                  f"{', '.join(m.name for m in a.members) or 'none'}" for a in hw.arrays]
    else:
        lines.append(_nothing("md arrays", hw.states.get("raid")))
    if hw.nvme:
        lines.append("# NVMe: " + ", ".join(_words(n.name, n.model) for n in hw.nvme))
    else:
        lines.append(_nothing("NVMe", hw.states.get("nvme")))
    routers = [t for t in hw.thunderbolt if t.kind != "retimer"]
    if routers:
        lines.append(f"# Thunderbolt/USB4: {len(routers)} routers and hosts")
        lines += [f"#   {t.name}  {t.device_name or t.kind}  "
                  f"{f'{t.rx_gbps:g} Gb/s' if t.rx_gbps else 'no link speed'}" for t in routers]
    else:
        lines.append(_nothing("Thunderbolt/USB4", hw.states.get("thunderbolt")))
    if hw.rdma:
        lines.append(f"# RDMA ports (InfiniBand/RoCE): {len(hw.rdma)}")
        lines += [f"#   {p.name}  {p.link_layer or '?'}  {p.state or '?'}  {p.rate_text or 'no rate'}" for p in hw.rdma]
    else:
        lines.append(_nothing("RDMA ports", hw.states.get("infiniband")))
    return lines


def _storage_section(hw: Hardware) -> list[str]:
    """The RDMA ports' rates as seen now, commented: pinned, a port that later trains lower alarms
    even after the agent restarts (unpinned, a port expects the best rate seen since the start)."""
    active = [p for p in hw.rdma if p.state == "ACTIVE" and p.rate_gbps]
    if not active:
        return []
    rates = ", ".join(f"{_toml(p.name)} = {p.rate_gbps:g}" for p in active)
    return ["", "[storage]",
            "# Expected RDMA port rates (Gb/s), as the ports trained while set-up ran. Check them against",
            "# the cables and switch ports, then uncomment to alarm on a port that comes up slower:",
            f"# infiniband_expected_gbps = {{ {rates} }}"]


#: The udev name deploy/udev/99-rigmon-adc.rules gives a PZEM-017 meter (``/dev/rigmon-pzem0``): it speaks
#: Modbus RTU, not the RM1 lines of rigmon's firmware (``/dev/rigmon-psu0``, by-id ``usb-rigmon_rm1``).
PZEM_LINK_PREFIX = "/dev/rigmon-pzem"


def chosen_adc(hw: Hardware) -> str | None:
    """The serial ADC to configure: one udev named for rigmon (its rule, or rigmon's firmware)."""
    ours = [d for d in hw.serial if d.named_by_rigmon]
    return ours[0].path if ours else None


def adc_protocol(port: str) -> str:
    """The ``[psu] protocol`` of a device by the udev name rigmon's rule gave it."""
    return "pzem017" if port.startswith(PZEM_LINK_PREFIX) else "rm1"


def _same_device(hw: Hardware, path: str) -> set[str]:
    """``path`` and every other name of the tty it points at (udev gives one device several names)."""
    tty = next((d.tty for d in hw.serial if d.path == path), None)
    return {path} | ({d.path for d in hw.serial if d.tty == tty} if tty else set())


def _psu_section(hw: Hardware) -> list[str]:
    port = chosen_adc(hw)
    # The chosen device's by-id name is not another device.
    others = [d for d in hw.serial if d.path not in (_same_device(hw, port) if port else set())]
    lines = ["", "[psu]"]
    if port is not None and adc_protocol(port) == "pzem017":
        # Configured as rm1 it was polled by nobody: a node with a meter and never a rail reading.
        lines += ["# The PZEM-017 DC meter (Modbus RTU at 9600 baud), found by its udev name.",
                  f"port = {_toml(port)}",
                  'protocol = "pzem017"    # rm1 (rigmon firmware), text (other meters), pzem017 (Modbus RTU)']
    elif port is not None:
        lines += ["# The 12 V rail ADC, found by its udev name (wiring: firmware/README.md in rigmon's source).",
                  f"port = {_toml(port)}",
                  'protocol = "rm1"        # rm1 (rigmon firmware), text (other meters), pzem017 (Modbus RTU)']
    else:
        lines += ["# No ADC named by rigmon's udev rule (/dev/rigmon-psu0) was found. Wire one up",
                  "# (firmware/README.md), give it that name (/etc/udev/rules.d/99-rigmon-adc.rules), then:",
                  '# port = "/dev/rigmon-psu0"',
                  '# protocol = "rm1"']
    for dev in others:
        ident = f"USB {dev.vendor_id}:{dev.product_id} serial {dev.serial}" if dev.vendor_id else "no USB identity"
        lines.append(f"# other serial device: {dev.path} ({ident})")
    return lines


def agent_toml(settings: Settings, hw: Hardware) -> str:
    """The agent configuration `rigmon setup agent` writes."""
    lines = [
        f"# rigmon agent configuration, written by `rigmon setup agent` (rigmon {__version__}).",
        "# Every key is described in rigmon's README (\"The agent\"); a bad key stops the agent, naming it.",
        "# Re-running `rigmon setup agent` keeps this file as it is; delete it to have it written anew.",
        "",
        "[agent]",
        f"node = {_toml(settings.node)}",
        f"listen = {_toml(settings.listen)}",
        f"token_file = {_toml(READ_TOKEN)}            # read token: dashboards, snapshots, Prometheus",
        f"control_token_file = {_toml(CONTROL_TOKEN)}  # may acknowledge alarms",
        f"state_dir = {_toml(STATE_DIR)}",
    ]
    if settings.tls:
        lines += [f"tls_cert_file = {_toml(TLS_CERT)}", f"tls_key_file = {_toml(TLS_KEY)}"]
    lines += ["", *_hardware_comments(hw), *_psu_section(hw), *_storage_section(hw), "",
              "# Notifications (README, \"Alarms and notifications\"); try them first on the simulator:",
              "#   rigmon demo --agent-config this-file-with-only-the-notify-table.toml",
              "# [[notify]]",
              '# kind = "ntfy"',
              '# url = "https://ntfy.sh/your-topic"', ""]
    return "\n".join(lines)


def _exec_word(word: str) -> str:
    """One word of ExecStart= as systemd reads it back: specifiers (``%``) and variables (``$``) doubled,
    quoted when it holds whitespace, quotes or backslashes (a venv under ``/opt/my tools`` ran ``/opt/my``)."""
    word = word.replace("%", "%%").replace("$", "$$")
    if word and not any(c.isspace() or c in "\"'\\" for c in word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_unit(settings: Settings) -> str:
    """deploy/systemd/rigmon-agent.service with this installation's ExecStart, user and groups."""
    out = [f"# Written by `rigmon setup agent` (rigmon {__version__}); `rigmon setup agent --uninstall` removes it.",
           "# A re-run writes it anew: put your changes in a drop-in (systemctl edit rigmon-agent)."]
    for line in _template("systemd", "rigmon-agent.service").splitlines():
        if line.startswith("#") and not out[2:]:
            continue  # the template's manual install notes
        key = line.partition("=")[0]
        if key == "ExecStart":
            line = "ExecStart=" + " ".join(map(_exec_word, settings.exec_start)) + f" agent --config {CONFIG_FILE}"
        elif key == "User":
            line = f"User={settings.user}"
        elif key == "Group":
            line = f"Group={settings.user}"
        elif key == "SupplementaryGroups":
            if not settings.groups:
                continue
            line = "SupplementaryGroups=" + " ".join(settings.groups)
        out.append(line)
    return "\n".join(out) + "\n"


#: What makes udev match a value as a glob (fnmatch(3)), where a backslash before one makes it literal. A value
#: without any is compared as it is (a ``]`` alone is itself either way, and an escaped one would not be).
_UDEV_GLOB = "*?["


def udev_match_value(value: str) -> str | None:
    """``value`` as a udev match value (``ATTRS{serial}=="..."``) that matches that string and no other,
    or ``None`` when none can: a ``"`` ends the value (udev before 247 has no ``\\"``), ``|`` separates
    alternative patterns, a ``\\`` escapes the next character (and before the closing quote newer udev
    reads it as ``\\"``), and a control character ends or garbles the line. Glob characters are escaped."""
    if any(c in '"|\\' or ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return None
    return "".join(f"\\{c}" if c in _UDEV_GLOB else c for c in value)


def udev_rules(hw: Hardware) -> str:
    """deploy/udev/99-rigmon-adc.rules, plus a ready line for each USB serial device found."""
    text = _template("udev", "99-rigmon-adc.rules")
    # A device udev already names for rigmon (its by-id name too) has its rule: no second name for it.
    named = {d.tty for d in hw.serial if d.tty and d.path.startswith("/dev/rigmon-")}
    found = [d for d in hw.serial if d.vendor_id and d.product_id and not d.path.startswith("/dev/rigmon-")
             and d.tty not in named]
    if not found:
        return text
    lines = [text.rstrip("\n"), "",
             "# Serial devices `rigmon setup agent` found; uncomment one line of the ADC's (one name each):",
             "# rigmon-psu0 for rigmon's RM1 firmware, rigmon-pzem0 for a PZEM-017 meter's RS-485 adapter."]
    for dev in found:
        serial = udev_match_value(dev.serial) if dev.serial else None
        if dev.serial and serial is None:
            # Written as it is, the line named other devices too (a glob, an alternative) or broke (a `"`).
            said = (f"its USB serial number {_toml(dev.serial)} holds a character no udev match value can "
                    "(\", |, \\ or a control character)")
            if not dev.usb_device:
                lines.append(f"# {dev.path}: no line: {said}; match it by its USB port, the KERNELS that "
                             "`udevadm info -a` shows beside ATTRS{idVendor}")
                continue
            lines.append(f"# {dev.path} ({said}: the lines name its USB port)")
        elif dev.serial:
            lines.append(f"# {dev.path}")
        elif dev.usb_device:
            lines.append(f"# {dev.path} (no serial number: the lines name its USB port)")
        else:
            lines.append(f"# {dev.path} (no serial number and no USB port found: the lines name every "
                         f"{dev.vendor_id}:{dev.product_id} adapter; use one only if this is the only one)")
        # Without a serial number the line would name every such adapter: pin it to its USB port, on the
        # same device as the ATTRS (udev matches a rule's parent keys on one device).
        port = f'KERNELS=="{dev.usb_device}", ' if serial is None and dev.usb_device else ""
        match = f', ATTRS{{serial}}=="{serial}"' if serial is not None else ""
        for name in ("rigmon-psu0", "rigmon-pzem0"):
            lines.append(f'# SUBSYSTEM=="tty", {port}ATTRS{{idVendor}}=="{dev.vendor_id}", '
                         f'ATTRS{{idProduct}}=="{dev.product_id}"{match}, SYMLINK+="{name}", GROUP="dialout", '
                         f'MODE="0660", ENV{{ID_MM_DEVICE_IGNORE}}="1"')
    return "\n".join(lines) + "\n"
