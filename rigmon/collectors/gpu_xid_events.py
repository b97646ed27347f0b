"""XidEvents: the GPU collector's NVML Xid event thread, the watchdog of its wait, and Xid 79 as a lost-GPU signal."""

from __future__ import annotations

import logging
import threading
import time

from rigmon.collectors.base import EventDraft, PushFn
from rigmon.collectors.kernel_log import XID_INFO, parse_pci_bus_id
from rigmon.hw.nvml import Nvml, NvmlHung, NvmlUnavailable, NvmlXid

log = logging.getLogger(__name__)

#: The Xid that means the GPU fell off the bus.
XID_FALLEN_OFF_BUS = 79
#: Seconds the Xid thread waits before retrying when NVML is absent or hung.
EVENT_RETRY_S = 5.0


class XidEvents:
    """The thread that waits on NVML's event set for Xid critical errors; a part of `GpuCollector`.

    Each Xid is pushed as an ``xid`` event at once; an Xid 79 is also kept as the GPU's
    lost signal (`lost_signal`), which the collector's next poll reads.

    Args:
        nvml: the NVML binding the collector reads through.
        event_wait_s: one NVML event wait, in seconds.
        hung_after_s: seconds an event wait may overrun ``event_wait_s`` before it counts as stuck
            in the driver (the NVML watchdog timeout).
    """

    def __init__(self, nvml: Nvml, event_wait_s: float, hung_after_s: float) -> None:
        self.nvml = nvml
        self.event_wait_s = event_wait_s
        self.hung_after_s = hung_after_s
        #: When the Xid thread's wait in progress began (``time.monotonic``), ``None`` between waits;
        #: and when the wait reported stuck began (``None``: none is). The watchdog of the Xid wait
        #: is a deadline the poll checks, not a hand-off to another thread (see `watch`).
        self._wait_began: float | None = None
        self._wait_stuck: float | None = None
        #: When the first poll read NVML (``time.monotonic``): a wait is timed from then at the
        #: earliest, as before it the first wait may be waiting for a slow ``nvmlInit`` (the polls
        #: said "starting"), not stuck in the driver.
        self._answered_at: float | None = None
        #: Why the Xid thread's last wait failed (``None`` once one answers), and the failure last
        #: said by an event (`watch`).
        self._failure: str | None = None
        self._failure_said: str | None = None
        self._lock = threading.Lock()
        self._lost: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, push: PushFn) -> None:
        """Start the thread that waits on NVML's event set; it pushes each batch of Xid events."""
        self._thread = threading.Thread(target=self._run, args=(push,), name="rigmon-gpu-xid", daemon=True)
        self._thread.start()

    def lost_signal(self, index: int) -> str | None:
        """Why NVML's events say GPU ``index`` is lost (an Xid 79 event), ``None`` when they do not."""
        with self._lock:
            return self._lost.get(index)

    def forget_lost(self, index: int) -> None:
        """GPU ``index`` is back (reset): its Xid 79 event no longer says it is lost."""
        with self._lock:
            self._lost.pop(index, None)

    def note(self) -> str | None:
        """Why Xid events are not coming through NVML now (the wait fails or is stuck in the driver),
        for the collector's status: its readings are fine, but an "ok" alone would hide this.
        ``None`` while the waits answer."""
        failure = self._failure
        if failure is not None:
            return (f"NVML Xid events not received: waiting failed: {failure} (retried every {EVENT_RETRY_S:g} s); "
                    "Xid errors come from the kernel log only")
        if self._wait_stuck is not None:
            return "NVML Xid events not received: the event wait is stuck in the driver; " \
                   "Xid errors come from the kernel log only"
        return None

    def watch(self) -> list[object]:
        """The Xid wait's watchdog, checked on every poll: one warning event when a wait has overrun
        its timeout by `hung_after_s` (stuck in the driver: Xid errors then come only from the kernel
        log), one info event when it returns; the same when waits start to fail and answer again
        (`failures`).

        The wait itself runs on the Xid thread, not behind the poll's watchdog: a hand-off to
        another thread and back twice a second was most of what that thread cost, and a wait
        stuck in the driver holds only its own thread (`stop` joins it with a timeout and
        leaves its event set alone). A hang in the driver that the reads share is seen by the
        poll's watchdog first (the collector shows `hung`).
        """
        out = self._failures()
        began = self._wait_began
        now_s = time.monotonic()
        if self._answered_at is None:
            self._answered_at = now_s
        overrun_s = 0.0 if began is None else now_s - max(began, self._answered_at) - self.event_wait_s
        if overrun_s > self.hung_after_s and self._wait_stuck is None:
            self._wait_stuck = began
            return [*out, EventDraft(kind="nvml_events_hung", severity="warning", subject="gpu:events",
                               message=f"NVML Xid event wait has not returned for {overrun_s + self.event_wait_s:.1f} s "
                                       "(stuck in the driver): Xid errors come from the kernel log only",
                               data={"source": "nvml", "waited_s": round(overrun_s + self.event_wait_s, 3)})]
        if self._wait_stuck is not None and began != self._wait_stuck:
            # The stuck wait returned (the thread is between waits, or in a new one).
            self._wait_stuck = None
            return [*out, EventDraft(kind="nvml_events_resumed", severity="info", subject="gpu:events",
                                     message="NVML Xid event wait returned: Xid events from NVML again",
                                     data={"source": "nvml"})]
        return out

    def _failures(self) -> list[object]:
        """One warning event when the Xid waits start to fail (or fail another way), one info event
        when one answers again."""
        failure = self._failure
        if failure == self._failure_said:
            return []
        self._failure_said = failure
        if failure is None:
            return [EventDraft(kind="nvml_events_resumed", severity="info", subject="gpu:events",
                               message="NVML Xid event wait answers again: Xid events from NVML again",
                               data={"source": "nvml"})]
        return [EventDraft(kind="nvml_events_failed", severity="warning", subject="gpu:events",
                           message=f"NVML Xid event wait fails ({failure}): Xid errors come from the kernel log only",
                           data={"source": "nvml", "error": failure})]

    def stop(self) -> None:
        """Stop the thread: a wait stuck in the driver is waited for ``event_wait_s`` + 2 s, then left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.event_wait_s + 2)

    def _run(self, push: PushFn) -> None:
        failed: str | None = None
        while not self._stop.is_set():
            try:
                self._wait_began = time.monotonic()
                try:
                    hits = self.nvml.wait_xid(self.event_wait_s)
                finally:
                    self._wait_began = None
            except (NvmlUnavailable, NvmlHung):
                self._stop.wait(EVENT_RETRY_S)
                continue
            except Exception as exc:  # noqa: BLE001 - the event thread must survive driver surprises
                # Logged once until a wait answers again: a lost GPU registered to the event set
                # makes every wait answer GPU_IS_LOST, for as long as it stays lost.
                failure = f"{type(exc).__name__}: {exc}"
                self._failure = failure
                if failure != failed:
                    # The traceback only when debugging: GPU_IS_LOST is the driver's state, not a bug.
                    log.warning("waiting for NVML events failed: %s (retried every %g s, not logged again "
                                "while it fails the same way)", failure, EVENT_RETRY_S,
                                exc_info=log.isEnabledFor(logging.DEBUG))
                    failed = failure
                self._stop.wait(EVENT_RETRY_S)
                continue
            self._failure = None
            if failed is not None:
                log.warning("waiting for NVML events works again")
                failed = None
            if hits:
                push([self._event(hit) for hit in hits])

    def _event(self, hit: NvmlXid) -> EventDraft:
        ids = None if hit.pci_bus_id is None else parse_pci_bus_id(hit.pci_bus_id)
        name, severity = XID_INFO.get(hit.xid, ("Xid", "warning"))
        if hit.xid == XID_FALLEN_OFF_BUS and hit.index is not None:
            with self._lock:
                self._lost.setdefault(hit.index, "NVML: Xid 79 event")
        subject = f"gpu:{hit.index}" if hit.index is not None else "gpu:unknown"
        where = f" ({ids.sysfs})" if ids is not None else ""
        return EventDraft(
            kind="xid",
            severity=severity,
            subject=subject,
            message=f"Xid {hit.xid} on {'an unknown GPU' if hit.index is None else f'GPU {hit.index}'}{where}: {name}",
            data={
                "source": "nvml", "xid": hit.xid, "gpu_index": hit.index, "uuid": hit.uuid,
                "pci_bus_id": None if ids is None else ids.sysfs,
                "pci_bus_id_nvml": None if ids is None else ids.nvml,
                "pci_bus_id_xid": None if ids is None else ids.xid,
            },
        )
