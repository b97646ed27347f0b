"""An NVMe drive's temperature sensors are named by the drive (``nvme0 Composite``), as the storage box and the
incidents name it, not by the controller's hwmon chip (``nvme-pci-6400``)."""

from __future__ import annotations

import pytest

from rigmon.cluster.sensor_names import drive_of, pci_chip_bus, temperature_names
from rigmon.schema import TemperatureReading
from tests.tui.test_storage_temp import nvme


def temp(sensor: str, label: str) -> TemperatureReading:
    return TemperatureReading(sensor=sensor, label=label, temp_c=41.85)


@pytest.mark.parametrize(("address", "bus"), [
    ("0000:64:00.0", "pci-6400"),
    ("0000:00:18.3", "pci-00c3"),  # libsensors' k10temp-pci-00c3: slot << 3 | function
    ("0001:c1:00.0", "pci-1c100"),  # a second PCI domain: more than four hex digits
    (None, None),
    ("traddr=10.0.0.5,trsvcid=4420", None),  # NVMe over TCP: no PCI function
    ("64:00.0", None),
])
def test_the_chip_bus_of_a_pci_address_is_libsensors(address: str | None, bus: str | None) -> None:
    assert pci_chip_bus(address) == bus


def test_two_drives_composites_are_named_by_their_drives() -> None:
    drives = [nvme(name="nvme0", address="0000:64:00.0"), nvme(name="nvme1", address="0000:65:00.0")]
    sensors = [temp("k10temp-pci-00c3/Tctl", "k10temp Tctl"),
               temp("nvme-pci-6500/Composite", "nvme Composite"),
               temp("nvme-pci-6400/Composite", "nvme Composite"),
               temp("nvme-pci-6400/Sensor 1", "nvme Sensor 1")]
    assert temperature_names(sensors, drives) == ["k10temp Tctl", "nvme1 Composite", "nvme0 Composite",
                                                  "nvme0 Sensor 1"]


def test_a_chip_no_drive_reported_keeps_its_names() -> None:
    # No NVMe record for it (the nvme collector failing), or an older agent's kernel numbering: as before.
    sensors = [temp("nvme-pci-6400/Composite", "nvme Composite"), temp("nvme-pci-6500/Composite", "nvme Composite"),
               temp("hwmon3/temp1", "nvme Composite")]
    assert drive_of(sensors[0], [nvme(name="nvme1", address="0000:65:00.0")]) is None
    assert temperature_names(sensors, []) == ["nvme Composite (nvme-pci-6400)", "nvme Composite (nvme-pci-6500)",
                                              "nvme Composite (hwmon3)"]
    # Another PCI chip at a drive's address is not the drive's.
    assert drive_of(temp("amdgpu-pci-6400/edge", "amdgpu edge"), [nvme(name="nvme0", address="0000:64:00.0")]) is None
