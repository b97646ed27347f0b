"""Wire records of GPUs: NVIDIA through NVML (collectors/gpu.py), AMD through amdgpu sysfs
(collectors/amd_gpu.py), and the kernel log (collectors/kernel_log.py)."""

from __future__ import annotations

from typing import Literal

from rigmon.schema.record import Record

GpuState = Literal["ok", "lost"]
ClockReason = Literal[
    "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
    "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting",
    "board_limit", "reliability", "other",
]


class NvLinkReading(Record, frozen=True):
    """One NVLink of a GPU: state and the driver's error counters since driver load.

    ``*_per_s`` are rates of the matching counters between two polls (``None`` on the
    first poll or after a reset).
    """

    link: int
    active: bool | None
    replay_total: int | None
    recovery_total: int | None
    crc_flit_total: int | None
    crc_data_total: int | None
    replay_per_s: float | None = None
    crc_flit_per_s: float | None = None


class GpuReading(Record, frozen=True):
    """One NVIDIA GPU as NVML (and sysfs, and the kernel log) see it.

    ``pci_bus_id`` is the sysfs spelling (``0000:1a:00.0``), ``pci_bus_id_nvml`` NVML's
    (``00000000:1A:00.0``) and ``pci_bus_id_xid`` the kernel's Xid spelling
    (``0000:1a:00``). ``state`` is ``lost`` once any signal said the GPU fell off the bus
    (NVML GPU_IS_LOST, a shrinking device count or PCI list, Xid 79 in the kernel log);
    a lost GPU stays listed with its identity, ``lost_at`` (Unix seconds) and
    ``lost_reason``, and every reading ``None``.

    Power: ``power_w`` is NVML's power reading (instantaneous on V100, a 1 s average on
    newer parts); ``power_peak_w``/``power_min_w`` come from the driver's power sample
    buffer between this poll and the previous one (``power_samples`` of them; ``None``, not 0,
    when the driver refuses the buffer or its call failed);
    ``power_instant_w`` is the instantaneous power field where the driver has it.
    ``clock_reasons`` are the decoded clock event (throttle) reasons (``other`` for bits rigmon
    does not know, such as one a newer driver added), ``clock_reasons_raw`` NVML's mask they were
    decoded from as nvidia-smi prints it (``0x0000000000001004``: text, so no history series or
    gauge averages a bitmask), so such a bit can be looked up (``nvmlClocksEventReason*``); the violation
    counters are seconds spent capped by power or thermal policy since driver load.
    """

    index: int
    uuid: str | None
    name: str | None
    serial: str | None
    pci_bus_id: str | None
    pci_bus_id_nvml: str | None
    pci_bus_id_xid: str | None
    state: GpuState = "ok"
    lost_at: float | None = None
    lost_reason: str | None = None
    power_w: float | None = None
    power_peak_w: float | None = None
    power_min_w: float | None = None
    power_samples: int | None = None
    power_instant_w: float | None = None
    energy_j_total: float | None = None
    power_limit_w: float | None = None
    power_limit_enforced_w: float | None = None
    power_limit_default_w: float | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    clock_graphics_mhz: int | None = None
    clock_app_graphics_mhz: int | None = None
    clock_app_mem_mhz: int | None = None
    clock_max_sm_mhz: int | None = None
    clock_max_mem_mhz: int | None = None
    clock_max_graphics_mhz: int | None = None
    clock_reasons: tuple[ClockReason, ...] | None = None
    clock_reasons_raw: str | None = None
    violation_power_s_total: float | None = None
    violation_thermal_s_total: float | None = None
    temp_c: float | None = None
    fan_pct: float | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_total_bytes: int | None = None
    mem_used_bytes: int | None = None
    pstate: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_replay_total: int | None = None
    pcie_replay_per_s: float | None = None
    nvlinks: tuple[NvLinkReading, ...] = ()
    ecc_corrected_total: int | None = None
    ecc_uncorrected_total: int | None = None


class AmdGpuReading(Record, frozen=True):
    """One AMD GPU (amdgpu driver) from sysfs: ``card`` is the DRM card (``card0``).

    ``power_w`` is hwmon ``power1_average`` (or ``power1_input``); clocks are the
    current DPM levels of ``pp_dpm_sclk``/``pp_dpm_mclk``; on APUs such as Strix Halo
    "VRAM" is the carve-out of system memory. ``gtt_*_bytes`` (``mem_info_gtt_total``/``_used``)
    is the system memory mapped for the GPU: on an APU where most of a job's memory is; ``null``
    where the driver does not say and from agents older than the fields.
    """

    card: str
    pci_bus_id: str | None
    power_w: float | None
    busy_pct: float | None
    clock_sclk_mhz: int | None
    clock_mclk_mhz: int | None
    temp_c: float | None
    vram_total_bytes: int | None
    vram_used_bytes: int | None
    gtt_total_bytes: int | None = None
    gtt_used_bytes: int | None = None


GpuVendor = Literal["nvidia", "amd"]


class GpuProcessReading(Record, frozen=True):
    """A process holding a GPU: from NVML's running-process lists (NVIDIA) or the DRM
    fdinfo files of ``/proc/PID/fdinfo`` (AMD), joined with ``/proc/PID`` under the agent's root.

    ``gpu_index`` is the NVML index (``None`` for AMD); ``gpu_uuid`` NVML's UUID;
    ``pci_bus_id`` the GPU's sysfs PCI address where known (AMD: ``drm-pdev``). ``command``
    is the short command line (program name without its directory, then the arguments),
    ``cmdline`` the full one. ``in_namespace`` is false when the PID is not visible in the
    agent's ``/proc`` (a process in another PID namespace, such as a container, or one that
    exited between listing and reading): only what the GPU driver gives is then known.
    ``gpu_mem_bytes`` is the GPU memory the process holds (AMD: its buffers resident in VRAM and GTT,
    ``drm-resident-``/``drm-memory-vram`` and ``-gtt``: on an APU most of it is GTT);
    ``util_pct`` the SM (AMD: gfx engine) utilisation of the process where the driver
    samples it; ``started_at`` Unix seconds from ``/proc/PID/stat`` and the boot time.
    ``agent_other_pid_ns`` (NVIDIA) is true when the agent's ``/proc`` is another PID namespace
    than the host's, whose PIDs NVML gives: the agent then looks no NVIDIA PID up there
    (``in_namespace`` false); false when it is the host's (or not known to be another); null for
    AMD processes (found in the agent's own ``/proc``) and from agents older than the field.
    """

    pid: int
    vendor: GpuVendor
    gpu_index: int | None = None
    gpu_uuid: str | None = None
    pci_bus_id: str | None = None
    kind: str | None = None
    in_namespace: bool = True
    user: str | None = None
    uid: int | None = None
    command: str | None = None
    cmdline: str | None = None
    gpu_mem_bytes: int | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None
    started_at: float | None = None
    state: str | None = None
    agent_other_pid_ns: bool | None = None


class KernelLogLine(Record, frozen=True):
    """A kernel log record that a rule matched (Xid, fallen off the bus, PCIe AER).

    ``kind`` is ``xid``, ``gpu_off_bus`` or ``pcie_aer``; ``at`` is Unix seconds derived
    from the record's boot-relative timestamp; ``text`` is the unescaped message.
    """

    seq: int
    at: float | None
    level: int
    kind: str
    text: str


class KernelLogReading(Record, frozen=True):
    """State of the kernel log reader: counts since the agent started and recent matches.

    ``lost_total`` counts records overwritten before they were read (EPIPE and sequence
    gaps). ``recent`` holds the last matched lines, oldest first.
    """

    records_total: int
    matched_total: int
    lost_total: int
    recent: tuple[KernelLogLine, ...] = ()
