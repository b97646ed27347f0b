"""udev ``tty`` add events, so a replugged serial ADC is reopened at once instead of at the next poll."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)

TtyAddedFn = Callable[[str], None]


class TtyWatch(Protocol):
    """A source of tty ``add`` events (a hint: polling stays the ground truth)."""

    def start(self, on_added: TtyAddedFn) -> bool:
        """Call ``on_added(device_node)`` from a background thread for each tty added.

        Returns:
            False when no event source is available (no libudev, a container without
            udevd); the caller then relies on polling alone.
        """
        ...

    def stop(self) -> None:
        """Stop delivering events."""
        ...


class UdevTtyWatch:
    """pyudev monitor on the ``udev`` netlink group, filtered to the tty subsystem."""

    def __init__(self) -> None:
        self._observer: Any = None

    def start(self, on_added: TtyAddedFn) -> bool:
        try:
            import pyudev

            context = pyudev.Context()
            monitor = pyudev.Monitor.from_netlink(context, source="udev")
            monitor.filter_by("tty")

            def callback(device: Any) -> None:
                if device.action == "add":
                    on_added(str(device.device_node or device.sys_name))

            observer = pyudev.MonitorObserver(monitor, callback=callback, name="rigmon-tty-udev")
            observer.start()
        except (ImportError, OSError, ValueError) as exc:
            # pyudev raises ImportError when libudev is missing (at Context()), OSError when
            # netlink is not available: polling still finds the port.
            log.info("no udev tty events (%s); reopening the ADC port by polling only", exc)
            return False
        self._observer = observer
        return True

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.send_stop()
