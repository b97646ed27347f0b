"""FakeUdevSource: a scripted uevent stream for tests and the simulator (a real monitor cannot be fed)."""

from __future__ import annotations

import errno
import queue
import time

from rigmon.hw.udev import UdevEvent

#: Placed in the queue to make the next poll raise ENOBUFS, as an overflowed socket does.
_OVERFLOW = object()


class FakeUdevSource:
    """A `rigmon.hw.udev.UdevSource` fed by `inject`.

    Change the fake sysfs tree first, then inject the event that announces it, as the
    kernel does.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[object] = queue.Queue()
        self._seq = 1000
        self.closed = False

    def inject(self, action: str, devpath: str, subsystem: str, device_type: str | None = None,
               **env: str) -> UdevEvent:
        """Queue one event; ``DEVNAME`` becomes absolute as libudev makes it."""
        self._seq += 1
        if "DEVNAME" in env and not env["DEVNAME"].startswith("/"):
            env["DEVNAME"] = "/dev/" + env["DEVNAME"]
        props = {"ACTION": action, "DEVPATH": devpath, "SUBSYSTEM": subsystem, **env, "SEQNUM": str(self._seq)}
        if device_type is not None:
            props["DEVTYPE"] = device_type
        event = UdevEvent(action=action, subsystem=subsystem, sys_name=devpath.rsplit("/", 1)[-1],
                          devpath=devpath, device_type=device_type, properties=props)
        self._queue.put(event)
        return event

    def overflow(self) -> None:
        """Make the next poll fail with ENOBUFS (events lost)."""
        self._queue.put(_OVERFLOW)

    def poll(self, timeout_s: float) -> UdevEvent | None:
        try:
            item = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if item is _OVERFLOW:
            raise OSError(errno.ENOBUFS, "No buffer space available")
        assert isinstance(item, UdevEvent)
        return item

    def close(self) -> None:
        self.closed = True


class SilentUdevSource:
    """A source that never delivers anything: a container without udevd."""

    def poll(self, timeout_s: float) -> UdevEvent | None:
        time.sleep(min(timeout_s, 0.05))
        return None

    def close(self) -> None:
        """Nothing to release."""
