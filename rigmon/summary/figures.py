"""Key figures of one node by source: one small function per source, each reading one frame's readings.

Each ``*_figures`` function returns its source's part of a `rigmon.summary.node_summary.NodeSummary`,
``None`` where the node does not report it. `detail_values` names the per-device series (each
GPU's power, each array's throughput...) that the node screen draws as trends.

The figures are frozen msgspec Structs (`rigmon.schema.Record`, ``gc=False``): the agent builds
them for every frame it sends on the summary stream, the dashboard decodes them for every node
it follows by summaries, every second. Untracked by the cycle collector because they cannot be
part of a cycle: frozen, they hold only numbers, strings and other frozen figures (a
`PathFigures` its `PathCell` tuple), all of which existed before them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rigmon.schema import (
    GuardReading,
    NetInterfaceReading,
    PeerPathReading,
    PeerPathState,
    Readings,
    Record,
    raid_unknown,
)

#: Rail minimum below which the rail is low (the default ``psu_rail_low_warning`` rule).
RAIL_WARN_VOLTS = 11.7
#: Rail minimum below which GPUs fall off the bus (the default ``psu_rail_low_critical`` rule).
RAIL_CRITICAL_VOLTS = 11.5
#: Network interface kinds that are links between machines (counted in `link_figures`).
LINK_NIC_KINDS = frozenset({"thunderbolt-net", "ethernet", "infiniband"})


class HostFigures(Record, frozen=True):
    """Host part of a summary."""

    cpu_pct: float | None = None
    net_bytes_per_s: float | None = None


class GpuFigures(Record, frozen=True):
    """GPU part of a summary."""

    power_w: float | None = None
    present: int | None = None
    expected: int | None = None
    lost: int | None = None


class LinkFigures(Record, frozen=True):
    """Thunderbolt/USB4 and network link part of a summary.

    ``slow``: links up but below their expected speed (a USB4 link at 20 of 40 Gb/s); the
    rest of those not healthy are down or stalled.
    """

    healthy: int | None = None
    total: int | None = None
    slow: int | None = None


class StorageFigures(Record, frozen=True):
    """Storage part of a summary."""

    bytes_per_s: float | None = None
    arrays_degraded: int | None = None
    arrays_total: int | None = None


class PathCell(Record, frozen=True):
    """One of a node's peer paths as the dashboard shows it (from a `PeerPathReading`).

    Attributes:
        name: ``<peer>/<path>`` (``node02/tbnet``).
        peer: the peer node's name.
        path: the path's name (``tbnet``, ``roce``, ``mgmt``).
        state: the agent's judgement against its thresholds: ``ok``, ``degraded`` (p99 above
            the limit, or probes lost), ``silent`` (nothing answered in the window),
            ``unknown`` (first window not complete).
        rtt_p99_us: 99th percentile round trip of the last window, microseconds.
        loss_pct: probes lost in the last window, 0-100.
        link_gbps: speed of the local interface carrying the path.
        last_reply_age_s: seconds since the last reply (how long a silent path has been silent).
        key_mismatch: the path's node refuses the peer's probes for a bad MAC (the keys differ).
        peer_flooded: the peer said its probe port is flooded: the loss is suspect.
        loss_limit_pct: the loss above which the agent judges the path degraded (its ``[probes]``
            configuration); ``None`` from an agent before the field. The screens write the loss on
            the same side of it (`rigmon.summary.loss_figure`).
    """

    name: str
    peer: str
    path: str
    state: PeerPathState = "unknown"
    rtt_p99_us: float | None = None
    loss_pct: float | None = None
    link_gbps: float | None = None
    last_reply_age_s: float | None = None
    key_mismatch: bool = False
    peer_flooded: bool = False
    loss_limit_pct: float | None = None


class PathFigures(Record, frozen=True):
    """Peer path part of a summary: every path of the node, and the worst of them (`path_rank`).

    ``paths`` keep the frame's order; the link matrix is built from them, so it needs only
    the summaries (a node off screen sends no full frame).
    """

    worst: PathCell | None = None
    paths: tuple[PathCell, ...] = ()
    silent: int = 0
    degraded: int = 0



def host_figures(readings: Readings) -> HostFigures:
    """CPU busy percentage and network throughput (all interfaces but loopback)."""
    cpu = readings.host.cpu_pct if readings.host else None
    rates = [
        rate
        for nic in readings.net
        if nic.name != "lo"
        for rate in (nic.rx_bytes_per_s, nic.tx_bytes_per_s)
        if rate is not None
    ]
    return HostFigures(cpu_pct=cpu, net_bytes_per_s=sum(rates) if rates else None)


def guard_mark(guard: GuardReading | None) -> str:
    """The undervolt guard for the cluster row, in a few cells.

    ``G1`` engaged at step 1, ``G1h`` held there; ``g1`` when it is to enforce but cannot act (no
    permission), ``dry1`` in dry-run: it would cap, and changed nothing. ``G0h`` held before it
    engaged (the caps it takes next stay until released). ``Goff`` released by an operator: it does
    not engage again until ``released_until``, so it will not protect a run. ``G!`` armed again while
    caps it set are still in force (a restore that failed: retried, or to be undone by hand). ``G1?``
    engaged and holding its caps because it cannot read what it guards by (``unread``: the rail, the GPUs'
    throttle reasons): the restore waits until it reads again (a hold by the operator says ``h`` instead:
    it holds whatever it reads). Empty while armed with nothing in force, or when the agent runs no guard.
    """
    if guard is None:
        return ""
    if guard.step == 0 and guard.settings:
        return "G!"
    who = "G" if guard.acting else "dry" if guard.mode == "dry-run" else "g"
    if guard.state == "released":
        return f"{who}off"
    if guard.step == 0 and guard.state != "held":
        return ""
    if guard.state == "held":
        return f"{who}{guard.step}h"
    return f"{who}{guard.step}" + ("?" if guard.unread else "")


def holding_text(unread: Sequence[str], since: float | None) -> str:
    """What the guard says while it holds its caps because it cannot read what it guards by:
    ``holding caps: rail not read since 20:31:05`` (UTC, as every time rigmon shows), or
    ``... not read yet in this run``. The agent's ``guard_holding`` event and the dashboard's guard
    line say it in the same words."""
    when = f"since {time.strftime('%H:%M:%S', time.gmtime(since))} UTC" if since is not None else "yet in this run"
    return f"holding caps: {' and '.join(unread)} not read {when}"


def rail_figures(readings: Readings) -> float | None:
    """Lowest 12 V rail voltage of the frame's ADC windows (volts): the envelope's minimum,
    never its mean, so a sag of a few milliseconds reaches the screen; ``None`` without
    ADC readings (no device, or stale)."""
    rail = readings.psu_rail
    if rail is None or rail.volts is None:
        return None
    return rail.volts.min_volts


def gpu_figures(readings: Readings) -> GpuFigures:
    """Total board power of the working GPUs (NVIDIA and AMD), GPUs working of listed, and
    lost ones; all ``None`` when the node reports no GPU."""
    if not readings.gpus and not readings.amd_gpus:
        return GpuFigures()
    working = [g for g in readings.gpus if g.state != "lost"]
    powers = [g.power_w for g in working if g.power_w is not None]
    powers += [a.power_w for a in readings.amd_gpus if a.power_w is not None]
    return GpuFigures(
        power_w=sum(powers) if powers else None,
        present=len(working) + len(readings.amd_gpus),
        expected=len(readings.gpus) + len(readings.amd_gpus),
        lost=len(readings.gpus) - len(working),
    )


def storage_figures(readings: Readings) -> StorageFigures:
    """Read plus write bytes per second over the node's md arrays (over its whole disks
    when it has no array, since an array's bytes are also its members'), and arrays not
    ``ok`` of all, an array whose state is not known now (/proc/mdstat unreadable: `raid_unknown`)
    not among them (see `arrays_unknown`); ``None`` where the node reports no such device or no rate yet."""
    if readings.raid:
        rates = [r for a in readings.raid for r in (a.read_bytes_per_s, a.write_bytes_per_s) if r is not None]
        degraded: int | None = sum(1 for a in readings.raid if a.health != "ok" and not raid_unknown(a))
        total: int | None = len(readings.raid)
    else:
        rates = [r for d in readings.disks for r in (d.read_bytes_per_s, d.write_bytes_per_s) if r is not None]
        degraded = total = None
    return StorageFigures(bytes_per_s=sum(rates) if rates else None, arrays_degraded=degraded, arrays_total=total)


def arrays_unknown(readings: Readings) -> int:
    """md arrays whose state is not known now (/proc/mdstat unreadable: `raid_unknown`): neither healthy
    nor degraded. Counted by the dashboard from the frame (a summary record's slim frame keeps the arrays)."""
    return sum(1 for a in readings.raid if raid_unknown(a))


def nic_is_link(nic: NetInterfaceReading) -> bool:
    """Whether an interface is a link between machines that the cluster screen counts:
    every thunderbolt-net interface, and Ethernet/InfiniBand ports that are up or have a
    carrier (an unused port is no link)."""
    if nic.kind == "thunderbolt-net":
        return True
    return nic.kind in LINK_NIC_KINDS and (nic.operstate == "up" or nic.carrier is True)


def nic_is_healthy(nic: NetInterfaceReading) -> bool:
    """Up with a carrier and not stalled."""
    return nic.operstate == "up" and nic.carrier is True and not nic.stalled


def link_figures(readings: Readings) -> LinkFigures:
    """Links healthy of all links watched: Thunderbolt/USB4 links (host routers and
    retimers have no link of their own) at their expected speed, and the interfaces of
    `nic_is_link` up, with carrier and not stalled; ``None`` when the node has none. Slow:
    Thunderbolt/USB4 links up below their expected speed (``degraded``). A link whose state is not known
    (``unknown``, or a newer agent's word this version does not know) is not counted."""
    tb = [d for d in readings.thunderbolt if d.link_state in ("ok", "degraded")]
    nics = [n for n in readings.net if nic_is_link(n)]
    total = len(tb) + len(nics)
    if total == 0:
        return LinkFigures()
    healthy = sum(1 for d in tb if d.link_state == "ok") + sum(1 for n in nics if nic_is_healthy(n))
    slow = sum(1 for d in tb if d.link_state == "degraded")
    return LinkFigures(healthy=healthy, total=total, slow=slow)


#: Order of path states, worst last: a silent path is worse than any round trip.
PATH_STATE_RANK: dict[str, int] = {"unknown": 0, "ok": 1, "degraded": 2, "silent": 3}


def path_cell(reading: PeerPathReading) -> PathCell:
    """The dashboard's figures of one peer path."""
    return PathCell(name=reading.name, peer=reading.peer, path=reading.path, state=reading.state,
                    rtt_p99_us=reading.rtt_p99_us, loss_pct=reading.loss_pct, link_gbps=reading.link_gbps,
                    last_reply_age_s=reading.last_reply_age_s, key_mismatch=reading.key_mismatch,
                    peer_flooded=reading.peer_flooded, loss_limit_pct=reading.loss_limit_pct)


def path_rank(cell: PathCell) -> tuple[int, float, float]:
    """Sort key of paths, worst last: by state (silent worst of all, then degraded, ok,
    unknown), then by p99 round trip, then by loss."""
    return (PATH_STATE_RANK.get(cell.state, 0), -1.0 if cell.rtt_p99_us is None else cell.rtt_p99_us,
            cell.loss_pct or 0.0)


def worst_path(cells: Sequence[PathCell]) -> PathCell | None:
    """The worst of ``cells`` by `path_rank` (the first of equals); ``None`` when empty."""
    worst: PathCell | None = None
    for cell in cells:
        if worst is None or path_rank(cell) > path_rank(worst):
            worst = cell
    return worst


def path_figures(readings: Readings) -> PathFigures | None:
    """The node's peer paths and the worst of them; ``None`` when it probes no peer."""
    if not readings.peer_paths:
        return None
    cells = tuple(path_cell(p) for p in readings.peer_paths)
    return PathFigures(worst=worst_path(cells), paths=cells, silent=sum(1 for c in cells if c.state == "silent"),
                       degraded=sum(1 for c in cells if c.state == "degraded"))


def peak_figures(readings: Readings) -> tuple[float | None, float | None]:
    """The highest power peak of one working NVIDIA GPU between polls (the reading where the
    driver keeps no peak) in watts, and that GPU's power limit."""
    best: tuple[float | None, float | None] = (None, None)
    for gpu in readings.gpus:
        peak = gpu.power_peak_w if gpu.power_peak_w is not None else gpu.power_w
        if gpu.state != "lost" and peak is not None and (best[0] is None or peak > best[0]):
            best = (peak, gpu.power_limit_w)
    return best


#: A GPU's power peak between polls this far above its limit means the limit does not hold
#: (a V100 peaks above 300 W under a 200 W limit): amber. Below it a peak over the limit for
#: a fraction of a second is what a V100 under load does.
PEAK_OVER_LIMIT_FACTOR = 1.5
#: A GPU's power reading this far above its limit is amber. The V100's reading is
#: instantaneous and overshoots its limit by a few percent under load; a 1 s average (newer
#: GPUs) that far over means the limit does not hold.
READING_OVER_LIMIT_FACTOR = 1.1


def power_level(power_w: float | None, peak_w: float | None, limit_w: float | None) -> str | None:
    """``warn`` when a GPU's power is a problem: its reading more than `READING_OVER_LIMIT_FACTOR`
    times its limit, or a peak between polls over `PEAK_OVER_LIMIT_FACTOR` times it; ``None``
    for the brief overshoot every V100 shows under load."""
    if limit_w is None or limit_w <= 0:
        return None
    if power_w is not None and power_w > READING_OVER_LIMIT_FACTOR * limit_w:
        return "warn"
    if peak_w is not None and peak_w > PEAK_OVER_LIMIT_FACTOR * limit_w:
        return "warn"
    return None


def slowest_link_gbps(readings: Readings) -> float | None:
    """Speed of the slowest Thunderbolt/USB4 link (the lower direction), Gb/s."""
    speeds = [min(v for v in (d.rx_gbps, d.tx_gbps) if v is not None) for d in readings.thunderbolt
              if d.link_state != "unknown" and (d.rx_gbps is not None or d.tx_gbps is not None)]
    return min(speeds) if speeds else None


def detail_values(readings: Readings) -> dict[str, float | None]:
    """Per-device figures the node screen draws as trends, by series name.

    Names: ``gpu[<uuid or index>].power_w`` (NVIDIA: the peak between polls where the
    driver has it, else the reading), ``amd[<PCI address, else card>].power_w`` (`amd_key`),
    ``raid[<name>].read_bytes_per_s``
    and ``.write_bytes_per_s``, ``rail.mean_volts``, ``path[<path>].resistance_mohm``,
    ``net[<name>].bytes_per_s``. A series ending in ``_volts`` keeps each bucket's minimum
    when downsampled, every other its maximum (`rigmon.cluster.history.detail_extreme`).
    """
    out: dict[str, float | None] = {}
    for gpu in readings.gpus:
        power = gpu.power_peak_w if gpu.power_peak_w is not None else gpu.power_w
        out[f"gpu[{gpu_key(gpu.uuid, gpu.index)}].power_w"] = power
    for amd in readings.amd_gpus:
        out[f"amd[{amd_key(amd.pci_bus_id, amd.card)}].power_w"] = amd.power_w
    for array in readings.raid:
        out[f"raid[{array.name}].read_bytes_per_s"] = array.read_bytes_per_s
        out[f"raid[{array.name}].write_bytes_per_s"] = array.write_bytes_per_s
    rail = readings.psu_rail
    if rail is not None:
        out["rail.mean_volts"] = rail.volts.mean_volts if rail.volts is not None else None
    for path in readings.path_resistance:
        out[f"path[{path.path}].resistance_mohm"] = path.resistance_mohm
    for nic in readings.net:
        if nic_is_link(nic):
            rates = [r for r in (nic.rx_bytes_per_s, nic.tx_bytes_per_s) if r is not None]
            out[f"net[{nic.name}].bytes_per_s"] = sum(rates) if rates else None
    return out


def gpu_key(uuid: str | None, index: int) -> str:
    """Identity of an NVIDIA GPU on the dashboard: its UUID, else ``index:N``."""
    return uuid if uuid is not None else f"index:{index}"


def amd_key(pci_bus_id: str | None, card: str) -> str:
    """Identity of an AMD GPU on the dashboard: its PCI address (``0000:c3:00.0``), else its card (``card0``),
    as its series are named (`rigmon.series.ELEMENT_KEY_FIELDS`).

    Not the DRM card number where the PCI address is known: it follows the drivers' probe order and may
    name another GPU after a reboot, whose history and table row would then continue as this one's.
    """
    return pci_bus_id if pci_bus_id is not None else card
