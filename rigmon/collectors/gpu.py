"""GPU collector: NVIDIA GPUs through NVML, lost-GPU detection, and NVML Xid events (`gpu_xid_events`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rigmon.clock import Clock
from rigmon.collectors.base import (
    CollectorContext,
    CollectorError,
    CollectorHung,
    CollectorStarting,
    EventDraft,
    NoData,
    PushFn,
)
from rigmon.collectors.gpu_values import MILLI, NANO, clock_reasons_text, decode_clock_reasons, power_extremes, watts
from rigmon.collectors.gpu_xid_events import XID_FALLEN_OFF_BUS, XidEvents
from rigmon.collectors.kernel_log import (
    KernelLogMatcher,
    PciBusIds,
    parse_kmsg_record,
    parse_pci_bus_id,
)
from rigmon.collectors.nvidia_bus import NvidiaBus
from rigmon.hw.kmsg import KmsgReader, KmsgUnavailable
from rigmon.hw.nvml import (
    NvLinkData,
    Nvml,
    NvmlDeviceData,
    NvmlHung,
    NvmlStarting,
    NvmlUnavailable,
    open_nvml,
)
from rigmon.hw.root import HostRoot
from rigmon.rates import CounterRates
from rigmon.schema import GpuReading, NvLinkReading

@dataclass(slots=True)
class _Gpu:
    """One GPU the collector knows about (from the inventory taken at start, or seen later)."""

    index: int
    uuid: str | None
    name: str | None
    serial: str | None
    ids: PciBusIds | None
    last_sample_us: int = 0
    lost_at: float | None = None
    lost_reason: str | None = None
    #: NVML itself said the GPU is gone (GPU_IS_LOST, or not enumerated): only a lost GPU that NVML
    #: said so of comes back (a reset, a PCI rescan) when NVML answers for its UUID again; one lost
    #: by the kernel log or sysfs alone while NVML still answers stays lost.
    nvml_gone: bool = False
    #: The NVML index of its last answer (indices move up when a GPU before it leaves the count).
    nvml_index: int = -1
    signals: list[str] = field(default_factory=list)
    #: Rates of its NVLink replay and CRC counters, by link number (six to eighteen links a GPU,
    #: every poll: kept per GPU rather than under a (GPU, counter, link) key each).
    nvl_replay: CounterRates = field(default_factory=CounterRates)
    nvl_crc: CounterRates = field(default_factory=CounterRates)
    #: The NVLink records of the last poll (`_links`), the raw values they were made from, and the
    #: monotonic time of the last poll that read those values (a reused poll moves it on, not the
    #: rates' own times); ``links_steady`` when every rate in them was 0.0 (a poll with the same
    #: values would make the same records).
    links_raw: tuple[NvLinkData, ...] | None = None
    links: tuple[NvLinkReading, ...] = ()
    links_at: float = 0.0
    links_rated_at: float = 0.0
    links_steady: bool = False


class GpuCollector:
    """NVIDIA GPUs: readings through NVML, lost-GPU detection, Xid events.

    A GPU is lost when any signal says so: NVML answers GPU_IS_LOST, the device count or
    the NVIDIA PCI device list in sysfs shrinks against the inventory taken on the first
    successful poll, or the kernel log (read independently of the kernel log collector)
    reports Xid 79 or "fallen off the bus" for its bus id. A lost GPU stays listed with
    state ``lost``; the ``gpu_lost`` event is emitted once. One that NVML said was lost and
    that answers NVML for its UUID again (a reset) is read again, with a ``gpu_back`` event.

    Args:
        nvml: the NVML binding for this machine.
        root: the machine's files (sysfs PCI list, kernel log).
        clock: wall time for ``lost_at``, monotonic time for rates.
        kmsg_path: kernel log below the root.
        event_wait_s: one NVML event wait, in seconds.
        hung_after_s: seconds an event wait may overrun ``event_wait_s`` before it counts as stuck
            in the driver (the NVML watchdog timeout).
    """

    name = "gpu"

    def __init__(self, nvml: Nvml, root: HostRoot, clock: Clock, kmsg_path: str = "/dev/kmsg",
                 event_wait_s: float = 0.5, hung_after_s: float = 2.0) -> None:
        self.nvml = nvml
        self.root = root
        self.clock = clock
        self._xid = XidEvents(nvml, event_wait_s, hung_after_s)
        self._gpus: list[_Gpu] | None = None
        self._pci_at_start: set[str] = set()
        self._count_at_start = 0
        self._rates = CounterRates()
        self._kmsg = KmsgReader(root, kmsg_path)
        self._kmsg_missing = False
        self._matcher = KernelLogMatcher()
        self._kernel_lost: dict[str, str] = {}
        #: The NVIDIA GPUs on the PCI bus.
        self._bus = NvidiaBus(root)

    # -- polling ----------------------------------------------------------------------

    def collect(self) -> Sequence[object]:
        try:
            # One hand-off to NVML's watchdog thread for every GPU, not one per GPU.
            datas = self.nvml.read_devices(self._samples_since())
        except NvmlUnavailable as exc:
            # No driver is a quiet absence only where there is no NVIDIA GPU: GPUs on the PCI bus
            # that NVML cannot read (a driver module that failed to build after a kernel update)
            # are a failure, or `rigmon check` would pass a node whose job cannot start.
            unread = self._bus.unread(str(exc))
            if unread is not None:
                raise CollectorError(unread) from None
            raise NoData(str(exc)) from None
        except NvmlStarting as exc:
            # A slow first nvmlInit (no persistence mode) is not a hang, nor a machine without
            # GPUs: not known yet until it returns.
            raise CollectorStarting(str(exc)) from None
        except NvmlHung as exc:
            raise CollectorHung(str(exc)) from None
        if not datas and not self._gpus:
            # The driver runs but lists no GPU: NVIDIA GPUs on the bus meant for it are GPUs it
            # could not bring up (RmInitAdapter failed), not a machine without GPUs.
            on_bus = [bdf for bdf in self._bus.bus_ids() if self._bus.meant_for_nvidia(bdf)]
            if on_bus:
                raise CollectorError(f"NVML lists no GPU, but {len(on_bus)} NVIDIA GPU"
                                     f"{'s' if len(on_bus) > 1 else ''} on the PCI bus ({', '.join(on_bus)}): "
                                     "the driver could not bring them up (nvidia-smi; RmInitAdapter in the "
                                     "kernel log?)")
        self._read_kernel_log()
        if self._gpus is None:
            self._take_inventory(datas)
        assert self._gpus is not None
        now_at = self.clock.time()
        now_s = self.clock.monotonic()
        pci_now = set(self._bus.bus_ids())
        records: list[object] = self._xid.watch()
        seen: set[int] = set()
        readings: dict[int, GpuReading] = {}
        back: list[_Gpu] = []
        for data in datas:
            gpu = self._match(data)
            seen.add(id(gpu))
            gpu.nvml_index = data.index
            if data.lost:
                gpu.signals.append("NVML: GPU is lost")
                gpu.nvml_gone = True
            elif data.uuid is None:
                # NVML counts the GPU but gives no handle for it: how many drivers answer for a GPU
                # that fell off the bus (nvidia-smi: "Unable to determine the device handle for GPU
                # 0000:1d:00.0: Unknown Error") rather than GPU_IS_LOST.
                gpu.signals.append("NVML: no device handle")
                gpu.nvml_gone = True
            elif (gpu.lost_at is not None and gpu.nvml_gone and data.uuid is not None and data.uuid == gpu.uuid
                  and (gpu.ids is None or gpu.ids.sysfs in pci_now or gpu.ids.sysfs not in self._pci_at_start)):
                back.append(gpu)
            readings[id(gpu)] = self._reading(gpu, data, now_s)
        for gpu in back:
            records.append(self._back(gpu, now_at))
        for gpu in self._gpus:
            if id(gpu) not in seen and gpu.nvml_index >= 0:
                gpu.signals.append(f"NVML device count {len(datas)}, was {self._count_at_start}")
                gpu.nvml_gone = True
            if gpu.ids is not None:
                if gpu.ids.sysfs in self._pci_at_start and gpu.ids.sysfs not in pci_now:
                    gpu.signals.append(f"PCI device {gpu.ids.sysfs} gone from sysfs")
                kernel = self._kernel_lost.get(gpu.ids.sysfs)
                if kernel is not None:
                    gpu.signals.append(kernel)
            nvml_xid = self._xid.lost_signal(gpu.index)
            if nvml_xid is not None:
                gpu.signals.append(nvml_xid)
            if gpu.signals and gpu.lost_at is None:
                gpu.lost_at = now_at
                gpu.lost_reason = "; ".join(dict.fromkeys(gpu.signals))
                records.append(self._lost_event(gpu))
            gpu.signals.clear()
            records.append(self._lost_reading(gpu) if gpu.lost_at is not None else readings[id(gpu)])
        return records

    def _samples_since(self) -> dict[int, int]:
        """Per NVML index, the newest power sample its GPU's readings already took (a lost GPU's only
        where no GPU that answers has that index now)."""
        gpus = sorted(self._gpus or (), key=lambda gpu: gpu.lost_at is None)
        return {gpu.nvml_index: gpu.last_sample_us for gpu in gpus if gpu.nvml_index >= 0}

    def _back(self, gpu: _Gpu, now_at: float) -> EventDraft:
        """GPU ``gpu``, lost, answers NVML for its UUID again (reset, PCI rescan): no longer lost.

        The signals that said it was lost are history now: the kernel log's line and NVML's Xid 79
        event are forgotten, so only a new signal loses it again.
        """
        lost_s = None if gpu.lost_at is None else round(now_at - gpu.lost_at, 1)
        was = gpu.lost_reason
        gpu.lost_at = gpu.lost_reason = None
        gpu.nvml_gone = False
        gpu.signals.clear()
        if gpu.ids is not None:
            self._kernel_lost.pop(gpu.ids.sysfs, None)
        self._xid.forget_lost(gpu.index)
        where = f" ({gpu.ids.sysfs})" if gpu.ids is not None else ""
        after = "" if lost_s is None else f" {lost_s:g} s after it was lost"
        return EventDraft(
            kind="gpu_back", severity="info", subject=f"gpu:{gpu.index}",
            message=f"GPU {gpu.index}{where} answers NVML again{after}",
            data={"gpu_index": gpu.index, "uuid": gpu.uuid, "name": gpu.name, "lost_reason": was, "lost_s": lost_s,
                  "pci_bus_id": None if gpu.ids is None else gpu.ids.sysfs},
            at=now_at,
        )

    def _take_inventory(self, datas: list[NvmlDeviceData]) -> None:
        self._gpus = [self._new_gpu(d) for d in datas]
        self._count_at_start = len(datas)
        self._pci_at_start = set(self._bus.bus_ids())
        # An NVIDIA GPU on the bus meant for the driver that NVML does not list is one the driver
        # could not bring up (RmInitAdapter failed): lost from the start, not a GPU fewer.
        # (A GPU NVML lists without its address, lost at the start, may be any of them: none then.)
        listed = {gpu.ids.sysfs for gpu in self._gpus if gpu.ids is not None}
        unlisted = () if len(listed) < len(self._gpus) else sorted(self._pci_at_start - listed)
        for bdf in unlisted:
            ids = parse_pci_bus_id(bdf)
            if ids is None or not self._bus.meant_for_nvidia(bdf):
                continue
            index = max((gpu.index for gpu in self._gpus), default=-1) + 1
            self._gpus.append(_Gpu(index=index, uuid=None, name=None, serial=None, ids=ids, nvml_gone=True))
            self._gpus[-1].signals.append("on the PCI bus, but NVML does not list it (the driver could not "
                                          "bring it up?)")

    @staticmethod
    def _new_gpu(data: NvmlDeviceData) -> _Gpu:
        ids = None if data.pci_bus_id is None else parse_pci_bus_id(data.pci_bus_id)
        return _Gpu(index=data.index, uuid=data.uuid, name=data.name, serial=data.serial, ids=ids,
                    nvml_index=data.index)

    def _match(self, data: NvmlDeviceData) -> _Gpu:
        """The known GPU ``data`` is about: by UUID, else by its last NVML index (a lost GPU has no
        UUID); a GPU lost before its identity was read (at the start, or never listed by NVML: by
        its PCI address) takes the identity ``data`` gives."""
        assert self._gpus is not None
        if data.uuid is not None:
            for gpu in self._gpus:
                if gpu.uuid == data.uuid:
                    return gpu
            fresh = self._new_gpu(data)
            for gpu in self._gpus:
                if gpu.uuid is None and (gpu.nvml_index == data.index if gpu.nvml_index >= 0
                                         else fresh.ids is not None and gpu.ids == fresh.ids):
                    # Lost before its identity was ever read (at the agent's start): it answers now.
                    gpu.uuid, gpu.name, gpu.serial, gpu.ids = fresh.uuid, fresh.name, fresh.serial, fresh.ids
                    return gpu
        else:
            for gpu in self._gpus:
                if gpu.nvml_index == data.index:
                    return gpu
        gpu = self._new_gpu(data) if data.uuid is None else fresh
        used = {g.index for g in self._gpus}
        if gpu.index in used:
            gpu.index = max(used) + 1
        self._gpus.append(gpu)
        return gpu

    def _reading(self, gpu: _Gpu, d: NvmlDeviceData, now_s: float) -> GpuReading:
        samples_mw = d.power_samples_mw
        if d.power_samples_us:
            since_us = gpu.last_sample_us
            if min(d.power_samples_us) <= since_us:
                # Asked since another GPU's newest sample (the device count changed and the indices
                # moved): this GPU's samples already taken are not taken again.
                samples_mw = tuple(mw for us, mw in zip(d.power_samples_us, samples_mw) if us > since_us)
            gpu.last_sample_us = max(since_us, max(d.power_samples_us))
        peak_w, min_w, n_samples = power_extremes(samples_mw)
        key = gpu.uuid or gpu.index
        links = self._links(gpu, d.nvlinks, now_s)
        return GpuReading(
            index=gpu.index,
            uuid=gpu.uuid,
            name=gpu.name,
            serial=gpu.serial,
            pci_bus_id=None if gpu.ids is None else gpu.ids.sysfs,
            pci_bus_id_nvml=None if gpu.ids is None else gpu.ids.nvml,
            pci_bus_id_xid=None if gpu.ids is None else gpu.ids.xid,
            power_w=watts(d.power_mw),
            power_peak_w=peak_w,
            power_min_w=min_w,
            power_samples=n_samples if d.power_sampled else None,
            power_instant_w=watts(d.power_instant_mw),
            energy_j_total=None if d.energy_mj is None else d.energy_mj / MILLI,
            power_limit_w=watts(d.power_limit_mw),
            power_limit_enforced_w=watts(d.enforced_limit_mw),
            power_limit_default_w=watts(d.default_limit_mw),
            clock_sm_mhz=d.clock_sm_mhz,
            clock_mem_mhz=d.clock_mem_mhz,
            clock_graphics_mhz=d.clock_graphics_mhz,
            clock_app_graphics_mhz=d.app_clock_graphics_mhz,
            clock_app_mem_mhz=d.app_clock_mem_mhz,
            clock_max_sm_mhz=d.max_clock_sm_mhz,
            clock_max_mem_mhz=d.max_clock_mem_mhz,
            clock_max_graphics_mhz=d.max_clock_graphics_mhz,
            clock_reasons=None if d.clock_reasons is None else decode_clock_reasons(d.clock_reasons),
            clock_reasons_raw=None if d.clock_reasons is None else clock_reasons_text(d.clock_reasons),
            violation_power_s_total=None if d.violation_power_ns is None else d.violation_power_ns / NANO,
            violation_thermal_s_total=None if d.violation_thermal_ns is None else d.violation_thermal_ns / NANO,
            temp_c=None if d.temp_c is None else float(d.temp_c),
            fan_pct=None if d.fan_pct is None else float(d.fan_pct),
            util_pct=None if d.util_gpu_pct is None else float(d.util_gpu_pct),
            mem_util_pct=None if d.util_mem_pct is None else float(d.util_mem_pct),
            mem_total_bytes=d.mem_total_bytes,
            mem_used_bytes=d.mem_used_bytes,
            pstate=d.pstate,
            pcie_gen=d.pcie_gen,
            pcie_width=d.pcie_width,
            pcie_gen_max=d.pcie_gen_max,
            pcie_width_max=d.pcie_width_max,
            pcie_replay_total=d.pcie_replay,
            pcie_replay_per_s=None if d.pcie_replay is None else self._rates.rate((key, "pcie_replay"),
                                                                                   d.pcie_replay, now_s),
            nvlinks=links,
            ecc_corrected_total=d.ecc_corrected,
            ecc_uncorrected_total=d.ecc_uncorrected,
        )

    @staticmethod
    def _links(gpu: _Gpu, raw: tuple[NvLinkData, ...], now_s: float) -> tuple[NvLinkReading, ...]:
        """The GPU's NVLink records, with the rates of their replay and CRC counters.

        NVLink counters and states are read on every poll (in the poll's one field-values call),
        but they rarely move: while a poll's values are those of the last one and every rate was
        0.0, the last poll's records are what this poll would build (each rate again 0 over the
        time since), so they are given again, the same objects. The alarm engine's NVLink rules
        then find the same records from frame to frame (`rigmon.alarms.walk.WalkCarry`). The rates'
        own times are not moved on such a poll: before the next rates are taken, each counter is
        recorded again at the last poll that read its unchanged value, so a counter that rises
        after quiet polls gets its rate over one poll's interval, as before.
        """
        if raw is gpu.links_raw or raw == gpu.links_raw:
            if gpu.links_steady and now_s > gpu.links_at:
                gpu.links_at = now_s
                return gpu.links
        replay, crc = gpu.nvl_replay, gpu.nvl_crc
        if gpu.links_raw is not None and gpu.links_at > gpu.links_rated_at:
            # Polls that reused the records left the rates' times at the poll before them.
            for link in gpu.links_raw:
                if link.replay is not None:
                    replay.rate(link.link, link.replay, gpu.links_at)
                if link.crc_flit is not None:
                    crc.rate(link.link, link.crc_flit, gpu.links_at)
        replay_rate, crc_rate = replay.rate, crc.rate
        links = tuple(
            NvLinkReading(
                link=link.link,
                active=link.active,
                replay_total=link.replay,
                recovery_total=link.recovery,
                crc_flit_total=link.crc_flit,
                crc_data_total=link.crc_data,
                replay_per_s=None if link.replay is None else replay_rate(link.link, link.replay, now_s),
                crc_flit_per_s=None if link.crc_flit is None else crc_rate(link.link, link.crc_flit, now_s),
            )
            for link in raw
        )
        gpu.links_raw, gpu.links, gpu.links_at, gpu.links_rated_at = raw, links, now_s, now_s
        gpu.links_steady = all((r.replay_total is None or r.replay_per_s == 0.0)
                               and (r.crc_flit_total is None or r.crc_flit_per_s == 0.0) for r in links)
        return links

    @staticmethod
    def _lost_reading(gpu: _Gpu) -> GpuReading:
        ids = gpu.ids
        return GpuReading(
            index=gpu.index, uuid=gpu.uuid, name=gpu.name, serial=gpu.serial,
            pci_bus_id=None if ids is None else ids.sysfs,
            pci_bus_id_nvml=None if ids is None else ids.nvml,
            pci_bus_id_xid=None if ids is None else ids.xid,
            state="lost", lost_at=gpu.lost_at, lost_reason=gpu.lost_reason,
        )

    @staticmethod
    def _lost_event(gpu: _Gpu) -> EventDraft:
        ids = gpu.ids
        where = f" ({ids.sysfs})" if ids is not None else ""
        return EventDraft(
            kind="gpu_lost",
            severity="critical",
            subject=f"gpu:{gpu.index}",
            message=f"GPU {gpu.index}{where} lost: {gpu.lost_reason}",
            data={
                "gpu_index": gpu.index, "uuid": gpu.uuid, "name": gpu.name, "reason": gpu.lost_reason,
                "pci_bus_id": None if ids is None else ids.sysfs,
                "pci_bus_id_nvml": None if ids is None else ids.nvml,
                "pci_bus_id_xid": None if ids is None else ids.xid,
            },
            at=gpu.lost_at,
        )

    def _read_kernel_log(self) -> None:
        """Note Xid 79 / fallen-off-the-bus records for the lost-GPU check."""
        if not self._kmsg.is_open:
            if self._kmsg_missing:
                return
            try:
                self._kmsg.open(from_end=True)
            except KmsgUnavailable:
                # The kernel log is one signal of four; without it the others still work.
                self._kmsg_missing = True
                return
        for raw in self._kmsg.read_records():
            record = parse_kmsg_record(raw.decode("utf-8", "replace"))
            if record is None:
                continue
            match = self._matcher.feed(record)
            if match is None:
                continue
            if match.kind == "gpu_off_bus" or (match.xid is not None and match.xid.xid == XID_FALLEN_OFF_BUS):
                what = "Xid 79" if match.kind == "xid" else "fallen off the bus"
                self._kernel_lost.setdefault(match.pci_bus_id, f"kernel: {what}")

    # -- Xid events -------------------------------------------------------------------

    def start(self, push: PushFn) -> None:
        """Start the thread that waits on NVML's event set for Xid critical errors (`XidEvents`)."""
        self._xid.start(push)

    def status_note(self) -> str | None:
        """What the collector's status says while its readings are fine (see `base.status_note`):
        Xid events not coming through NVML (`XidEvents.note`)."""
        return self._xid.note()

    def close(self) -> None:
        """Stop the event thread, close the kernel log and shut NVML down."""
        self._xid.stop()
        self._kmsg.close()
        self.nvml.close()


def make_gpu_collector(ctx: CollectorContext) -> GpuCollector:
    """Registry factory: binds NVML to this agent's root (see `rigmon.hw.nvml`)."""
    gpu = ctx.config.gpu
    return GpuCollector(open_nvml(ctx.root, gpu.nvml_timeout_s), ctx.root, ctx.clock, kmsg_path=gpu.kmsg_path,
                        event_wait_s=gpu.event_wait_s, hung_after_s=gpu.nvml_timeout_s)
