"""What the dashboard names a temperature sensor: an NVMe drive's sensors by the drive (``nvme0 Composite``),
as the storage box and the incidents name it, not by its hwmon chip (``nvme-pci-6400``)."""

from __future__ import annotations

from collections.abc import Sequence

from rigmon.schema import NvmeReading, TemperatureReading

#: The libsensors prefix of an NVMe controller's hwmon chip (``nvme-pci-6400``).
NVME_CHIP_PREFIX = "nvme"


def pci_chip_bus(address: str | None) -> str | None:
    """The bus part of the libsensors chip name of the PCI function at ``address`` (``0000:64:00.0`` ->
    ``pci-6400``: domain << 16 | bus << 8 | slot << 3 | function, four hex digits at least), ``None`` when
    ``address`` is not a PCI address (an NVMe-oF controller's, none)."""
    if address is None:
        return None
    domain, _, rest = address.rpartition(":")
    domain, _, bus = domain.partition(":")
    slot, _, function = rest.partition(".")
    try:
        parts = [int(part, 16) for part in (domain, bus, slot, function)]
    except ValueError:
        return None
    domain_n, bus_n, slot_n, function_n = parts
    if not (bus_n < 0x100 and slot_n < 0x20 and function_n < 8):
        return None
    return f"pci-{(domain_n << 16) + (bus_n << 8) + (slot_n << 3) + function_n:04x}"


def drive_of(sensor: TemperatureReading, drives: Sequence[NvmeReading]) -> str | None:
    """The name of the NVMe drive whose controller's hwmon chip ``sensor`` is on (``nvme0`` for
    ``nvme-pci-6400/Composite`` when nvme0 is at ``0000:64:00.0``), ``None`` for another chip's sensor or one
    an older agent names by the kernel's numbering (``hwmon3/temp1``)."""
    chip, slash, _ = sensor.sensor.partition("/")
    prefix, _, bus = chip.partition("-")
    if not slash or prefix != NVME_CHIP_PREFIX or not bus.startswith("pci-"):
        return None
    return next((d.name for d in drives if pci_chip_bus(d.address) == bus), None)


def temperature_names(sensors: Sequence[TemperatureReading], drives: Sequence[NvmeReading]) -> list[str]:
    """The name of each of ``sensors`` on the dashboard, in order: an NVMe drive's by the drive and the input
    (``nvme0 Composite``); others by their label (``k10temp Tctl``), or their sensor name without one, and
    where two share that, with their device (``pmbus temp1 (7-0058)``; the whole sensor if that is shared too).
    """
    names = []
    for sensor in sensors:
        drive = drive_of(sensor, drives)
        names.append(f"{drive} {sensor.sensor.partition('/')[2]}" if drive else sensor.label or sensor.sensor)
    out = []
    for sensor, name in zip(sensors, names, strict=True):
        if names.count(name) > 1:
            # Two chips with one driver (two PMBus PSUs: "pmbus temp1" each): the sensor's device (a PSU's
            # I2C client such as 1-0058, an hwmon device, a thermal zone) tells them apart.
            chip = sensor.sensor.split("/", 1)[0]
            same = [t.sensor.split("/", 1)[0] for t, n in zip(sensors, names, strict=True) if n == name]
            name += f" ({chip if same.count(chip) == 1 else sensor.sensor})"
        out.append(name)
    return out
