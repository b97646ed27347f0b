"""Simulated GPUs: NVIDIA GPUs behind the fake NVML (with PCI sysfs dirs), and an amdgpu iGPU in sysfs."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from rigmon.sim.hwmon import SimHwmon
from rigmon.sim.kmsg import LEVEL_WARNING, SimKernelLog
from rigmon.sim.node import SimNode
from rigmon.sim.nvml import FAKE_NVML, FakeGpu, FakeNvmlMachine
from rigmon.sim.tree import Tree

#: Seconds between the driver's power samples (the buffer NVML's GetSamples reads).
SAMPLE_PERIOD_S = 0.05
#: Most simulated seconds of samples made per step (the buffer holds fewer anyway).
MAX_SAMPLE_SPAN_S = 6.0
#: Decay time of the power spike when all GPUs ramp at once.
SPIKE_TAU_S = 0.12
#: Dynamic power follows the graphics clock cap as (cap / max) ** this (voltage drops with the
#: clock): 1005 of 1530 MHz leaves ~60 %, so a V100's ~330 W ramp peak becomes ~200 W.
CLOCK_POWER_EXP = 1.2
#: Training speed follows the cap as (cap / max) ** this: 1005 MHz costs ~13 %, as the
#: incident's rig measured (memory-bound kernels do not slow with the core clock).
CLOCK_SPEED_EXP = 0.33
#: The driver's power limiter reacts this late to a ramp: until then the board draws what the
#: clocks ask for (DESIGN.md incident 1: peaks above 300 W under a 200 W limit).
POWER_LIMIT_LAG_S = 0.5
#: Samples per second one V100 at full boost contributes to the simulated job's throughput.
SAMPLES_PER_GPU_S = 100.0
PCIE_GEN_SPEED = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe"}

LoadFn = Callable[[float], float]


@dataclass
class GpuFault:
    """A physical fault of one GPU: bad seating shows as link errors and a narrow link.

    Rates are per simulated second at full load.
    """

    pcie_width: int | None = None
    pcie_replay_per_s: float = 0.0
    nvlink_replay_per_s: dict[int, float] = field(default_factory=dict)
    nvlink_crc_per_s: dict[int, float] = field(default_factory=dict)
    aer_every_s: float | None = None


@dataclass
class SimNvidiaGpus:
    """NVIDIA GPUs of a node, served to the node's agent by the fake NVML.

    Power follows the training load sampled every `SAMPLE_PERIOD_S` (from ``load_fn`` when
    given, else ``node.load``), with a spike when the load jumps (every GPU ramps at once
    at each DDP step). The total goes to ``node.bus["gpu_power_w"]``. When
    ``node.bus["rail_volts"]`` (the rail's minimum over the step) stays below ``drop_volts``
    for ``drop_hold_s``, or dips below it ``drop_after_sags`` times within ``sag_window_s``
    (the ramp at every DDP step on a marginal supply), GPU ``weak_gpu`` falls off the bus, as does any GPU a scenario calls `drop` on: NVML then
    answers GPU_IS_LOST for it, its PCI device disappears from sysfs and the kernel logs
    Xid 79.

    Args:
        gpus: the fake GPUs (``rigmon.sim.nvml.v100_sxm2_gpus``).
        kernel_log: where driver messages go.
        load_fn: load profile by simulated time (sub-step resolution for the sample buffer).
        faults: per GPU index.
    """

    gpus: list[FakeGpu]
    kernel_log: SimKernelLog | None = None
    load_fn: LoadFn | None = None
    faults: dict[int, GpuFault] = field(default_factory=dict)
    idle_w: float = 42.0
    load_w: float = 255.0
    spike_w: float = 70.0
    drop_volts: float = 11.4
    drop_hold_s: float = 0.5
    drop_after_sags: int = 3
    sag_window_s: float = 30.0
    weak_gpu: int = 3
    #: Set by a simulated job (`rigmon.sim.job.SimDdpJob`): GPU memory is what its processes
    #: hold, not a function of the load.
    memory_from_processes: bool = False
    machine: FakeNvmlMachine = field(init=False)
    _rng: random.Random = field(default_factory=random.Random)
    _target: str | None = None
    _last_load: float = 0.0
    _spike: list[float] = field(default_factory=list)
    _since_ramp_s: float = 0.0
    _below_s: float = 0.0
    _sags_at: list[float] = field(default_factory=list)
    _next_aer_s: dict[int, float] = field(default_factory=dict)
    _fraction: dict[tuple[int, str, int], float] = field(default_factory=dict)
    _gone: set[int] = field(default_factory=set)
    _driver_written: bool = False
    drop_reasons: dict[int, str] = field(default_factory=dict)
    #: Below this rail minimum the boards assert HW slowdown and the power brake (the SXM2
    #: board's own reaction to a sagging 12 V input), until the rail recovers.
    brake_volts: float = 11.5
    #: Seconds the boards keep the slowdown asserted after the rail came back above `brake_volts`.
    brake_hold_s: float = 2.0
    _brake_until_s: float = -1.0
    #: Degrees a GPU runs above the coolest at full load (airflow differs along the chassis).
    hot_spread_c: float = 7.0
    _temp_c: dict[int, float] = field(default_factory=dict)
    _hot_c: dict[int, float] = field(default_factory=dict)
    #: The simulated job's throughput (samples/s): it falls with capped clocks and is 0 once
    #: a GPU is lost (the data-parallel run dies with it).
    throughput_per_s: float = 0.0
    #: Samples the simulated job trained so far (the throughput integrated over simulated time).
    samples_total: float = 0.0
    #: Simulated seconds the job trained (load on every GPU, none lost).
    job_s: float = 0.0

    def __post_init__(self) -> None:
        self.machine = FakeNvmlMachine(self.gpus)
        self._spike = [0.0] * len(self.gpus)
        for index, fault in self.faults.items():
            if fault.pcie_width is not None:
                self.gpus[index].pcie_width = fault.pcie_width

    def drop(self, index: int, why: str) -> None:
        """GPU ``index`` falls off the bus now (once)."""
        gpu = self.gpus[index]
        if gpu.lost:
            return
        # The Xid 79 first: the driver reports the fall, then answers GPU_IS_LOST (a client that
        # registers its event set again without the lost GPU would never see an Xid posted after).
        self.machine.post_xid(index, 79)
        with self.machine.lock:
            gpu.lost = True
        self.drop_reasons[index] = why
        if self.kernel_log is not None:
            xid_bus = f"{gpu.domain:04x}:{gpu.bus:02x}:00"
            self.kernel_log.log(LEVEL_WARNING, f"NVRM: GPU at PCI:{xid_bus}: {gpu.uuid}")
            self.kernel_log.log(LEVEL_WARNING, f"NVRM: GPU Board Serial Number: {gpu.serial}")
            self.kernel_log.log(LEVEL_WARNING, f"NVRM: Xid (PCI:{xid_bus}): 79, GPU has fallen off the bus.")
            self.kernel_log.log(LEVEL_WARNING, f"NVRM: GPU {gpu.sysfs_bus_id}: GPU has fallen off the bus.")
            self.kernel_log.log(LEVEL_WARNING, "NVRM: A GPU crash dump has been created. If possible, please run")

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        if self._target is None:
            self._rng = random.Random(node.rng.random())
            self._target = os.path.abspath(node.tree.root)
            FAKE_NVML.serve(self._target, self.machine)
        self._sample_power(node, t_s, dt_s)
        load = self.load_fn(t_s) if self.load_fn else node.load
        volts = node.bus.get("rail_volts")
        if volts is not None and volts < self.brake_volts:
            self._brake_until_s = t_s + self.brake_hold_s
        braking = t_s <= self._brake_until_s
        with self.machine.lock:
            for gpu in self.gpus:
                if not gpu.lost:
                    self._advance_gpu(gpu, load, t_s, dt_s)
                    if braking and load > 0.1:
                        gpu.clock_reasons |= 0x8 | 0x80  # HW slowdown, HW power brake slowdown
            node.bus["gpu_power_w"] = sum(g.power_mw for g in self.gpus if not g.lost) / 1000.0
            lost = any(g.lost for g in self.gpus)
            self.throughput_per_s = 0.0 if lost else sum(
                SAMPLES_PER_GPU_S * load * clock_ratio(g) ** CLOCK_SPEED_EXP for g in self.gpus)
            self.samples_total += self.throughput_per_s * dt_s
            if not lost and load > 0.1:
                self.job_s += dt_s
        self._check_rail(node, dt_s)

    def _sample_power(self, node: SimNode, t_s: float, dt_s: float) -> None:
        span = min(dt_s, MAX_SAMPLE_SPAN_S)
        n = max(1, int(round(span / SAMPLE_PERIOD_S))) if dt_s > 0 else 1
        decay = math.exp(-SAMPLE_PERIOD_S / SPIKE_TAU_S)
        with self.machine.lock:
            for k in range(n):
                ts = t_s - span + (k + 1) * span / n
                load = self.load_fn(ts) if self.load_fn else node.load
                ramp = load - self._last_load > 0.3
                self._last_load = load
                self._since_ramp_s = 0.0 if ramp else self._since_ramp_s + span / n
                for gpu in self.gpus:
                    if gpu.lost:
                        continue
                    i = gpu.index
                    self._spike[i] = self.spike_w * self._rng.uniform(0.8, 1.2) if ramp else self._spike[i] * decay
                    scale = clock_ratio(gpu) ** CLOCK_POWER_EXP
                    dynamic_w = (self.load_w - self.idle_w) * load * scale
                    if gpu.power_limit_mw < gpu.default_limit_mw and self._since_ramp_s >= POWER_LIMIT_LAG_S:
                        # The limit holds the steady draw only, and only after the limiter caught
                        # up: the ramp still overshoots it (why power limits alone do not save the
                        # rig, DESIGN.md incident 1).
                        dynamic_w = min(dynamic_w, gpu.power_limit_mw / 1000.0 - self.idle_w)
                    watts = self.idle_w + dynamic_w + self._spike[i] * scale
                    watts *= self._rng.uniform(0.98, 1.02)
                    gpu.power_samples.append((int(ts * 1_000_000) + 1, int(watts * 1000)))
                    gpu.power_mw = int(watts * 1000)

    def _advance_gpu(self, gpu: FakeGpu, load: float, t_s: float, dt_s: float) -> None:
        gpu.energy_mj += gpu.power_mw * dt_s
        busy = load > 0.1
        at_cap = gpu.power_mw > gpu.enforced_limit_mw
        cap = graphics_cap_mhz(gpu)
        gpu.clock_sm_mhz = gpu.clock_graphics_mhz = min(1380 if at_cap else 1530, cap) if busy else 135
        capped = busy and cap < gpu.max_clock_graphics_mhz
        gpu.clock_reasons = 0x4 if at_cap else ((0x2 if capped else 0x0) if busy else 0x1)
        if at_cap:
            gpu.violation_power_ns += int(dt_s * 0.2 * 1e9)
        # Kept as a float between steps: a substep's change is a fraction of a degree.
        hot = self._hot_c.get(gpu.index)
        if hot is None:
            # From the GPU's identity, not the shared random stream, so the power samples stay as they were.
            hot = self._hot_c[gpu.index] = random.Random(gpu.uuid).uniform(0.0, self.hot_spread_c)
        target_temp = 35.0 + (33.0 + hot) * load + hot * 0.2
        temp = self._temp_c.get(gpu.index, float(gpu.temp_c))
        temp += (target_temp - temp) * min(1.0, dt_s / 20.0)
        self._temp_c[gpu.index] = temp
        gpu.temp_c = int(round(temp))
        # Utilisation stands for work done: capped clocks do less of it per second.
        gpu.util_gpu_pct = int(min(100.0, load * 100 * clock_ratio(gpu) ** CLOCK_SPEED_EXP))
        gpu.util_mem_pct = int(min(100.0, load * 60))
        if not self.memory_from_processes:
            gpu.mem_used_bytes = int(gpu.mem_total_bytes * (0.02 + 0.85 * min(1.0, load * 3)))
        gpu.pstate = 0 if busy else 8
        fault = self.faults.get(gpu.index)
        if fault is None:
            return
        activity = max(load, 0.05)
        gpu.pcie_replay += self._count((gpu.index, "pcie", 0), fault.pcie_replay_per_s * activity * dt_s)
        for link, rate in fault.nvlink_replay_per_s.items():
            key = (link, 0)
            gpu.nvlink_counters[key] = gpu.nvlink_counters.get(key, 0) + self._count(
                (gpu.index, "replay", link), rate * activity * dt_s)
        for link, rate in fault.nvlink_crc_per_s.items():
            key = (link, 2)
            gpu.nvlink_counters[key] = gpu.nvlink_counters.get(key, 0) + self._count(
                (gpu.index, "crc", link), rate * activity * dt_s)
        if fault.aer_every_s is not None and self.kernel_log is not None:
            due = self._next_aer_s.setdefault(gpu.index, t_s + fault.aer_every_s * self._rng.uniform(0.2, 1.0))
            if t_s >= due:
                self._next_aer_s[gpu.index] = t_s + fault.aer_every_s * self._rng.uniform(0.5, 1.5)
                self._log_aer(gpu)

    def _count(self, key: tuple[int, str, int], expected: float) -> int:
        """Whole events out of a fractional expectation, carrying the remainder."""
        total = self._fraction.get(key, 0.0) + expected * self._rng.uniform(0.5, 1.5)
        whole = int(total)
        self._fraction[key] = total - whole
        return whole

    def _log_aer(self, gpu: FakeGpu) -> None:
        assert self.kernel_log is not None
        bdf = gpu.sysfs_bus_id
        fields = {"SUBSYSTEM": "pci", "DEVICE": f"+pci:{bdf}"}
        self.kernel_log.log(LEVEL_WARNING, f"pcieport 0000:00:03.0: AER: Corrected error received: {bdf}")
        self.kernel_log.log(LEVEL_WARNING, f"nvidia {bdf}: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
                                           "(Receiver ID)", fields)
        self.kernel_log.log(LEVEL_WARNING, f"nvidia {bdf}:   device [10de:1db1] error status/mask=00000001/0000e000")
        self.kernel_log.log(LEVEL_WARNING, f"nvidia {bdf}:    [ 0] RxErr                  (First)")

    def _check_rail(self, node: SimNode, dt_s: float) -> None:
        volts = node.bus.get("rail_volts")
        if volts is None or volts >= self.drop_volts:
            self._below_s = 0.0
            return
        if self._below_s == 0.0:
            # A new sag: the falling edge below the threshold.
            self._sags_at = [t for t in self._sags_at if node.t_s - t < self.sag_window_s] + [node.t_s]
        self._below_s += dt_s
        if not 0 <= self.weak_gpu < len(self.gpus):
            return
        if self._below_s >= self.drop_hold_s:
            self.drop(self.weak_gpu, f"rail at {volts:.2f} V for {self._below_s:.1f} s")
        elif len(self._sags_at) >= self.drop_after_sags:
            self.drop(self.weak_gpu, f"rail sagged to {volts:.2f} V {len(self._sags_at)} times "
                                     f"in {self.sag_window_s:.0f} s")

    def write(self, tree: Tree) -> None:
        if not self._driver_written:
            # The loaded kernel module says its version (what a bug report's reader asks first).
            version = self.machine.driver_version
            tree.write("/sys/module/nvidia/version", f"{version}\n")
            tree.write("/proc/driver/nvidia/version",
                       f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Thu Feb 22 01:44:30 UTC 2024\n"
                       "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
            self._driver_written = True
        for gpu in self.gpus:
            base = f"/sys/bus/pci/devices/{gpu.sysfs_bus_id}"
            if gpu.lost:
                if gpu.index not in self._gone:
                    self._gone.add(gpu.index)
                    tree.remove(base)
                continue
            tree.write(f"{base}/vendor", "0x10de\n")
            tree.write(f"{base}/device", "0x1db1\n")
            tree.write(f"{base}/class", "0x030200\n")
            tree.write(f"{base}/current_link_speed", PCIE_GEN_SPEED.get(gpu.pcie_gen, "Unknown") + "\n")
            tree.write(f"{base}/current_link_width", f"{gpu.pcie_width}\n")
            tree.write(f"{base}/max_link_speed", PCIE_GEN_SPEED.get(gpu.pcie_gen_max, "Unknown") + "\n")
            tree.write(f"{base}/max_link_width", f"{gpu.pcie_width_max}\n")

    def close(self) -> None:
        if self._target is not None:
            FAKE_NVML.withdraw(self._target)
            self._target = None
        # Wake anything blocked in the fake driver.
        self.machine.heal("hang")


def graphics_cap_mhz(gpu: FakeGpu) -> int:
    """The highest graphics clock the GPU may run at: its maximum, under set application or locked clocks."""
    cap = gpu.max_clock_graphics_mhz
    if gpu.app_clocks_set:
        cap = min(cap, gpu.app_clock_graphics_mhz)
    if gpu.locked_clock_max_mhz is not None:
        cap = min(cap, gpu.locked_clock_max_mhz)
    return cap


def clock_ratio(gpu: FakeGpu) -> float:
    """The clock cap as a fraction of the GPU's maximum graphics clock."""
    return graphics_cap_mhz(gpu) / gpu.max_clock_graphics_mhz


#: A load below which an amdgpu card's training job is gone and its VRAM freed.
JOB_GONE_LOAD = 0.02
#: Share of an APU's VRAM carve-out a job's buffers fill before the driver places them in GTT (the rest
#: holds the display's and the firmware's).
APU_VRAM_FILL = 0.75
#: Granularity of a simulated amdgpu job's allocations.
AMD_BLOCK_BYTES = 2 * 1024**2


@dataclass
class SimAmdGpu:
    """An amdgpu GPU (a Strix Halo iGPU by default) in sysfs: hwmon power, busy %, DPM clocks, VRAM, GTT.

    A Strix Halo box as set up for training (128 GB of unified memory): the BIOS's VRAM carve-out
    small (512 MiB), the GPU's memory GTT, system memory mapped for the GPU (``amdgpu.gttsize`` or
    ``ttm.pages_limit`` raised to ~110 GiB); a job's buffers fill the carve-out, the rest is GTT.
    A discrete card is ``gtt_total_bytes=0``: its job's buffers are VRAM.

    Args:
        card: DRM card name.
        bus_id: PCI address in sysfs spelling.
        idle_w / load_w: package power of the GPU at idle and full load.
    """

    card: str = "card0"
    bus_id: str = "0000:c3:00.0"
    device_id: str = "0x1586"
    idle_w: float = 9.0
    load_w: float = 120.0
    vram_total_bytes: int = 512 * 1024**2
    gtt_total_bytes: int = 110 * 1024**3
    sclk_levels_mhz: tuple[int, ...] = (600, 1500, 2900)
    mclk_levels_mhz: tuple[int, ...] = (1000, 4000)
    power_w: float = 9.0
    busy_pct: float = 0.0
    temp_c: float = 40.0
    vram_used_bytes: int = 0
    gtt_used_bytes: int = 0
    #: Its hwmon device's number (``<pci>/hwmon/hwmon1``).
    hwmon_number: int = 1
    #: The power files its hwmon device has: which of ``power1_average`` and ``power1_input`` exist
    #: depends on the kernel and the ASIC (some have both).
    power_files: tuple[str, ...] = ("power1_average",)
    _rng: random.Random = field(default_factory=random.Random)
    _seeded: bool = False
    #: Its hwmon device: a driver reload registers it again (`SimHwmon.reregister`).
    hwmon: SimHwmon = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.hwmon = SimHwmon(parent=f"/sys/bus/pci/devices/{self.bus_id}/hwmon", number=self.hwmon_number)

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        if not self._seeded:
            self._seeded = True
            self._rng = random.Random(node.rng.random())
        load = node.load
        self.power_w = (self.idle_w + (self.load_w - self.idle_w) * load) * self._rng.uniform(0.97, 1.03)
        self.busy_pct = min(100.0, load * 100 * self._rng.uniform(0.95, 1.0))
        target = 40.0 + 45.0 * load
        self.temp_c += (target - self.temp_c) * min(1.0, dt_s / 15.0)
        # A training job's allocator keeps what it took until the job ends: VRAM rises with the load
        # at once and stays through the job's lighter phases (compute and collectives alternate each
        # step), freed only when the load is gone. It followed every step's load: 58.6 <-> 81.6 GiB a sample.
        share = 0.05 + 0.8 * min(1.0, load * 2)
        # In the allocator's 2 MiB blocks: fdinfo's KiB give the bytes back exactly.
        wanted = int((self.vram_total_bytes + self.gtt_total_bytes) * share) // AMD_BLOCK_BYTES * AMD_BLOCK_BYTES
        if wanted > self.vram_used_bytes + self.gtt_used_bytes or load < JOB_GONE_LOAD:
            vram = min(wanted, int(self.vram_total_bytes * APU_VRAM_FILL)) if self.gtt_total_bytes else wanted
            self.vram_used_bytes, self.gtt_used_bytes = vram, wanted - vram
        node.bus["gpu_power_w"] = self.power_w
        # GTT is system memory the kernel gives the GPU: the host's memory in use holds it (`SimHost`).
        node.bus["gpu_gtt_bytes"] = float(self.gtt_used_bytes)

    def write(self, tree: Tree) -> None:
        dev = f"/sys/bus/pci/devices/{self.bus_id}"
        tree.write(f"{dev}/vendor", "0x1002\n")
        tree.write(f"{dev}/device", f"{self.device_id}\n")
        tree.write(f"{dev}/class", "0x038000\n")
        if not tree.path(f"{dev}/subsystem").is_symlink():
            tree.symlink(f"{dev}/subsystem", "../../../../bus/pci")
        busy = self.busy_pct > 5
        tree.write(f"{dev}/gpu_busy_percent", f"{int(self.busy_pct)}\n")
        tree.write(f"{dev}/pp_dpm_sclk", _dpm(self.sclk_levels_mhz, len(self.sclk_levels_mhz) - 1 if busy else 0))
        tree.write(f"{dev}/pp_dpm_mclk", _dpm(self.mclk_levels_mhz, len(self.mclk_levels_mhz) - 1 if busy else 0))
        tree.write(f"{dev}/mem_info_vram_total", f"{self.vram_total_bytes}\n")
        tree.write(f"{dev}/mem_info_vram_used", f"{self.vram_used_bytes}\n")
        tree.write(f"{dev}/mem_info_gtt_total", f"{self.gtt_total_bytes}\n")
        tree.write(f"{dev}/mem_info_gtt_used", f"{self.gtt_used_bytes}\n")
        power = f"{int(self.power_w * 1_000_000)}\n"
        self.hwmon.write(tree, {**dict.fromkeys(self.power_files, power), "temp1_input": f"{int(self.temp_c * 1000)}\n"},
                         fixed={"name": "amdgpu\n", "temp1_label": "edge\n"})
        link = f"/sys/class/drm/{self.card}/device"
        if not tree.path(link).is_symlink():
            tree.symlink(link, f"../../../bus/pci/devices/{self.bus_id}")

    def close(self) -> None:
        """Nothing to release."""


def _dpm(levels: tuple[int, ...], current: int) -> str:
    # 0: 600Mhz\n1: 1500Mhz *\n  (amdgpu marks the current level with a star)
    return "".join(f"{i}: {mhz}Mhz{' *' if i == current else ''}\n" for i, mhz in enumerate(levels))
