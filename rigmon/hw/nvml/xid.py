"""Xid critical error events: one NVML event set per binding, waited on by the caller's thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pynvml

from rigmon.hw.nvml.calls import ABSENT_CODES, GPU_IS_LOST, Gate, handle_key
from rigmon.hw.nvml.records import NvmlXid
from rigmon.hw.nvml.watchdog import NvmlUnavailable, reset_target, set_target

#: Xid critical error event type bit.
EVENT_XID = 0x8


class XidEvents:
    """The event set of one binding and the waits on it.

    The wait runs on the calling thread (the GPU collector's Xid thread, which does nothing
    else), not behind the poll watchdog: a hand-off to another thread and back twice a second was
    most of what the event thread cost, and a wait stuck in the driver blocks only that thread,
    which nothing waits for (`close` leaves the event set alone while a wait is in progress).

    A GPU that fell off the bus makes every wait on a set it is registered to answer GPU_IS_LOST
    (NVML: "if a GPU has fallen off the bus or is otherwise inaccessible"), for as long as it stays
    lost: the set is registered again at once without it (a lost GPU gives no handle, nor a
    registration), so the other GPUs' Xids keep coming; it joins again when it answers again
    (`rearm`). Only when registering again leaves no GPU out (a driver that answers so while any
    GPU is lost, registered or not) does the wait raise it, for the caller to retry later.

    Args:
        target: the binding's target (see `rigmon.hw.nvml`).
        ensure_init: the binding's lazy ``nvmlInit``.
    """

    def __init__(self, target: str | None, ensure_init: Callable[[], None]) -> None:
        self.target = target
        self._ensure_init = ensure_init
        #: Xid waits in progress, and whether `close` has run.
        self._waiting = 0
        self._closed = False
        self._lock = threading.Lock()
        self._event_set: Any = None
        self._event_handles: dict[int, tuple[int, str | None, str | None]] = {}
        #: The event set is to be registered again before the next wait (`rearm`).
        self._stale = False

    def wait(self, timeout_s: float) -> list[NvmlXid]:
        """Block up to ``timeout_s`` for Xid events (see `rigmon.hw.nvml.Nvml.wait_xid`)."""
        wait_ms = max(1, int(timeout_s * 1000))
        with self._lock:
            if self._closed:
                return []
            self._waiting += 1
        token = set_target(self.target)
        try:
            return self._wait(wait_ms)
        finally:
            reset_target(token)
            with self._lock:
                self._waiting -= 1

    def rearm(self) -> None:
        """Register the event set again before the next wait: a GPU came back (a reset or a PCI
        rescan drops the driver's registrations for it, so its Xids would never reach the old set),
        or one was not there (no handle) when the set was registered."""
        with self._lock:
            self._stale = True

    @property
    def waiting(self) -> int:
        """Waits in progress."""
        with self._lock:
            return self._waiting

    def _register(self) -> None:
        self._ensure_init()
        event_set = pynvml.nvmlEventSetCreate()
        handles: dict[int, tuple[int, str | None, str | None]] = {}
        for index in range(int(pynvml.nvmlDeviceGetCount())):
            gate = Gate()
            handle = gate.get(pynvml.nvmlDeviceGetHandleByIndex, index)
            if handle is None:
                continue
            supported = gate.get(pynvml.nvmlDeviceGetSupportedEventTypes, handle)
            if not supported or not supported & EVENT_XID:
                continue
            # NOT_SUPPORTED from registration leaves the set usable for the other GPUs.
            gate.get(pynvml.nvmlDeviceRegisterEvents, handle, EVENT_XID, event_set)
            if gate.lost:
                continue  # fell off the bus meanwhile: not in the set
            pci = gate.get(pynvml.nvmlDeviceGetPciInfo, handle)
            handles[handle_key(handle)] = (
                index, gate.get(pynvml.nvmlDeviceGetUUID, handle), None if pci is None else str(pci.busId)
            )
        if not handles:
            pynvml.nvmlEventSetFree(event_set)
            raise NvmlUnavailable("no GPU supports Xid events")
        self._event_set = event_set
        self._event_handles = handles

    def _wait(self, wait_ms: int) -> list[NvmlXid]:
        try:
            with self._lock:
                stale, self._stale = self._stale, False
            if stale and self._event_set is not None:
                self._register_again()
            if self._event_set is None:
                self._register()
            data = pynvml.nvmlEventSetWait_v2(self._event_set, wait_ms)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_TIMEOUT:
                return []
            if exc.value in ABSENT_CODES or exc.value == pynvml.NVML_ERROR_NOT_SUPPORTED:
                raise NvmlUnavailable(f"NVML events: {exc}") from None
            if exc.value == GPU_IS_LOST and self._event_set is not None and self._left_lost_gpus_out():
                # Waits on the old set answered GPU_IS_LOST at once, retried every few seconds, and
                # the other GPUs' Xids waited as long.
                return []
            raise
        if not data.eventType & EVENT_XID:
            return []
        index, uuid, bus_id = self._event_handles.get(handle_key(data.device), (None, None, None))
        return [NvmlXid(index=index, uuid=uuid, pci_bus_id=bus_id, xid=int(data.eventData))]

    def _left_lost_gpus_out(self) -> bool:
        """The set answered GPU_IS_LOST: register a new one for the GPUs that answer now; whether
        that left any GPU of the old set out (else the driver answers so for the new one too)."""
        before = {index for index, _, _ in self._event_handles.values()}
        self._register_again()
        return not before <= {index for index, _, _ in self._event_handles.values()}

    def _register_again(self) -> None:
        """Register a new event set for the GPUs that answer now, then free the old one."""
        old, self._event_set = self._event_set, None
        try:
            self._register()
        finally:
            # Freed after the new set is registered: no gap for the GPUs that stayed.
            try:
                pynvml.nvmlEventSetFree(old)
            except pynvml.NVMLError:
                pass

    def close(self) -> None:
        """No more waits; free the event set unless a wait is still in progress (stuck in the driver),
        which keeps it, as a stuck call keeps its thread."""
        with self._lock:
            self._closed = True
            waiting = self._waiting
        if waiting or self._event_set is None:
            return
        event_set, self._event_set = self._event_set, None
        token = set_target(self.target)
        try:
            pynvml.nvmlEventSetFree(event_set)
        except pynvml.NVMLError:
            pass
        finally:
            reset_target(token)
