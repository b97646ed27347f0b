"""DeviceFacts: what a collector reads once per device (model, serial, maximum link, labels) instead of every tick."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Reads of the device set after which every fact is read again, whatever happened (ground truth
#: for a change nothing announced: a drive swapped under the same name between two reads).
REFRESH_EVERY = 60


class DeviceFacts(Generic[K, V]):
    """Facts about devices that do not change while the device stays plugged in.

    A collector calls `begin` with the devices it sees on every read, then `get` for each.
    Every fact is read again when the set of devices changes (a device appeared or
    disappeared), after ``refresh_every`` reads, and after `invalidate` (a udev event);
    one device's facts are read again after `forget` (its state changed: a controller
    reset can bring new firmware). What a device's facts were before they were dropped stays
    at hand (`previous`) while they are read again: a collector whose device may hide a file
    for a while (an hwmon input) keeps it. Not thread-safe: callers hold their collector's lock.

    Args:
        refresh_every: reads of the device set between two full re-reads.
    """

    def __init__(self, refresh_every: int = REFRESH_EVERY) -> None:
        self.refresh_every = refresh_every
        self._facts: dict[K, V] = {}
        #: The facts each device had before they were last dropped (see `previous`).
        self._before: dict[K, V] = {}
        self._devices: frozenset[Hashable] | None = None
        #: The devices as the last `begin` was given them, in its order (a sorted listing is
        #: given the same order every tick: comparing it is cheaper than building the set).
        self._listed: tuple[Hashable, ...] | None = None
        self._reads = 0

    def begin(self, devices: Iterable[Hashable]) -> bool:
        """Start a read of the device set; drop every fact if it changed or is due.

        Args:
            devices: what identifies each device seen now: its name, or its name with what
                else tells a new device (an md array's geometry).

        Returns:
            Whether every fact held before was kept: the same devices as at the last `begin`,
            none due, no `invalidate` since (`forget` is not seen here).
        """
        listed = tuple(devices)
        self._reads += 1
        if listed != self._listed:
            self._listed = listed
            now = frozenset(listed)
            if now != self._devices:
                self._drop(now)
                return False
        if self._reads > self.refresh_every:
            self._drop(self._devices)
            return False
        return True

    def _drop(self, devices: frozenset[Hashable] | None) -> None:
        self._before, self._facts = self._facts, {}
        self._devices = devices
        self._reads = 1

    def get(self, device: K, read: Callable[[K], V]) -> V:
        """The facts of ``device``, read with ``read(device)`` when not known."""
        try:
            return self._facts[device]
        except KeyError:
            facts = self._facts[device] = read(device)
            return facts

    def known(self, device: K) -> bool:
        """Whether ``device``'s facts are held (`get` will not read them)."""
        return device in self._facts

    def previous(self, device: K) -> V | None:
        """The facts ``device`` had before they were last dropped (by `begin`, `forget` or
        `invalidate`), for the read that replaces them; ``None`` when it had none then (a device
        that was not there: give it an identity that tells a new device, see `begin`)."""
        return self._before.get(device)

    def forget(self, device: K) -> None:
        """Read ``device``'s facts again at its next `get`."""
        if (facts := self._facts.pop(device, None)) is not None:
            self._before[device] = facts

    def invalidate(self) -> None:
        """Read every fact again at the next read (a udev event said something changed)."""
        self._before, self._facts = self._facts, {}
        self._devices = None
        self._listed = None
