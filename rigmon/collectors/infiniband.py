"""RDMA ports (InfiniBand, RoCE, iWARP) from /sys/class/infiniband: state, rate, counters and their rates.

Layout (drivers/infiniband/core/sysfs.c): ``<dev>/ports/<n>/{state,phys_state,rate,link_layer}``
(``4: ACTIVE``, ``5: LinkUp``, ``100 Gb/sec (4X EDR)``, ``InfiniBand`` or ``Ethernet``), the
standard PMA counters in ``counters/`` (absent on iWARP devices such as irdma, and some refuse
reads on RoCE ports) and driver counters in ``hw_counters/``; the port's network interface from
``gid_attrs/ndevs/0`` or the device's ``device/net/`` (`rigmon.collectors.infiniband_netdev`).
Everything here is pure apart from the reads; a file that vanishes or refuses a read is "not
present", never a crash.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from rigmon.clock import Clock
from rigmon.collectors.base import CollectorContext, EventDraft, NoData, PolledCollector
from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.infiniband_events import ACTIVE, port_events, saturated_event
from rigmon.collectors.infiniband_netdev import read_port_netdev
from rigmon.collectors.infiniband_saturation import COUNTERS, SaturationWatch
from rigmon.collectors.sysfs_values import parse_int
from rigmon.hw.names import text_name
from rigmon.hw.root import HostRoot
from rigmon.lazy_re import lazy_compile
from rigmon.rates import CounterRates
from rigmon.schema import InfinibandPortReading, RdmaHwCounterReading, RdmaLinkState

CLASS = "/sys/class/infiniband"

#: Counters whose sum is ``errors_total`` (the "errors rising" alarm watches it).
ERROR_FILES = ("symbol_error", "link_error_recovery", "port_rcv_errors", "port_xmit_discards",
               "local_link_integrity_errors", "excessive_buffer_overrun_errors", "port_rcv_remote_physical_errors")
#: Counter fields that get a rate, by the rate's field.
RATE_FIELDS = {
    "port_data_received_bytes_per_s": "port_data_received_bytes_total",
    "port_data_transmitted_bytes_per_s": "port_data_transmitted_bytes_total",
    "port_packets_received_per_s": "port_packets_received_total",
    "port_packets_transmitted_per_s": "port_packets_transmitted_total",
    "errors_per_s": "errors_total",
}
#: hw_counters entries that are settings, not counters (mlx5 ``lifespan`` is in ms).
HW_NOT_COUNTERS = frozenset({"lifespan"})
#: At most this many hw_counters per port (irdma has ~70; keep frames bounded).
MAX_HW_COUNTERS = 128
#: IB port states with a physical link but no logical one (the subnet manager did not configure it).
INIT_ARMED = (2, 3)

_STATE = lazy_compile(r"^\s*(\d{1,3})\s*:\s*(\S.*?)\s*$")
_RATE = lazy_compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec\b")

ExpectedSource = Literal["config", "best_seen"]


def parse_state(text: str | None) -> tuple[int | None, str | None]:
    """``"4: ACTIVE"`` -> ``(4, "ACTIVE")``; ``(None, None)`` when absent or malformed."""
    if text is None or (m := _STATE.match(text)) is None:
        return None, None
    return int(m[1]), m[2]


def parse_rate(text: str | None) -> float | None:
    """``"100 Gb/sec (4X EDR)"`` -> 100.0, ``"2.5 Gb/sec (1X SDR)"`` -> 2.5; ``None`` otherwise.

    A figure of more digits than a float holds (a garbled read) reads as infinite: no rate, since
    it would stay the best rate seen, so the expected one, and every later rate below it.
    """
    if text is None or (m := _RATE.match(text)) is None:
        return None
    rate = float(m[1])
    return rate if math.isfinite(rate) else None


def parse_counter(text: str | None) -> int | None:
    """A counter file's value (decimal, non-negative); ``None`` when absent or not a number."""
    value = parse_int(text)
    return value if value is not None and value >= 0 else None


def judge_port(state_id: int | None, phys_state_id: int | None, rate_gbps: float | None,
               expected_gbps: float | None, was_active: bool, configured: bool) -> tuple[RdmaLinkState, str | None]:
    """The port's link state and, for ``degraded`` and ``down``, why."""
    if state_id is None:
        return "unknown", None
    if state_id == ACTIVE:
        if rate_gbps is not None and expected_gbps is not None and rate_gbps < expected_gbps - 1e-6:
            return "degraded", f"{rate_gbps:g} Gb/s below expected {expected_gbps:g} Gb/s"
        return "ok", None
    if state_id in INIT_ARMED and phys_state_id == 5:
        return "down", "physical link up but the port is not active (no subnet manager?)"
    if was_active or configured:
        return "down", "port not active"
    return "unused", None


class RawPort(msgspec.Struct, frozen=True, gc=False):
    """What one read of a port found, before it is judged and given rates.

    ``device`` and the names of ``hw_counters`` are as records carry them (`PortFiles`).
    """

    device: str
    port: int
    link_layer: str | None
    state_id: int | None
    state: str | None
    phys_state_id: int | None
    phys_state: str | None
    rate_text: str | None
    counters: dict[str, int]
    unreadable: tuple[str, ...]
    hw_counters: dict[str, int]


@dataclass(frozen=True, slots=True)
class PortFiles:
    """What a port's driver defines: which standard counters and hw_counters it has, and its
    link layer. Read with the port's facts (see `DeviceFacts`), not on every read.

    A device or counter is named by its directory entry, in any bytes: ``hw_counters`` are the
    file names (for the paths), ``hw_names`` and ``device`` the names as records carry them
    (`rigmon.hw.names.text_name`), so that two names that differ only in bytes that are not
    UTF-8 stay two series.
    """

    counters: tuple[str, ...]
    hw_counters: tuple[str, ...]
    link_layer: str | None
    device: str
    hw_names: tuple[str, ...]
    netdev: str | None = None
    """The port's network interface (`read_port_netdev`); ``None`` when none is found."""


def read_port_files(root: HostRoot, device: str, port: int) -> PortFiles:
    """The files a port has (see `PortFiles`)."""
    base = f"{CLASS}/{device}/ports/{port}"
    present = set(root.listdir(f"{base}/counters"))
    hw_counters = tuple(n for n in root.listdir(f"{base}/hw_counters")[:MAX_HW_COUNTERS] if n not in HW_NOT_COUNTERS)
    return PortFiles(
        counters=tuple(n for n in COUNTERS if n in present),
        hw_counters=hw_counters,
        link_layer=_read(root, f"{base}/link_layer")[0],
        device=text_name(device),
        hw_names=tuple(text_name(n) for n in hw_counters),
        netdev=read_port_netdev(root, device, port),
    )


def _read(root: HostRoot, rel: str) -> tuple[str | None, bool]:
    """Text of an attribute and whether it failed although the file is there."""
    try:
        text = root.read_attr(rel)
    except OSError:
        text = None
    if text is None:
        return None, root.exists(rel)
    return text, False


def read_port(root: HostRoot, device: str, port: int, files: PortFiles | None = None) -> RawPort | None:
    """Read one port's files; ``None`` when the port is gone.

    Args:
        files: the port's files when known (its facts); else found by this read.
    """
    base = f"{CLASS}/{device}/ports/{port}"

    def attr(name: str) -> str | None:
        return _read(root, f"{base}/{name}")[0]

    state_text = attr("state")
    if state_text is None and not root.exists(base):
        return None
    state_id, state = parse_state(state_text)
    phys_id, phys = parse_state(attr("phys_state"))
    if files is None:
        files = read_port_files(root, device, port)
    counters: dict[str, int] = {}
    unreadable: list[str] = []
    for name in files.counters:
        text, failed = _read(root, f"{base}/counters/{name}")
        value = parse_counter(text)
        if value is not None:
            counters[name] = value
        elif failed or text is not None:
            unreadable.append(name)
    hw: dict[str, int] = {}
    for name, text in zip(files.hw_counters, files.hw_names, strict=True):
        value = parse_counter(_read(root, f"{base}/hw_counters/{name}")[0])
        if value is not None:
            hw[text] = value
    return RawPort(device=files.device, port=port, link_layer=files.link_layer, state_id=state_id, state=state,
                   phys_state_id=phys_id, phys_state=phys, rate_text=attr("rate") or None, counters=counters,
                   unreadable=tuple(unreadable), hw_counters=hw)


def error_parts(counters: Mapping[str, int], parts: frozenset[str]) -> frozenset[str]:
    """The error counters in a port's ``errors_total`` after a read, ``parts`` those in it before.

    On the first read that reads any, every error counter read is in it. Later, one read for the
    first time (it refused the reads before) joins only while it reads 0, so that joining never
    raises the sum: its whole count added at once would read as errors rising. A RoCE port
    that always refuses an IB-only counter keeps a sum of the others.
    """
    read = frozenset(n for n in ERROR_FILES if n in counters)
    if not parts:
        return read
    return parts | {n for n in read - parts if counters[n] == 0}


def error_sum(counters: Mapping[str, int], parts: frozenset[str]) -> int | None:
    """Sum of the error counters ``parts`` (see `error_parts`); ``None`` when one of them was not
    read: the sum of fewer would go down, which reads as a counter reset (and the errors it
    held as new ones when the counter is read again)."""
    if not parts or not parts <= counters.keys():
        return None
    return sum(counters[n] for n in parts)


class InfinibandCollector(PolledCollector):
    """Every port of every RDMA device, with rates, expected-rate judgement and change events.

    Args:
        root: the machine's files.
        clock: monotonic time for rates, wall time on events.
        expected_gbps: configured rate per port (``mlx5_0/1``) or device (``mlx5_0``).
    """

    name = "infiniband"

    def __init__(self, root: HostRoot, clock: Clock, expected_gbps: Mapping[str, float] | None = None) -> None:
        self.root = root
        self.clock = clock
        self.expected_gbps = dict(expected_gbps or {})
        self._lock = threading.Lock()
        self._rates = CounterRates()
        self._best: dict[str, float] = {}
        self._was_active: set[str] = set()
        self._info: dict[str, tuple[str | None, str | None, str | None]] = {}
        self._seen: dict[str, InfinibandPortReading] | None = None
        #: Per port, its rate at its last read while ACTIVE (rate changes are judged against it).
        self._active_rate: dict[str, float] = {}
        #: Per port, its last read whose ``state`` could be read (state changes are judged against it).
        self._state_read: dict[str, InfinibandPortReading] = {}
        #: Per port, its ``link_downed`` counter at its last read that could read it (downs are counted from it).
        self._downed_read: dict[str, int] = {}
        self._saturation = SaturationWatch()
        #: This read's counters by port, for `SaturationEvents`.
        self._counters: dict[str, dict[str, int]] = {}
        self._used: set[Hashable] = set()
        self._files: DeviceFacts[tuple[str, int], PortFiles] = DeviceFacts()
        #: Per port, the error counters its ``errors_total`` sums (see `error_parts`).
        self._error_parts: dict[str, frozenset[str]] = {}
        # A device's ports are made with it and go with it: listed when it appears, when one of
        # its ports is gone (a driver reload), and every `device_facts.REFRESH_EVERY` reads.
        self._ports: DeviceFacts[str, tuple[int, ...]] = DeviceFacts()
        #: Per port, the network interface its facts last named: kept while a read of them finds none
        #: (a RoCE port's GID table is refilled after a reset) and forgotten with the port.
        self._netdevs: dict[str, str] = {}

    def collect(self) -> Sequence[object]:
        with self._lock:
            devices = self.root.listdir(CLASS)
            if not devices and self._seen is None:
                raise NoData("no RDMA devices")
            now = self.clock.monotonic()
            self._used = set()
            self._counters = {}
            readings: list[InfinibandPortReading] = []
            self._ports.begin(devices)
            ports: list[tuple[str, int]] = []
            for device in devices:
                numbers = self._ports.get(device, self._port_numbers)
                if not numbers:
                    # Not registered yet, or going: listed again at the next read.
                    self._ports.forget(device)
                ports.extend((device, port) for port in numbers)
            self._files.begin(ports)
            for device, port in ports:
                files = self._files.get((device, port), self._port_files)
                raw = read_port(self.root, device, port, files)
                if raw is None:
                    self._files.forget((device, port))
                    self._ports.forget(device)
                    continue
                if raw.state is None:
                    # Unreadable state (a driver reset under way): its files are looked up again.
                    self._files.forget((device, port))
                readings.append(self._judge(raw, self._device_info(device), now, self._netdev(raw, files)))
            self._rates.forget_missing(self._used)
            present = {r.name for r in readings}
            self._netdevs = {key: name for key, name in self._netdevs.items() if key in present}
            self._error_parts = {key: parts for key, parts in self._error_parts.items() if key in present}
            for gone in set(self._info) - set(devices):
                del self._info[gone]
            records: list[object] = list(self._events(readings))
            records.extend(readings)
            return records

    def _port_numbers(self, device: str) -> tuple[int, ...]:
        return tuple(int(name) for name in self.root.listdir(f"{CLASS}/{device}/ports") if name.isdigit())

    def _port_files(self, key: tuple[str, int]) -> PortFiles:
        return read_port_files(self.root, *key)

    def _netdev(self, raw: RawPort, files: PortFiles) -> str | None:
        key = f"{raw.device}/{raw.port}"
        if files.netdev is not None:
            self._netdevs[key] = files.netdev
        return self._netdevs.get(key)

    def _device_info(self, device: str) -> tuple[str | None, str | None, str | None]:
        info = self._info.get(device)
        if info is None:
            base = f"{CLASS}/{device}"
            info = (_read(self.root, f"{base}/hca_type")[0] or None, _read(self.root, f"{base}/board_id")[0] or None,
                    _read(self.root, f"{base}/fw_ver")[0] or None)
            self._info[device] = info
        return info

    def _judge(self, raw: RawPort, info: tuple[str | None, str | None, str | None], now: float,
               netdev: str | None = None) -> InfinibandPortReading:
        key = f"{raw.device}/{raw.port}"
        self._counters[key] = raw.counters
        rate = parse_rate(raw.rate_text)
        configured = self.expected_gbps.get(key, self.expected_gbps.get(raw.device))
        if raw.state_id == ACTIVE:
            self._was_active.add(key)
            if rate is not None:
                self._best[key] = max(self._best.get(key, 0.0), rate)
        expected: float | None
        source: ExpectedSource | None
        if configured is not None:
            expected, source = configured, "config"
        elif key in self._best:
            expected, source = self._best[key], "best_seen"
        else:
            expected, source = None, None
        link_state, reason = judge_port(raw.state_id, raw.phys_state_id, rate, expected,
                                        key in self._was_active, configured is not None)
        fields: dict[str, int | None] = {field: None for field, _ in COUNTERS.values()}
        for name, value in raw.counters.items():
            field, scale = COUNTERS[name]
            fields[field] = value * scale
        parts = self._error_parts[key] = error_parts(raw.counters, self._error_parts.get(key, frozenset()))
        fields["errors_total"] = error_sum(raw.counters, parts)
        rates: dict[str, float | None] = {}
        for rate_field, total_field in RATE_FIELDS.items():
            total = fields[total_field]
            rates[rate_field] = None if total is None else self._rate((key, rate_field), total, now)
        hw = tuple(RdmaHwCounterReading(name, count, self._rate((key, "hw", name), count, now))
                   for name, count in sorted(raw.hw_counters.items()))
        hca_type, board_id, fw = info
        return InfinibandPortReading(
            name=key, device=raw.device, port=raw.port, link_layer=raw.link_layer, state=raw.state, state_id=raw.state_id,
            phys_state=raw.phys_state, physical_state_id=raw.phys_state_id, rate_gbps=rate,
            rate_text=raw.rate_text, expected_gbps=expected, expected_source=source, link_state=link_state,
            degraded_reason=reason, hca_type=hca_type, board_id=board_id, fw_version=fw,
            unreadable_counters=raw.unreadable, hw_counters=hw, netdev=netdev, **fields, **rates,  # type: ignore[arg-type]
        )

    def _rate(self, key: tuple[str, ...], value: int, now: float) -> float | None:
        self._used.add(key)
        return self._rates.rate(key, value, now)

    def _events(self, readings: list[InfinibandPortReading]) -> list[EventDraft]:
        now = {f"{r.device}/{r.port}": r for r in readings}
        seen, self._seen = self._seen, now
        active_rates = {key: rate for key, rate in self._active_rate.items() if key in now}
        self._active_rate = dict(active_rates)
        self._active_rate.update((key, r.rate_gbps) for key, r in now.items()
                                 if r.state_id == ACTIVE and r.rate_gbps is not None)
        state_reads = {key: r for key, r in self._state_read.items() if key in now}
        self._state_read = dict(state_reads)
        self._state_read.update((key, r) for key, r in now.items() if r.state_id is not None)
        downed_reads = {key: n for key, n in self._downed_read.items() if key in now}
        self._downed_read = dict(downed_reads)
        self._downed_read.update((key, r.link_downed_total) for key, r in now.items()
                                 if r.link_downed_total is not None)
        at = self.clock.time()
        self._saturation.forget_missing(set(now))
        saturation = [saturated_event(r, name, at) for key, r in now.items()
                      for name in self._saturation.newly(key, self._counters.get(key, {}))]
        return port_events(seen, now, at, active_rates, state_reads, downed_reads) + saturation


def make_infiniband_collector(ctx: CollectorContext) -> InfinibandCollector:
    """Registry factory."""
    return InfinibandCollector(ctx.root, ctx.clock, ctx.config.storage.infiniband_expected_gbps)
