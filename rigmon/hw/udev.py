"""udev event sources (pyudev, or a fake in tests) and a watcher thread that turns events into re-reads.

Events are hints: a collector re-reads sysfs when one arrives and keeps polling on its
interval, because many changes (md arrays breaking, NVMe state, PCIe link retrains) send
no uevent, and inside containers udev sends nothing at all. pyudev always reads the real
/sys, so it is used for the event stream only, never for attributes.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)

#: Seconds a watcher blocks in one poll, which bounds how long `close` waits for it.
POLL_TIMEOUT_S = 0.25
#: Events a coalescing watcher takes behind one before it delivers (a re-read in a long storm).
MAX_COALESCED = 1000


@dataclass(frozen=True, slots=True)
class UdevEvent:
    """One uevent as rigmon uses it.

    Attributes:
        action: ``add``, ``remove``, ``change``, ``bind``, ``unbind``...
        subsystem: ``thunderbolt``, ``block``, ``nvme``, ``pci``...
        sys_name: last path element (``0-1``, ``nvme0n1``).
        devpath: the kernel object's path below /sys (``/devices/.../0-1``).
        device_type: DEVTYPE (``thunderbolt_device``, ``disk``), ``None`` when absent.
        properties: every key of the event as text.
    """

    action: str
    subsystem: str
    sys_name: str
    devpath: str
    device_type: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


class UdevSource(Protocol):
    """Where uevents come from: pyudev's monitor on a node, a fake in tests."""

    def poll(self, timeout_s: float) -> UdevEvent | None:
        """Wait up to ``timeout_s`` for the next event.

        Raises:
            OSError: ``ENOBUFS`` when events were lost (the caller re-scans).
        """
        ...

    def close(self) -> None:
        """Release the socket."""
        ...


class PyudevSource:
    """Events from the udev daemon through pyudev, filtered by subsystem.

    Args:
        subsystems: subsystems to receive (``thunderbolt``, ``block``...).

    Raises:
        ImportError: libudev is not installed (raised by ``pyudev.Context``).
        OSError: the netlink socket cannot be opened.
    """

    def __init__(self, subsystems: Iterable[str]) -> None:
        # Imported here so that importing rigmon.hw never loads libudev.
        import pyudev

        self._pyudev = pyudev
        self._monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source="udev")
        for subsystem in subsystems:
            self._monitor.filter_by(subsystem)
        # Subscribe before the collector's first scan, so no event falls between the two.
        self._monitor.start()

    def poll(self, timeout_s: float) -> UdevEvent | None:
        device = self._monitor.poll(timeout=timeout_s)
        if device is None:
            return None
        props = {str(k): str(device.properties.get(k, "")) for k in device.properties}
        return UdevEvent(
            action=str(device.action or "change"),
            subsystem=str(device.subsystem or ""),
            sys_name=str(device.sys_name),
            devpath=str(device.device_path),
            device_type=device.device_type,
            properties=props,
        )

    def close(self) -> None:
        # pyudev has no close; dropping the monitor closes its socket.
        self._monitor = None


def open_udev_source(subsystems: Iterable[str]) -> UdevSource | None:
    """A pyudev source, or ``None`` when this machine has no usable udev (containers, no libudev).

    Without ``/run/udev`` pyudev opens a monitor that never receives anything; that is
    harmless, so only a failure to build the monitor makes this return ``None``.
    """
    try:
        return PyudevSource(subsystems)
    except (ImportError, OSError) as exc:
        log.info("udev events unavailable (%s); polling only", exc)
        return None


class UdevWatcher:
    """A thread that reads a `UdevSource` and calls ``on_event`` for each event.

    ``on_event(None)`` means events may have been lost (``ENOBUFS``): re-scan everything.
    Exceptions from ``on_event`` are logged and the watcher goes on. Any other error of the
    source ends the thread quietly (polling keeps state right).

    Args:
        source: where events come from.
        on_event: called in the watcher thread.
        subsystems: only events of these subsystems are passed on (all when empty).
        name: thread name.
        wants: only events it accepts are passed on (all when ``None``).
        on_burst: instead of ``on_event``, for a handler that re-reads everything whatever the
            event: an event passed on first takes every event already queued behind it (up to
            `MAX_COALESCED`), and ``on_burst`` gets them together (those it wants, in order;
            ``None`` when events were lost meanwhile), so a burst (``udevadm trigger``, a
            container's loop devices coming and going) is one re-read that sees the state after
            all of them, not one re-read each. What no re-read can see (a device removed and
            added again within the burst) is in the events it gets.
    """

    def __init__(
        self,
        source: UdevSource,
        on_event: Callable[[UdevEvent | None], None] | None = None,
        subsystems: Iterable[str] = (),
        name: str = "rigmon-udev",
        wants: Callable[[UdevEvent], bool] | None = None,
        on_burst: Callable[[Sequence[UdevEvent] | None], None] | None = None,
    ) -> None:
        if (on_event is None) == (on_burst is None):
            raise ValueError("a udev watcher takes on_event or on_burst, one of them")
        self._source = source
        self._on_event = on_event
        self._on_burst = on_burst
        self._subsystems = frozenset(subsystems)
        self._wants = wants
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def close(self) -> None:
        """Stop the thread and release the source."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2 * POLL_TIMEOUT_S + 1.0)
        self._source.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                event = self._source.poll(POLL_TIMEOUT_S)
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    self._deliver(None)
                    continue
                log.info("udev source failed (%s); polling only", exc)
                return
            if event is None or self._stop.is_set() or not self._passes(event):
                continue
            if self._on_burst is not None:
                self._deliver(self._take_queued(event))
            else:
                self._deliver(event)

    def _passes(self, event: UdevEvent) -> bool:
        """Whether ``event`` is of the subsystems and kind this watcher passes on."""
        if self._subsystems and event.subsystem not in self._subsystems:
            return False
        return self._wants is None or self._wants(event)

    def _take_queued(self, first: UdevEvent) -> list[UdevEvent] | None:
        """``first`` and the events queued behind it that it passes on, or ``None`` when events were lost."""
        burst = [first]
        lost = False
        for _ in range(MAX_COALESCED):
            try:
                event = self._source.poll(0.0)
            except OSError as exc:
                if exc.errno != errno.ENOBUFS:
                    break  # the next poll meets it again and ends the thread
                lost = True
                continue
            if event is None:
                break
            if self._passes(event):
                burst.append(event)
        return None if lost else burst

    def _deliver(self, event: UdevEvent | Sequence[UdevEvent] | None) -> None:
        try:
            if self._on_burst is not None:
                self._on_burst(event)  # type: ignore[arg-type]
            elif self._on_event is not None:
                self._on_event(event)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - a failed re-read must not end the watcher
            log.exception("handling udev event %s", event[0] if isinstance(event, list) else event)
