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
    for a while (an hwmon input) keeps it. A device whose facts were read while something they
    need was missing (an hwmon input its driver creates a moment after the device, a controller's
    hwmon device not registered yet) is looked at again soon, backing off (`recheck`); one a tick
    found a file of gone (an hwmon input removed since its facts were read), at the next read
    (`reread`). Not thread-safe: callers hold their collector's lock.

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
        #: Devices whose facts `recheck` asked to read again: the read of the device set at which they are.
        self._due: dict[K, int] = {}
        #: Per device `recheck` was last called for: the reads it waited then (doubled at the next).
        self._delays: dict[K, int] = {}

    def begin(self, devices: Iterable[Hashable]) -> bool:
        """Start a read of the device set; drop every fact if it changed or is due.

        Args:
            devices: what identifies each device seen now: its name, or its name with what
                else tells a new device (an md array's geometry).

        Returns:
            Whether every fact held before was kept: the same devices as at the last `begin`,
            none due (nor any device's `recheck`), no `invalidate` since (`forget` is not seen here).
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
        return not self._due or self._recheck_due()

    def _recheck_due(self) -> bool:
        """Forget the devices whose `recheck` is due; whether there was none."""
        due = [device for device, at in self._due.items() if at <= self._reads]
        for device in due:
            del self._due[device]
            self.forget(device)
        return not due

    def _drop(self, devices: frozenset[Hashable] | None) -> None:
        self._before, self._facts = self._facts, {}
        self._devices = devices
        self._reads = 1
        # Every fact is read again: a read that still finds something missing asks again.
        self._due.clear()
        if devices is not None and self._delays:
            self._delays = {device: delay for device, delay in self._delays.items() if device in devices}

    def get(self, device: K, read: Callable[[K], V]) -> V:
        """The facts of ``device``, read with ``read(device)`` when not known."""
        try:
            return self._facts[device]
        except KeyError:
            pass
        self._due.pop(device, None)
        facts = self._facts[device] = read(device)
        if self._delays and device not in self._due:
            # Read without anything missing: the next `recheck` starts again from one read.
            self._delays.pop(device, None)
        return facts

    def recheck(self, device: K) -> None:
        """Read ``device``'s facts again soon: its read found something they need missing (an
        hwmon input a driver creates a moment after its device appears, one it hides).

        Called by the read of the facts. The first time after one read of the device set, then
        after twice as many reads as the time before, up to ``refresh_every``: what comes a
        moment late is found the next tick, and what never comes costs a look now and then, not
        one every tick. A read of the device's facts that does not call it ends the backing off.
        """
        delay = min(2 * self._delays.get(device, 0) or 1, self.refresh_every)
        self._delays[device] = delay
        self._due[device] = self._reads + delay

    def reread(self, device: K) -> None:
        """Read ``device``'s facts again at the next read of the device set (`begin` says so): a
        tick's read found a file they planned to read gone (an hwmon input a driver removed since,
        `HostRoot.read_present`). Called outside the read of the facts; the read that follows finds
        what is missing now and backs off from there (`recheck`), so a vanished input is opened
        once, not every tick until the next refresh."""
        self._due[device] = self._reads + 1

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
        self._due.clear()
