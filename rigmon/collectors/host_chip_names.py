"""Boot-stable names of host temperature sensors and hwmon voltage inputs: an hwmon chip's libsensors name
(``k10temp-pci-00c3``, ``nct6798-isa-0290``), built from its ``name`` and its device's bus and address, and
thermal zones named by their ``type``.

The kernel numbers ``hwmonN`` and ``thermal_zoneN`` in probe order, which changes between boots (nvme,
k10temp, amdgpu, Super I/O and PMBus drivers load in varying order): a sensor named by them is another sensor after
a reboot, and an alarm's subject, its acknowledgement, a journal series and a Prometheus series would
follow the number. lm-sensors names a chip ``<name>-<bus>-<address>`` instead (libsensors'
``sensors_snprintf_chip_name``), which is also what ``sensors`` prints and accepts (``sensors
k10temp-pci-00c3``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rigmon.hw.root import HostRoot
from rigmon.lazy_re import lazy_compile

#: How far `read_chip_name` follows ``device`` links up from an hwmon device before calling it
#: virtual (an NVMe hwmon device's is its controller, whose is the PCI function: two steps).
MAX_DEVICE_HOPS = 8
#: The I2C bus number libsensors takes for the legacy ISA pseudo-adapter (``9191-0290``).
LEGACY_ISA_BUS = 9191

# The device names libsensors' classify_device (lib/sysfs.c) reads per bus.
_I2C = lazy_compile(r"(\d+)-([0-9a-fA-F]+)")  # 7-004c
_SPI = lazy_compile(r"spi(\d+)\.(\d+)")  # spi0.1
_PCI = lazy_compile(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F]+)")  # 0000:00:18.3
_PLATFORM = lazy_compile(r"[a-z0-9_]+\.(\d+)")  # nct6775.656, coretemp.0
_HID = lazy_compile(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F]+)")  # 0003:1B1C:0C1C.0005
_MDIO = lazy_compile(r"[^:]+:(\d+)")  # stmmac-0:01
_SCSI = lazy_compile(r"(\d+):(\d+):(\d+):([0-9a-fA-F]+)")  # 2:0:0:0


def parse_chip_bus(dev_name: str, subsystem: str | None) -> str | None:
    """The bus part of a libsensors chip name for a device named ``dev_name`` on bus ``subsystem``
    (the basename of its ``subsystem`` link), ``None`` when the bus is none libsensors names a chip by
    (a class device such as ``nvme0`` or ``thermal_zone0``: its own parent device names it).

    ``0000:00:18.3`` on ``pci`` -> ``pci-00c3`` (domain << 16 | bus << 8 | slot << 3 | function, four hex
    digits at least); ``coretemp.0`` on ``platform`` -> ``isa-0000`` (the number after the dot);
    ``7-004c`` on ``i2c`` -> ``i2c-7-4c``. A device without a ``subsystem`` link (``None``) is named by
    its name's form alone when that is an I2C, SPI or PCI device's; libsensors calls any other such
    device a platform device, which a tree copied without its links would make of an NVMe controller.
    """
    if subsystem in (None, "i2c") and (m := _I2C.fullmatch(dev_name)):
        bus, address = int(m[1]), int(m[2], 16)
        return f"isa-{address:04x}" if bus == LEGACY_ISA_BUS else f"i2c-{bus}-{address:02x}"
    if subsystem in (None, "spi") and (m := _SPI.fullmatch(dev_name)):
        return f"spi-{int(m[1])}-{int(m[2]):x}"
    if subsystem in (None, "pci") and (m := _PCI.fullmatch(dev_name)):
        domain, bus, slot, function = (int(part, 16) for part in m.groups())
        return f"pci-{(domain << 16) + (bus << 8) + (slot << 3) + function:04x}"
    if subsystem in ("platform", "of_platform"):
        m = _PLATFORM.fullmatch(dev_name)
        return f"isa-{int(m[1]) if m else 0:04x}"
    if subsystem == "acpi":
        return "acpi-0"
    if subsystem == "hid" and (m := _HID.fullmatch(dev_name)):
        return f"hid-{int(m[1], 16)}-{int(m[4], 16):x}"
    if subsystem == "mdio_bus":
        m = _MDIO.fullmatch(dev_name)
        return f"mdio-{int(m[1]) if m else 0:x}"
    if subsystem == "scsi" and (m := _SCSI.fullmatch(dev_name)):
        host, channel, target, lun = int(m[1]), int(m[2]), int(m[3]), int(m[4], 16)
        return f"scsi-{host}-{(channel << 8) + (target << 4) + lun:x}"
    return None


def read_chip_name(root: HostRoot, hwmon_dir: str, prefix: str) -> str:
    """The libsensors name of the hwmon device in ``hwmon_dir`` whose ``name`` is ``prefix``:
    ``k10temp-pci-00c3``, ``nvme-pci-6400``, ``coretemp-isa-0000``; ``<prefix>-virtual-0`` for one
    without a device on a bus that names it (``acpitz`` of a thermal zone, ``iwlwifi_1``).

    As libsensors does (lib/sysfs.c ``find_bus_type``), the device is the target of the hwmon
    device's ``device`` link, and a device on a bus that names none (an NVMe controller, ``nvme`` class)
    is passed for the one its own ``device`` link names (the controller's PCI function).
    """
    device = root.realpath(f"{hwmon_dir}/device")
    for _ in range(MAX_DEVICE_HOPS):
        if device is None or device == "/":
            break
        # ../../../bus/pci: the bus is the link's last part, as libsensors reads it.
        link = root.readlink(f"{device}/subsystem")
        subsystem = None if link is None else link.rstrip("/").rsplit("/", 1)[-1]
        bus = parse_chip_bus(device.rsplit("/", 1)[-1], subsystem)
        if bus is not None:
            return f"{prefix}-{bus}"
        # A PCI function's ``device`` is a file (its device id), a class device's the link to its parent.
        device = root.realpath(f"{device}/device") if root.readlink(f"{device}/device") is not None else None
    return f"{prefix}-virtual-0"


class NamedChip(Protocol):
    """Facts of one hwmon registration that name its chip: its ``name`` and its libsensors name."""

    @property
    def chip(self) -> str:
        """The chip's ``name`` (``nct6798``), or its ``hwmonN`` when that did not read."""
        ...

    @property
    def chip_name(self) -> str | None:
        """The chip's libsensors name (``nct6798-isa-0290``), ``None`` when its ``name`` did not read."""
        ...


def registration_chip_name(root: HostRoot, hwmon_dir: str, name: str | None, before: NamedChip | None) -> str | None:
    """The libsensors name of the chip in ``hwmon_dir`` whose ``name`` read ``name`` (`read_chip_name`), for a
    read of its registration's facts; what the read before of the same registration found (``before``) when
    its ``name`` did not read now (``None`` without one), or its ``device`` link did not (``<name>-virtual-0``)."""
    if name is None:
        return None if before is None else before.chip_name
    chip_name = read_chip_name(root, hwmon_dir, name)
    if chip_name == f"{name}-virtual-0" and before is not None and before.chip_name is not None \
            and before.chip == name:
        return before.chip_name
    return chip_name


def input_names(channels: Sequence[tuple[str, str | None]]) -> list[str]:
    """What names each of a chip's inputs within its sensor name, given as (``temp1``, its label or
    ``None``): its label (``Tctl``, ``Composite``), or the channel when it has none, or when another of
    the chip's inputs has the same label (two inputs are never one sensor)."""
    labels = [label for _, label in channels if label]
    return [label if label and labels.count(label) == 1 else channel for channel, label in channels]


def zone_sensors(types: Sequence[str]) -> list[str]:
    """The sensor name of each thermal zone given by its ``type`` in zone order: the type
    (``x86_pkg_temp``, ``acpitz``); a later zone of a type already listed is numbered after it
    (``x86_pkg_temp-1``: the second package of a two-socket Xeon), as its driver registers its zones
    in the same order every boot while other drivers' zones come between them in varying order."""
    seen: dict[str, int] = {}
    names = []
    for zone_type in types:
        count = seen.get(zone_type, 0)
        seen[zone_type] = count + 1
        names.append(zone_type if count == 0 else f"{zone_type}-{count}")
    return names
