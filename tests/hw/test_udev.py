"""udev seam: the watcher thread, lost events, filtering, and a machine without udev."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from rigmon.hw.udev import UdevEvent, UdevWatcher, open_udev_source
from rigmon.sim.udev import FakeUdevSource


def test_watcher_passes_matching_events_and_reports_loss() -> None:
    source = FakeUdevSource()
    seen: list[UdevEvent | None] = []
    done = threading.Event()

    def on_event(event: UdevEvent | None) -> None:
        seen.append(event)
        if len(seen) == 2:
            done.set()

    watcher = UdevWatcher(source, on_event, subsystems=("nvme",))
    watcher.start()
    try:
        source.inject("add", "/devices/pci0000:00/0000:00:04.1/0000:64:00.0/block/sda", "block", "disk")
        source.inject("add", "/devices/pci0000:00/0000:00:04.1/0000:64:00.0/nvme/nvme0", "nvme",
                      DEVNAME="nvme0", NVME_TRTYPE="pcie")
        source.overflow()
        assert done.wait(5.0)
    finally:
        watcher.close()
    first = seen[0]
    assert first is not None and (first.action, first.sys_name) == ("add", "nvme0")
    assert first.properties["DEVNAME"] == "/dev/nvme0"
    assert seen[1] is None
    assert source.closed


def test_a_failing_handler_does_not_stop_the_watcher() -> None:
    source = FakeUdevSource()
    calls: list[str] = []
    done = threading.Event()

    def on_event(event: UdevEvent | None) -> None:
        assert event is not None
        calls.append(event.sys_name)
        if len(calls) == 2:
            done.set()
        raise RuntimeError("re-read failed")

    watcher = UdevWatcher(source, on_event)
    watcher.start()
    try:
        source.inject("change", "/devices/x/0-1", "thunderbolt")
        source.inject("change", "/devices/x/0-3", "thunderbolt")
        assert done.wait(5.0)
    finally:
        watcher.close()
    assert calls == ["0-1", "0-3"]


def test_open_source_never_raises() -> None:
    source = open_udev_source(("thunderbolt",))
    if source is not None:
        # Inside a container without udevd the monitor opens and stays silent.
        source.close()


def deliveries(source: FakeUdevSource, **kwargs: object) -> list[list[UdevEvent] | None]:
    """What a coalescing watcher started on ``source``'s queued events delivers (its first delivery)."""
    seen: list[list[UdevEvent] | None] = []
    done = threading.Event()

    def on_burst(events: Sequence[UdevEvent] | None) -> None:
        seen.append(None if events is None else list(events))
        done.set()

    watcher = UdevWatcher(source, None, ("block",), on_burst=on_burst, **kwargs)  # type: ignore[arg-type]
    watcher.start()
    try:
        assert done.wait(5.0)
        time.sleep(0.3)  # a second delivery would come within a poll
    finally:
        watcher.close()
    return seen


def test_a_coalescing_watcher_delivers_a_burst_once_after_taking_it() -> None:
    """``udevadm trigger``: hundreds of events queued at once are one re-read, not one each, and
    events it does not want are skipped."""
    source = FakeUdevSource()
    for i in range(300):
        source.inject("change", f"/devices/virtual/block/loop{i}", "block", "disk")
    source.inject("change", "/devices/virtual/block/md127", "block", "disk")
    for i in range(200):
        source.inject("change", f"/devices/pci0000:00/0000:00:17.0/ata{i}/block/sd{i}", "block", "disk")
    seen = deliveries(source, wants=lambda e: not e.sys_name.startswith("loop"))
    assert len(seen) == 1 and seen[0] is not None
    assert [e.sys_name for e in seen[0]] == ["md127"] + [f"sd{i}" for i in range(200)]


def test_a_burst_keeps_a_remove_and_the_add_behind_it() -> None:
    # A device removed and added again while the handler read: one re-read sees it present, as if nothing
    # happened; the burst it is given says it went away (a USB4 link that flaps, incident 5).
    source = FakeUdevSource()
    source.inject("remove", "/devices/virtual/block/md127", "block", "disk")
    source.inject("add", "/devices/virtual/block/md127", "block", "disk")
    (burst,) = deliveries(source)
    assert burst is not None and [(e.action, e.sys_name) for e in burst] == [("remove", "md127"), ("add", "md127")]


def test_a_burst_holding_a_loss_is_delivered_as_a_loss() -> None:
    source = FakeUdevSource()
    source.inject("change", "/devices/virtual/block/md126", "block", "disk")
    source.overflow()
    source.inject("change", "/devices/virtual/block/md125", "block", "disk")
    assert deliveries(source) == [None]
