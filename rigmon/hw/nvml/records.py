"""What NVML reads return (frozen records of raw NVML values) and the seams collectors depend on.

The records are frozen msgspec Structs, as the wire records are (`rigmon.schema.Record`): an
8-GPU poll builds one `NvmlDeviceData` per GPU every second, and a Struct is built without an
``object.__setattr__`` per field. ``gc=False`` is safe for the same reason: they hold numbers,
strings and tuples of other records, never anything that could lead back to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import msgspec


class NvLinkData(msgspec.Struct, frozen=True, gc=False):
    """Raw NVLink values of one link (counters since driver load)."""

    link: int
    active: bool | None
    replay: int | None
    recovery: int | None
    crc_flit: int | None
    crc_data: int | None


class NvmlDeviceData(msgspec.Struct, frozen=True, gc=False):
    """Raw values of one GPU, NVML units (mW, mJ, MHz, ns, bytes); ``None`` when not given.

    ``lost`` is true when any call answered GPU_IS_LOST. ``power_samples_us`` and
    ``power_samples_mw`` are the driver's power samples newer than the timestamp asked for,
    oldest first: their timestamps (us) and values (mW), side by side (two tuples of integers
    rather than a pair per sample: a poll of 8 GPUs made some 160 short-lived tuples a second).
    ``power_sampled`` is false when the driver gave no answer about its sample buffer (refused it,
    or the call failed): no samples then says nothing, unlike "none since the last poll".
    """

    index: int
    lost: bool
    uuid: str | None = None
    name: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    power_mw: int | None = None
    power_samples_us: tuple[int, ...] = ()
    power_samples_mw: tuple[int, ...] = ()
    power_sampled: bool = True
    power_instant_mw: int | None = None
    energy_mj: int | None = None
    power_limit_mw: int | None = None
    enforced_limit_mw: int | None = None
    default_limit_mw: int | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    clock_graphics_mhz: int | None = None
    app_clock_graphics_mhz: int | None = None
    app_clock_mem_mhz: int | None = None
    max_clock_sm_mhz: int | None = None
    max_clock_mem_mhz: int | None = None
    max_clock_graphics_mhz: int | None = None
    clock_reasons: int | None = None
    violation_power_ns: int | None = None
    violation_thermal_ns: int | None = None
    temp_c: int | None = None
    fan_pct: int | None = None
    util_gpu_pct: int | None = None
    util_mem_pct: int | None = None
    mem_total_bytes: int | None = None
    mem_used_bytes: int | None = None
    pstate: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_replay: int | None = None
    nvlinks: tuple[NvLinkData, ...] = ()
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None


class NvmlXid(msgspec.Struct, frozen=True, gc=False):
    """An Xid critical error event: the GPU's index and identity, and the Xid number."""

    index: int | None
    uuid: str | None
    pci_bus_id: str | None
    xid: int


class NvmlProcess(msgspec.Struct, frozen=True, gc=False):
    """A process NVML lists on a GPU: host PID, used GPU memory (``None`` when the driver
    does not say) and the list it came from (``compute`` or ``graphics``)."""

    pid: int
    used_bytes: int | None
    kind: str


class NvmlProcessUtil(msgspec.Struct, frozen=True, gc=False):
    """One per-process utilisation sample: ``timestamp_us`` and SM / memory percent."""

    pid: int
    timestamp_us: int
    sm_pct: int | None
    mem_pct: int | None


class NvmlGpuProcesses(msgspec.Struct, frozen=True, gc=False):
    """The processes of one GPU. ``lost`` when the GPU answered GPU_IS_LOST; ``listed`` is
    false when neither process list could be read (the processes are then unknown, not none);
    ``utils`` are the driver's per-process samples newer than the timestamp asked for."""

    index: int
    uuid: str | None
    lost: bool
    listed: bool
    processes: tuple[NvmlProcess, ...] = ()
    utils: tuple[NvmlProcessUtil, ...] = ()


class Nvml(Protocol):
    """The NVML seam the GPU collector depends on."""

    def device_count(self) -> int:
        """Number of GPUs NVML enumerates.

        Raises:
            NvmlUnavailable: no driver or library.
            NvmlHung: the call did not return in time.
        """
        ...

    def read_device(self, index: int, samples_since_us: int) -> NvmlDeviceData:
        """Every reading of GPU ``index``; power samples newer than ``samples_since_us``.

        Raises:
            NvmlUnavailable: no driver or library.
            NvmlHung: the calls did not return in time.
        """
        ...

    def read_devices(self, samples_since_us: Mapping[int, int]) -> list[NvmlDeviceData]:
        """Every GPU's readings in one hand-off: the device count, then `read_device` for each index.

        Args:
            samples_since_us: per GPU index, the newest power sample timestamp already seen
                (missing: 0, every buffered sample).

        Raises:
            NvmlUnavailable: no driver or library.
            NvmlHung: the calls did not return in time.
        """
        ...

    def wait_xid(self, timeout_s: float) -> list[NvmlXid]:
        """Block the calling thread up to ``timeout_s`` for Xid critical error events; empty on timeout.

        A wait stuck in the driver blocks its caller for longer: call it from a thread of its own.

        Raises:
            NvmlUnavailable: no driver, or events are not supported.
            NvmlHung: (other bindings) the wait overran its timeout.
        """
        ...

    def close(self) -> None:
        """Free the event set and shut NVML down (skipped when a call is stuck)."""
        ...


class NvmlProcesses(Protocol):
    """The NVML seam of the GPU processes collector."""

    def device_count(self) -> int:
        """Number of GPUs NVML enumerates (see `Nvml.device_count`)."""
        ...

    def read_processes(self, index: int, utils_since_us: int) -> NvmlGpuProcesses:
        """Running compute and graphics processes of GPU ``index``, with utilisation samples.

        Raises:
            NvmlUnavailable: no driver or library.
            NvmlHung: the calls did not return in time.
        """
        ...

    def read_all_processes(self, utils_since_us: Mapping[int, int]) -> list[NvmlGpuProcesses]:
        """Every GPU's processes in one hand-off: the device count, then `read_processes` for each index.

        Args:
            utils_since_us: per GPU index, the newest utilisation sample already seen (missing: 0).

        Raises:
            NvmlUnavailable: no driver or library.
            NvmlHung: the calls did not return in time.
        """
        ...

    def close(self) -> None:
        """Shut NVML down."""
        ...
