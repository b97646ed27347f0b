"""Serial devices a PSU rail ADC may be: udev's stable names and their USB identity."""

from __future__ import annotations

import os
from dataclasses import dataclass

from rigmon.hw.root import HostRoot

#: Names rigmon's udev rule gives (deploy/udev/99-rigmon-adc.rules: SYMLINK+="rigmon-psu0").
RIGMON_LINK_PREFIX = "rigmon-"
#: udev's persistent names of USB serial devices (60-serial.rules).
BY_ID_DIR = "/dev/serial/by-id"


@dataclass(frozen=True, slots=True)
class SerialDevice:
    """A serial device as udev names it.

    Attributes:
        path: the stable name on the node (``/dev/rigmon-psu0``, ``/dev/serial/by-id/usb-...``).
        tty: the kernel's device it points at (``ttyACM0``), ``None`` when the link points outside /dev.
        vendor_id: USB ``idVendor`` (``2e8a``), ``None`` when sysfs does not say.
        product_id: USB ``idProduct``.
        serial: USB serial number (the ``ATTRS{serial}`` a udev rule matches).
        named_by_rigmon: udev named it after rigmon (its rule installed, or rigmon's firmware
            in the by-id name): an ADC of ours, not a guess.
        usb_device: the kernel's name of the USB device (``1-2.3``: bus 1, hub port 2, port 3), the
            ``KERNELS`` a udev rule matches to pin a device without a serial number to its USB port.
    """

    path: str
    tty: str | None
    vendor_id: str | None
    product_id: str | None
    serial: str | None
    named_by_rigmon: bool
    usb_device: str | None = None


#: How many directories above ``/sys/class/tty/TTY/device`` the USB device may be: the interface's parent
#: for CDC-ACM (``ttyACM0``), one more for a usb-serial bridge (``ttyUSB0``: port, interface, device).
USB_DEVICE_MAX_UP = 2


def _tty_name(target: str | None) -> str | None:
    if not target:
        return None
    name = os.path.basename(target)
    return name if name.startswith("tty") else None


def _usb_identity(root: HostRoot, tty: str | None) -> tuple[str | None, str | None, str | None, str | None]:
    """idVendor, idProduct, serial and kernel name of the USB device behind ``tty``.

    ``/sys/class/tty/ttyACM0/device`` is the USB interface, whose parent is the USB device with the
    identity files; ``/sys/class/tty/ttyUSB0/device`` is the usb-serial port (CH340, FTDI) below the
    interface, so its device is one level further up (udev's ``ATTRS`` search walks up the same way).
    """
    if tty is None:
        return None, None, None, None
    base = f"/sys/class/tty/{tty}/device"
    for _ in range(USB_DEVICE_MAX_UP):
        base += "/.."
        vendor = root.read_attr(f"{base}/idVendor")
        if vendor is not None:
            real = root.realpath(base)
            return (vendor, root.read_attr(f"{base}/idProduct"), root.read_attr(f"{base}/serial"),
                    os.path.basename(real) if real else None)
    return None, None, None, None


def list_serial_devices(root: HostRoot) -> list[SerialDevice]:
    """Every ``/dev/rigmon-*`` link and every ``/dev/serial/by-id`` entry below ``root``."""
    found: list[SerialDevice] = []
    names = [f"/dev/{n}" for n in root.listdir("/dev") if n.startswith(RIGMON_LINK_PREFIX)]
    names += [f"{BY_ID_DIR}/{n}" for n in root.listdir(BY_ID_DIR)]
    for path in names:
        target = root.readlink(path)
        tty = _tty_name(target)
        vendor, product, serial, usb_device = _usb_identity(root, tty)
        base = os.path.basename(path)
        ours = base.startswith(RIGMON_LINK_PREFIX) or "rigmon" in base.lower()
        found.append(SerialDevice(path=path, tty=tty, vendor_id=vendor, product_id=product, serial=serial,
                                  named_by_rigmon=ours, usb_device=usb_device))
    return found
