"""Thunderbolt/USB4 collector: routers, XDomain hosts and retimers, link speed x lanes against the expected rate."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from rigmon.clock import Clock
from rigmon.collectors.base import (
    CollectorContext,
    NoData,
    PolledCollector,
    PushFn,
)
from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.sysfs_values import parse_int
from rigmon.collectors.thunderbolt_events import TbLinkEvents
from rigmon.collectors.udev_rescan import UdevRescan
from rigmon.hw.root import HostRoot
from rigmon.hw.udev import UdevEvent, UdevSource, open_udev_source
from rigmon.lazy_re import lazy_compile
from rigmon.schema import LinkState, ThunderboltDeviceReading, ThunderboltKind

DEVICES = "/sys/bus/thunderbolt/devices"
#: Nominal bandwidth per direction (lane rate x lanes) by router generation: Thunderbolt 3
#: and USB4 run two bonded 20 Gb/s lanes; Thunderbolt 1/2 two 10 Gb/s lanes.
NOMINAL_GBPS_BY_GENERATION = {1: 20.0, 2: 20.0, 3: 40.0, 4: 40.0}
#: USB4 v2 asymmetric links use three lanes one way and one the other; not a fault.
ASYMMETRIC_LANES = frozenset({(3, 1), (1, 3)})
#: Lanes a nominal link bonds (Thunderbolt 1-3, USB4 v1: two).
NOMINAL_LANES = 2
#: Attributes only routers have (drivers/thunderbolt/switch.c); an XDomain peer has none.
ROUTER_ONLY_ATTRS = ("authorized", "generation", "boot", "nvm_version", "nvm_authenticate", "key")
#: The link files a device router or XDomain peer reports its link by (kernel 5.5+ / 5.11+).
LINK_FILES = ("rx_speed", "tx_speed", "rx_lanes", "tx_lanes")
#: Characters of a garbled link file quoted in a reason.
GARBLED_SHOWN = 24

# 0-1, 0-301 (daisy chain), 1-0 (host router of domain 1)
_ROUTER = lazy_compile(r"^(?P<domain>\d+)-(?P<route>[0-9a-f]+)$")
# 0-0:1.1 (retimer on port 1 of router 0-0), 0-1:3.1
_RETIMER = lazy_compile(r"^(?P<domain>\d+)-(?P<route>[0-9a-f]+):\d+\.\d+$")

ExpectedSource = Literal["config", "generation", "best_seen"]


def parse_tb_speed(text: str | None) -> float | None:
    """Per-lane speed from ``rx_speed``/``tx_speed`` (``"20.0 Gb/s"`` -> 20.0); ``None`` otherwise.

    The kernel prints a lane rate as an unsigned number (``"%u.0 Gb/s"``): a negative,
    infinite or not-a-number figure is a garbled read, and one ``inf`` would stay the best
    speed seen, and so the expected one, for the agent's life.
    """
    if text is None:
        return None
    parts = text.split()
    if len(parts) != 2 or parts[1] != "Gb/s":
        return None
    try:
        speed = float(parts[0])
    except ValueError:
        return None
    return speed if math.isfinite(speed) and speed >= 0.0 else None


def parse_lanes(text: str | None) -> int | None:
    """Lane count from ``rx_lanes``/``tx_lanes`` (1, 2, or 3 for USB4 v2 asymmetric)."""
    lanes = parse_int(text)
    return lanes if lanes is not None and lanes > 0 else None


def classify(name: str, is_xdomain: bool) -> tuple[ThunderboltKind, int] | None:
    """Kind and domain of a bus entry; ``None`` for domains, services and anything else."""
    if (m := _RETIMER.match(name)) is not None:
        return "retimer", int(m["domain"])
    if (m := _ROUTER.match(name)) is not None:
        if m["route"] == "0":
            return "host", int(m["domain"])
        return ("xdomain" if is_xdomain else "device"), int(m["domain"])
    return None


def link_gbps(rx_gbps: float | None, tx_gbps: float | None, rx_lanes: int | None, tx_lanes: int | None
              ) -> float | None:
    """Bandwidth per direction that a link is judged by.

    The slower direction for a symmetric link; the mean of both for an asymmetric USB4 v2
    link (3 lanes one way, 1 the other), whose total equals a symmetric link's.
    """
    if rx_gbps is None or tx_gbps is None:
        return rx_gbps if tx_gbps is None else tx_gbps
    if (rx_lanes, tx_lanes) in ASYMMETRIC_LANES:
        return (rx_gbps + tx_gbps) / 2.0
    return min(rx_gbps, tx_gbps)


def expected_link(generation: int | None, configured: float | None, best_seen: float | None
                  ) -> tuple[float | None, ExpectedSource | None]:
    """The bandwidth per direction a link should have, and where that figure comes from.

    Configured wins; otherwise the higher of the generation's nominal rate and the best
    seen since the agent started (so a link that comes up slow at boot is flagged, and a
    faster link than nominal, e.g. USB4 v2 at 40 Gb/s a lane, sets its own bar).
    """
    if configured is not None:
        return configured, "config"
    nominal = NOMINAL_GBPS_BY_GENERATION.get(generation) if generation is not None else None
    if best_seen is not None and (nominal is None or best_seen > nominal):
        return best_seen, "best_seen"
    if nominal is not None:
        return nominal, "generation"
    return None, None


def judge_link(rx_gbps: float | None, tx_gbps: float | None, rx_lanes: int | None, tx_lanes: int | None,
               expected: float | None) -> tuple[LinkState, str | None]:
    """``degraded`` (with the reason) when rx and tx differ or the link is below ``expected``."""
    if rx_gbps is None and tx_gbps is None:
        return "unknown", None
    if rx_gbps != tx_gbps and (rx_lanes, tx_lanes) not in ASYMMETRIC_LANES:
        return "degraded", f"rx {_fmt(rx_gbps)} != tx {_fmt(tx_gbps)}"
    bw = link_gbps(rx_gbps, tx_gbps, rx_lanes, tx_lanes)
    if expected is not None and bw is not None and bw < expected - 1e-6:
        return "degraded", f"{_fmt(bw)} below expected {_fmt(expected)}"
    return "ok", None


def judge_lane_speed(rx_speed: float | None, tx_speed: float | None, expected: float | None,
                     missing: tuple[str, ...]) -> tuple[LinkState, str | None, str | None]:
    """Judge a link whose lane count is unknown on what is known: its speed per lane.

    The expected bandwidth per direction spreads over the nominal two lanes; a lane slower
    than that share is ``degraded`` whatever the count. A lane at full speed could still
    be one lane of two, so that is ``unknown``.

    Returns:
        State, the degraded reason and the unknown reason (each naming the missing files).
    """
    what = ", ".join(missing)
    speeds = [s for s in (rx_speed, tx_speed) if s is not None]
    if not speeds:
        return "unknown", None, f"no {what}"
    if expected is None:
        return "unknown", None, f"no {what}, and no expected rate to compare with"
    per_lane = expected / NOMINAL_LANES
    slowest = min(speeds)
    if slowest < per_lane - 1e-6:
        return "degraded", f"{_fmt(slowest)} a lane below {_fmt(per_lane)}; lane count unknown (no {what})", None
    return "unknown", None, f"{_fmt(slowest)} a lane as expected, but no {what}: a single-lane link would not show"


def _authorized(text: str | None) -> bool | None:
    """``authorized``: 0 no, 1 yes, 2 yes with a key (secure level); ``None`` when the file is
    absent, empty or holds no number: not present, never a de-authorization."""
    value = parse_int(text)
    return None if value is None or value < 0 else value > 0


def _unusable(name: str, text: str | None) -> str:
    """A link file without a usable value, as a reason names it: ``rx_lanes`` when absent or
    unreadable, ``rx_lanes (holds 'x2')`` when it holds no number the kernel would print."""
    if text is None:
        return name
    shown = text if len(text) <= GARBLED_SHOWN else text[:GARBLED_SHOWN] + "..."
    return f"{name} (holds {shown!r})"


def _fmt(gbps: float | None) -> str:
    return "?" if gbps is None else f"{gbps:g} Gb/s"


def _speed_lanes(speed: float | None, lanes: int | None) -> float | None:
    return None if speed is None or lanes is None else speed * lanes


class _Raw(msgspec.Struct, frozen=True, gc=False):
    """What one read of a bus entry found, before it is judged."""

    name: str
    kind: ThunderboltKind
    domain: int
    vendor: str | None
    device_name: str | None
    generation: int | None
    authorized: bool | None
    unique_id: str | None
    nvm_version: str | None
    rx_speed: float | None
    tx_speed: float | None
    rx_lanes: int | None
    tx_lanes: int | None
    missing: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EntryFacts:
    """What does not change about a bus entry while it is plugged in (read once, see `DeviceFacts`).

    ``kind`` is ``None`` for entries that are not routers, hosts or retimers.
    """

    kind: ThunderboltKind | None
    domain: int
    vendor: str | None
    device_name: str | None
    generation: int | None
    unique_id: str | None


class ThunderboltCollector(PolledCollector):
    """Every Thunderbolt/USB4 router, XDomain host and retimer, with link judgement and change events.

    Kind, vendor and device names, generation and unique id are read once per entry (see
    `DeviceFacts`): again when the entries change, on a udev event and every
    `device_facts.REFRESH_EVERY` reads; link speed, lanes, authorization and NVM version
    every time (a host router has no link files: the kernel shows them only for routers with
    an upstream link, so they are not looked for).

    Args:
        root: the machine's files.
        clock: wall time stamped on change events.
        expected_gbps: configured bandwidth per direction, by router name or unique_id.
        events: udev source for immediate re-reads (``None``: polling only).
    """

    name = "thunderbolt"

    def __init__(self, root: HostRoot, clock: Clock, expected_gbps: Mapping[str, float] | None = None,
                 events: UdevSource | None = None) -> None:
        self.root = root
        self.clock = clock
        self.expected_gbps = dict(expected_gbps or {})
        self._lock = threading.Lock()
        self._best: dict[str, float] = {}
        self._events = TbLinkEvents()
        self._facts: DeviceFacts[str, EntryFacts | None] = DeviceFacts()
        # A router's NVM version changes only with a firmware upgrade, after which the router
        # restarts and comes back as a new device: read like the facts, but kept apart since it
        # is unreadable for a while (safe mode, NVM not read yet) and then read again each time.
        self._nvm: DeviceFacts[str, str | None] = DeviceFacts()
        self._rescan = UdevRescan(events, ("thunderbolt",), self._on_udev, "rigmon-thunderbolt-udev")

    def start(self, push: PushFn) -> None:
        self._rescan.start(push)

    def close(self) -> None:
        self._rescan.close()

    def _on_udev(self, events: Sequence[UdevEvent]) -> Sequence[object]:
        with self._lock:
            self._facts.invalidate()
            self._nvm.invalidate()
        return self._collect(frozenset(e.sys_name for e in events if e.action == "remove"))

    def collect(self) -> Sequence[object]:
        return self._collect(frozenset())

    def _collect(self, removed: frozenset[str]) -> Sequence[object]:
        """Read the bus; ``removed``: the entries udev said were removed since the last read."""
        with self._lock:
            entries = self.root.listdir(DEVICES)
            if not entries and not self._events.started:
                raise NoData("no Thunderbolt/USB4 bus")
            self._facts.begin(entries)
            self._nvm.begin(entries)
            raws = [r for r in (self._read(e) for e in entries) if r is not None]
            host_gen = {r.domain: r.generation for r in raws if r.kind == "host"}
            readings = [self._judge(r, host_gen.get(r.domain)) for r in raws]
            records: list[object] = list(self._events.events(readings, self.clock.time(), removed))
            records.extend(readings)
            return records

    def _read_facts(self, name: str) -> EntryFacts | None:
        base = f"{DEVICES}/{name}"
        attr = self.root.read_attr
        uevent = attr(f"{base}/uevent") or ""
        if "DEVTYPE=" in uevent:
            is_xdomain = "DEVTYPE=thunderbolt_xdomain" in uevent
        else:
            # No uevent (a copied tree, a snapshot): the attributes tell. maxhopid exists only
            # on XDomains (5.15+); before it, an XDomain is an entry with a unique_id and none
            # of the attributes every router has.
            is_xdomain = self.root.exists(f"{base}/maxhopid") or (
                self.root.exists(f"{base}/unique_id")
                and not any(self.root.exists(f"{base}/{a}") for a in ROUTER_ONLY_ATTRS))
        kind_domain = classify(name, is_xdomain)
        if kind_domain is None:
            return EntryFacts(kind=None, domain=0, vendor=None, device_name=None, generation=None, unique_id=None)
        unique_id = attr(f"{base}/unique_id")
        vendor = attr(f"{base}/vendor_name") or attr(f"{base}/vendor")
        if unique_id is None and vendor is None and not self.root.exists(base):
            # Unplugged between listdir and the reads.
            return None
        generation = attr(f"{base}/generation")
        return EntryFacts(
            kind=kind_domain[0],
            domain=kind_domain[1],
            vendor=vendor,
            device_name=attr(f"{base}/device_name") or attr(f"{base}/device"),
            generation=parse_int(generation) if generation and generation.isdigit() else None,
            unique_id=unique_id,
        )

    def _read(self, name: str) -> _Raw | None:
        facts = self._facts.get(name, self._read_facts)
        if facts is None:
            self._facts.forget(name)
            return None
        if facts.kind is None:
            return None
        base = f"{DEVICES}/{name}"
        attr = self.root.read_attr
        authorized = attr(f"{base}/authorized")
        # nvm_version fails with ENODATA in safe mode and EAGAIN before the NVM is read.
        nvm_version = self._nvm.get(name, lambda _: attr(f"{base}/nvm_version"))
        if nvm_version is None:
            self._nvm.forget(name)
        if facts.kind == "host":
            # The kernel hides the link files of a host router (route 0, no upstream link):
            # four failed opens a tick less per domain.
            rx_speed = tx_speed = rx_lanes = tx_lanes = None
        else:
            rx_speed, tx_speed = attr(f"{base}/rx_speed"), attr(f"{base}/tx_speed")
            rx_lanes, tx_lanes = attr(f"{base}/rx_lanes"), attr(f"{base}/tx_lanes")
        if authorized is None and rx_speed is None and tx_speed is None and not self.root.exists(base):
            # Unplugged since its facts were read.
            self._facts.forget(name)
            self._nvm.forget(name)
            return None
        texts = (rx_speed, tx_speed, rx_lanes, tx_lanes)
        values = (parse_tb_speed(rx_speed), parse_tb_speed(tx_speed), parse_lanes(rx_lanes), parse_lanes(tx_lanes))
        return _Raw(
            name=name,
            kind=facts.kind,
            domain=facts.domain,
            vendor=facts.vendor,
            device_name=facts.device_name,
            generation=facts.generation,
            authorized=_authorized(authorized),
            unique_id=facts.unique_id,
            nvm_version=nvm_version,
            rx_speed=values[0],
            tx_speed=values[1],
            rx_lanes=values[2],
            tx_lanes=values[3],
            missing=tuple(_unusable(n, t) for n, t, v in zip(LINK_FILES, texts, values, strict=True) if v is None),
        )

    def _judge(self, r: _Raw, host_generation: int | None) -> ThunderboltDeviceReading:
        """Judge a link; an XDomain peer reports no generation, so its host router's stands in."""
        rx = _speed_lanes(r.rx_speed, r.rx_lanes)
        tx = _speed_lanes(r.tx_speed, r.tx_lanes)
        expected: float | None = None
        source: ExpectedSource | None = None
        state: LinkState = "unknown"
        reason = None
        unknown_reason = None
        if r.kind in ("device", "xdomain"):
            key = r.unique_id or r.name
            configured = self.expected_gbps.get(r.name)
            if configured is None and r.unique_id:
                configured = self.expected_gbps.get(r.unique_id)
            generation = r.generation if r.generation is not None or r.kind != "xdomain" else host_generation
            if rx is None or tx is None:
                # Speeds without lane counts (the lane files unreadable), no link files at all
                # (kernels before 5.5), or one direction's file unreadable or garbled: judge what
                # is known, say what is not (an unknown direction is no rx/tx mismatch).
                if r.rx_speed is not None or r.tx_speed is not None:
                    expected, source = expected_link(generation, configured, self._best.get(key))
                missing = r.missing if r.missing else LINK_FILES
                state, reason, unknown_reason = judge_lane_speed(r.rx_speed, r.tx_speed, expected, missing)
            else:
                bw = link_gbps(rx, tx, r.rx_lanes, r.tx_lanes)
                if bw is not None:
                    self._best[key] = max(self._best.get(key, 0.0), bw)
                expected, source = expected_link(generation, configured, self._best.get(key))
                state, reason = judge_link(rx, tx, r.rx_lanes, r.tx_lanes, expected)
        return ThunderboltDeviceReading(
            name=r.name, kind=r.kind, domain=r.domain, vendor=r.vendor, device_name=r.device_name,
            generation=r.generation, authorized=r.authorized, unique_id=r.unique_id, nvm_version=r.nvm_version,
            rx_speed_gbps=r.rx_speed, tx_speed_gbps=r.tx_speed, rx_lanes=r.rx_lanes, tx_lanes=r.tx_lanes,
            rx_gbps=rx, tx_gbps=tx, expected_gbps=expected, expected_source=source,
            link_state=state, degraded_reason=reason, unknown_reason=unknown_reason,
        )


def make_thunderbolt_collector(ctx: CollectorContext) -> ThunderboltCollector:
    """Registry factory."""
    cfg = ctx.config.storage
    events = open_udev_source(("thunderbolt",)) if cfg.udev and ctx.root.is_real_root else None
    return ThunderboltCollector(ctx.root, ctx.clock, cfg.thunderbolt_expected_gbps, events)
