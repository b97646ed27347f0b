"""A kept udev rules file: whether the operator uncommented a line, and which lines can never match."""

from __future__ import annotations

from pathlib import Path

from rigmon.lazy_re import lazy_compile

#: ``KERNELS=="1-2.3:1.0"``: a USB interface's name (``BUS-PORT[.PORT]:CONFIG.INTERFACE``).
_INTERFACE_KERNELS = lazy_compile(r'KERNELS=="[0-9]+-[0-9.]+:[0-9]+\.[0-9]+"')
#: Attributes only the USB device has, never its interface.
_DEVICE_ATTRS = lazy_compile(r'ATTRS\{(idVendor|idProduct|serial|manufacturer|product)\}==')


def never_matching(text: str) -> list[str]:
    """Active rule lines that pin a USB interface (``KERNELS=="1-2.3:1.0"``) and match an attribute of the
    USB device (``ATTRS{idVendor}``): udev matches a rule's parent keys on one device, so such a line names
    nothing (the CH340 example of rigmon's own rule file once was one)."""
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")
            and _INTERFACE_KERNELS.search(line) and _DEVICE_ATTRS.search(line)]


def has_active_rules(path: Path) -> bool:
    """Whether a udev rules file in place has a line that is not a comment (one the operator uncommented)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())
