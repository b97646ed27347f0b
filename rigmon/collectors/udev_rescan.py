"""UdevRescan: re-run a collector's scan from a udev watcher thread and push the result at once."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from rigmon.collectors.base import NoData, PushFn
from rigmon.hw.udev import UdevEvent, UdevSource, UdevWatcher


class UdevRescan:
    """The pushed half of a polled collector: an event (or lost events) triggers ``scan``.

    Polling stays the ground truth; with no source (no udev on this machine) this does
    nothing at all.

    Args:
        source: where events come from, or ``None``.
        subsystems: event subsystems that concern the collector.
        scan: the collector's full read (the same as ``collect``), thread-safe, given the burst's events (none
            when events were lost: everything is read again then too).
        name: thread name.
        wants: the events that concern the collector within those subsystems (all when ``None``).

    A burst of events is one scan (`UdevWatcher`'s ``coalesce``): the scan reads everything,
    so one after the burst sees what each would have, and one pushed frame stands for it
    (before, a ``udevadm trigger`` published a frame per block device, pushing the seconds
    before it out of the agent's ring buffer).
    """

    def __init__(self, source: UdevSource | None, subsystems: Iterable[str],
                 scan: Callable[[Sequence[UdevEvent]], Sequence[object]], name: str,
                 wants: Callable[[UdevEvent], bool] | None = None) -> None:
        self._source = source
        self._subsystems = tuple(subsystems)
        self._wants = wants
        self._scan = scan
        self._name = name
        self._push: PushFn | None = None
        self._watcher: UdevWatcher | None = None

    def start(self, push: PushFn) -> None:
        """Start watching (no-op without a source)."""
        if self._source is None or self._watcher is not None:
            return
        self._push = push
        self._watcher = UdevWatcher(self._source, None, self._subsystems, self._name, wants=self._wants,
                                    on_burst=self._on_burst)
        self._watcher.start()

    def close(self) -> None:
        """Stop watching."""
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
        elif self._source is not None:
            self._source.close()

    def _on_burst(self, events: Sequence[UdevEvent] | None) -> None:
        try:
            records = self._scan(events or ())
        except NoData:
            records = []
        if self._push is not None:
            self._push(records)
