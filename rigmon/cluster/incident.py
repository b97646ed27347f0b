"""A node's incident story for the dashboard: why a node is in trouble, and the timeline of its steps.

Pure functions (no Textual, no clock, no I/O) over what a node store holds: the newest
frame's readings, the summary with its worst figures, the events, the active alarms and
the recent rail minima. `problems` gives the cluster row's reason ("GPU 3 lost 5 s after
rail 11.255 V"); `timeline` (`rigmon.cluster.incident_timeline`, importable from here) the node
screen's steps, oldest first, each event merged with the alarm it raised.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from rigmon.alarms.message_values import reading_text
from rigmon.alarms.values import same_value
from rigmon.cluster.incident_timeline import MERGE_S, Level, Step, timeline
from rigmon.cluster.rail_memory import RailMemory, Sag, after_sag, sag_before
from rigmon.schema import Alarm, Frame, raid_unknown
from rigmon.summary import (
    PEAK_OVER_LIMIT_FACTOR,
    RAIL_CRITICAL_VOLTS,
    RAIL_WARN_VOLTS,
    WORST_WINDOW_S,
    NodeSummary,
    PathCell,
    loss_figure,
)

# Kept importable from here, where the incident story uses them.
__all__ = ["MERGE_S", "Problem", "RailMemory", "Sag", "Step", "after_sag", "alarm_now_text", "problems", "rail_text",
           "reason", "sag_before", "state_now", "timeline"]

#: An array reading or writing at less than this percentage of the fastest array lags.
ARRAY_LAG_PCT = 85.0
#: Arrays moving less than this (bytes per second) are idle: no lag is judged.
ARRAY_BUSY_BYTES_PER_S = 50e6


class Problem(msgspec.Struct, frozen=True, gc=False):
    """One thing wrong with a node now, in a few words.

    A frozen msgspec Struct untracked by the cycle collector: the node store builds a node's
    problems whenever its view changes (every second for a node sending frames). It holds three
    strings, so it cannot be part of a reference cycle.

    Attributes:
        level: ``bad`` (red: data or hardware lost, rail below the critical limit) or ``warn``.
        text: the reason as the cluster row shows it (``GPU 2 NVLink CRC +5/s, PCIe x8 of x16``).
        subject: what it is about (``gpu:3``, ``link:0-1``, ``md:md127``, ``psu``).
    """

    level: Level
    text: str
    subject: str


def _rate(value: float) -> str:
    return f"+{value:.0f}/s" if value >= 1 else f"+{value:.1f}/s"


def gpu_link_trouble(frame: Frame) -> list[Problem]:
    """Each GPU whose NVLinks or PCIe link show seating trouble: CRC or replay errors rising,
    PCIe trained below its generation or width."""
    out = []
    for gpu in frame.readings.gpus:
        if gpu.state == "lost":
            continue
        parts = []
        crc = sum(link.crc_flit_per_s or 0.0 for link in gpu.nvlinks)
        replay = sum(link.replay_per_s or 0.0 for link in gpu.nvlinks)
        if crc > 0:
            parts.append(f"NVLink CRC {_rate(crc)}")
        elif replay > 0:
            parts.append(f"NVLink replay {_rate(replay)}")
        if gpu.pcie_width is not None and gpu.pcie_width_max is not None and gpu.pcie_width < gpu.pcie_width_max:
            parts.append(f"PCIe x{gpu.pcie_width} of x{gpu.pcie_width_max}")
        if gpu.pcie_gen is not None and gpu.pcie_gen_max is not None and gpu.pcie_gen < gpu.pcie_gen_max:
            parts.append(f"PCIe Gen{gpu.pcie_gen} of Gen{gpu.pcie_gen_max}")
        if gpu.pcie_replay_per_s and not parts:
            parts.append(f"PCIe replay {_rate(gpu.pcie_replay_per_s)}")
        if parts:
            # Incident 4: these are what a loose SXM2 module (or riser) looks like.
            out.append(Problem("warn", f"GPU {gpu.index} " + ", ".join(parts) + ": check seating",
                               f"gpu:{gpu.index}"))
    return out


def _gbps(value: float) -> str:
    return f"{value:g}"


def hot_drives(frame: Frame) -> list[Problem]:
    """NVMe drives at or over their warning temperature (WCTEMP): they throttle (incident 6's hot
    enclosure). Subjects are ``nvme:<name>``, as the agent's ``nvme_temp_over_warning`` names them, so
    the alarm's long message is not repeated in the node's "now"."""
    out = []
    for nvme in frame.readings.nvme:
        if not nvme.temp_over_max:
            continue
        if nvme.temp_c is not None and nvme.temp_max_c is not None:
            # As the storage box writes it: ``82 °C ≥ 81.85``, the drive's warning limit.
            text = f"{nvme.name} hot, {nvme.temp_c:.0f} °C ≥ {round(nvme.temp_max_c, 2):g}"
        else:
            text = f"{nvme.name} hot (its own warning bit)"
        out.append(Problem("warn", text, f"nvme:{nvme.name}"))
    return out


def critical_temperatures(frame: Frame) -> list[Problem]:
    """Host temperatures at or over their critical limit (a CPU package at TjMax, a zone's critical trip):
    the node throttles hard or shuts down next. Subjects are ``temp:<sensor>``, as the agent's
    ``host_temp_critical`` names them, so the alarm's long message is not repeated in the node's "now"."""
    out = []
    for temp in frame.readings.temperatures:
        if temp.over_crit and temp.crit_c is not None:
            out.append(Problem("bad", f"{temp.label} at its critical limit, {temp.temp_c:.0f} °C ≥ "
                                      f"{round(temp.crit_c, 2):g}", f"temp:{temp.sensor}"))
    return out


def link_trouble(frame: Frame) -> list[Problem]:
    """Thunderbolt/USB4 links below their expected speed, NVMe links below what they can do,
    network links down or stalled."""
    out = []
    for dev in frame.readings.thunderbolt:
        if dev.link_state != "degraded":
            continue
        speeds = [v for v in (dev.rx_gbps, dev.tx_gbps) if v is not None]
        if speeds and dev.expected_gbps is not None:
            text = f"USB4 {dev.name} at {_gbps(min(speeds))} of {_gbps(dev.expected_gbps)} Gb/s: re-plug"
        else:
            text = f"USB4 {dev.name} below its speed"
        out.append(Problem("warn", text, f"link:{dev.name}"))
    for nvme in frame.readings.nvme:
        if nvme.link_state != "degraded":
            continue
        parts = []
        if nvme.link_gen is not None and nvme.max_link_gen is not None and nvme.link_gen < nvme.max_link_gen:
            parts.append(f"Gen{nvme.link_gen} of Gen{nvme.max_link_gen}")
        if nvme.link_width is not None and nvme.max_link_width is not None and nvme.link_width < nvme.max_link_width:
            parts.append(f"x{nvme.link_width} of x{nvme.max_link_width}")
        # What to do, as the alarm says it and as the other links' reasons do.
        out.append(Problem("warn", f"{nvme.name} PCIe " + (", ".join(parts) or "below its speed") + ": re-seat",
                           f"nvme:{nvme.name}"))
    for nic in frame.readings.net:
        if nic.stalled:
            out.append(Problem("warn", f"{nic.name} stalled (no traffic passes)", f"link:{nic.name}"))
    return out


def rtt(us: float) -> str:
    """A round trip in microseconds as the dashboard writes it: ``5.8 µs``, ``850 µs``, ``1.2 ms``, ``35 ms``."""
    if us < 9.95:
        return f"{us:.1f} µs"
    if us < 999.5:
        return f"{us:.0f} µs"
    if us < 9950:
        return f"{us / 1000:.1f} ms"
    return f"{us / 1000:.0f} ms"


def path_text(cell: PathCell) -> str:
    """``tbnet to node03 silent 12 s``, ``roce to node02 p99 1.2 ms, loss 3%`` (``loss 2.4%`` against a 2 % limit:
    on the same side of the path's loss limit as the loss, `loss_figure`)."""
    head = f"{cell.path} to {cell.peer}"
    if cell.state == "silent":
        age = cell.last_reply_age_s
        return f"{head} silent" + (f" {age:.0f} s" if age is not None else "")
    parts = []
    if cell.rtt_p99_us is not None:
        parts.append(f"p99 {rtt(cell.rtt_p99_us)}")
    if cell.loss_pct:
        parts.append(f"loss {loss_figure(cell.loss_pct, cell.loss_limit_pct)}")
    return f"{head} " + (", ".join(parts) if parts else cell.state)


def path_trouble(summary: NodeSummary | None, peers_up: frozenset[str] = frozenset()) -> list[Problem]:
    """Peer paths silent (red) or degraded (amber) now; with none now, the worst path that was
    within `WORST_WINDOW_S` (amber). A silent path to a peer whose agent the dashboard reaches
    over HTTP (``peers_up``) says so: the link locked up, the node did not (incident 7's
    thunderbolt-net lockup). Subjects are ``peer:<peer>/<path>``, as the agent's peer path
    alarms name them, so such an alarm is not listed a second time."""
    if summary is None:
        return []
    out = []
    cells = summary.paths.paths if summary.paths is not None else ()
    for cell in cells:
        if cell.state == "silent":
            text = path_text(cell) + (", HTTP up" if cell.peer in peers_up else "")
            out.append(Problem("bad", text, f"peer:{cell.name}"))
    for cell in cells:
        if cell.state == "degraded":
            out.append(Problem("warn", path_text(cell), f"peer:{cell.name}"))
    past = summary.path_worst
    if not out and past is not None and past.state in ("silent", "degraded"):
        what = "silent" if past.state == "silent" else path_text(past).removeprefix(f"{past.path} to {past.peer} ")
        out.append(Problem("warn", f"{past.path} to {past.peer} {what} within {WORST_WINDOW_S:.0f} s",
                           f"peer:{past.name}"))
    return out


def array_trouble(frame: Frame) -> list[Problem]:
    """md arrays broken or degraded, and a busy array lagging the fastest one. An array whose state is not
    known now (/proc/mdstat unreadable: `raid_unknown`) is neither: its failing collector is the problem."""
    out = []
    arrays = frame.readings.raid
    for array in arrays:
        if raid_unknown(array):
            continue
        if array.health == "broken":
            out.append(Problem("bad", f"{array.name} broken", f"md:{array.name}"))
        elif array.health != "ok":
            out.append(Problem("bad", f"{array.name} {array.health}", f"md:{array.name}"))

    def rate(a: object) -> float:
        return sum(v or 0.0 for v in (getattr(a, "read_bytes_per_s"), getattr(a, "write_bytes_per_s")))

    busy = [a for a in arrays if rate(a) >= ARRAY_BUSY_BYTES_PER_S]
    if len(busy) >= 2:
        fastest = max(busy, key=rate)
        for array in busy:
            pct = array.vs_fastest_array_pct
            if array is not fastest and pct is not None and pct < ARRAY_LAG_PCT:
                out.append(Problem("warn", f"{array.name} at {pct:.0f} % of {fastest.name}", f"md:{array.name}"))
    return out


def state_now(alarm: Alarm) -> str | None:
    """The state a firing state alarm's subject is in now when it is no longer the one the alarm
    fired on (``ok`` for an RDMA port up again, its alarm held for the rule's clear hold), else ``None``."""
    if alarm.rule_kind != "state" or alarm.value_now is None or alarm.value is None:
        return None
    if isinstance(alarm.value_now, bool):
        # A flag the rule fires on (stalled, temp_over_max) that is down again: not "False".
        return None if alarm.value_now == alarm.value else "ok"
    # A number as the message writes the one the alarm fired on (``40000 Mb/s``).
    return None if same_value(alarm.value_now, alarm.value) else reading_text(alarm, alarm.value_now)


def alarm_now_text(alarm: Alarm) -> str:
    """A firing alarm's message as what is wrong now, saying where a state alarm's subject is now
    when it has left the state the alarm fired on (``RDMA port mlx5_0/1 is down: ... (now ok)``)."""
    now = state_now(alarm)
    return alarm.message if now is None else f"{alarm.message} (now {now})"


def rail_text(worst: float, summary: NodeSummary | None) -> str:
    """``rail 11.255 V`` while the rail is that low now; once it has come back, which period that
    worst was of and where the rail is now (``rail 11.255 V within 60 s, now 11.850 V``), so that
    the "now" of a node's story does not pass a sag gone for the rail's present state."""
    now = summary.rail_min_volts if summary is not None else None
    if now is None or now <= worst:
        return f"rail {worst:.3f} V"
    return f"rail {worst:.3f} V within {WORST_WINDOW_S:.0f} s, now {now:.3f} V"


def problems(frame: Frame | None, summary: NodeSummary | None, alarms: Sequence[Alarm] = (),
             rail: RailMemory | None = None, peers_up: frozenset[str] = frozenset()) -> tuple[Problem, ...]:
    """What is wrong with a node now, worst first (``bad`` before ``warn``).

    Args:
        frame: the node's newest frame.
        summary: its summary, with the worst figures of the recent window.
        alarms: the node's active alarms; a firing alarm no reading explains is listed by its message.
        rail: the node's rail memory, for the sag before a GPU loss.
        peers_up: peers of the node's silent paths whose agents answer the dashboard.
    """
    if frame is None:
        return ()
    out: list[Problem] = []
    named_rail = False
    for gpu in frame.readings.gpus:
        if gpu.state != "lost":
            continue
        subject = f"gpu:{gpu.index}"
        sag = rail.cause_of(subject) if rail is not None else None
        lost_at = sag.before if sag is not None and sag.before is not None else gpu.lost_at
        if sag is not None and lost_at is not None:
            out.append(Problem("bad", f"GPU {gpu.index} lost {after_sag(sag, lost_at)}", subject))
            named_rail = True
        else:
            out.append(Problem("bad", f"GPU {gpu.index} lost", subject))
    worst = summary.rail_worst_volts if summary is not None else None
    if worst is not None and not named_rail and worst < RAIL_WARN_VOLTS:
        out.append(Problem("bad" if worst < RAIL_CRITICAL_VOLTS else "warn", rail_text(worst, summary), "psu"))
    arrays = array_trouble(frame)
    out += [p for p in arrays if p.level == "bad"]
    out += critical_temperatures(frame)
    out += gpu_link_trouble(frame)
    out += link_trouble(frame)
    out += hot_drives(frame)
    out += path_trouble(summary, peers_up)
    out += [p for p in arrays if p.level != "bad"]  # a lagging array: after the link that may cause it
    if (summary is not None and summary.links_unhealthy_worst
            and not any(p.subject.startswith(("link:", "nvme:")) for p in out)):
        # Healthy now, not within the window: a link that flaps (incident 5).
        # Which link the summary does not say; the one Thunderbolt alarm still held on a link does (its
        # clear hold outlasts the flap), and is then this problem, not a second one in the node's "now".
        held = {a.subject for a in alarms if a.state == "firing" and a.rule == "thunderbolt_degraded"}
        subject = next(iter(held)) if len(held) == 1 else "link:"
        name = f" {subject.removeprefix('link:')}" if subject != "link:" else ""
        text = f"a link{name} was down or slow within {WORST_WINDOW_S:.0f} s"
        if summary.link_worst_gbps is not None and summary.link_gbps is not None \
                and summary.link_worst_gbps < summary.link_gbps:
            # How far it fell, how fast it is now, and what to do.
            text = (f"USB4{name} down to {summary.link_worst_gbps:g} Gb/s within {WORST_WINDOW_S:.0f} s, now "
                    f"{summary.link_gbps:g} (flapping): re-plug")
        out.append(Problem("warn", text, subject))
    if summary is not None and summary.gpu_peak_worst_w is not None and summary.gpu_peak_limit_w:
        if summary.gpu_peak_worst_w > PEAK_OVER_LIMIT_FACTOR * summary.gpu_peak_limit_w:
            out.append(Problem("warn", f"GPU peak {summary.gpu_peak_worst_w:.0f} W over "
                                       f"{summary.gpu_peak_limit_w:.0f} W limit", "gpus"))
    for name, status in sorted(frame.collectors.items()):
        if status.state in ("error", "hung"):
            out.append(Problem("warn", f"collector {name} {'hung' if status.state == 'hung' else 'failing'}",
                               f"collector:{name}"))
    explained = {p.subject for p in out}
    for alarm in sorted(alarms, key=lambda a: (a.severity != "critical", a.started_at)):
        if alarm.state == "firing" and alarm.subject not in explained and not _explained_rail(alarm, out):
            out.append(Problem("bad" if alarm.severity == "critical" else "warn", alarm_now_text(alarm), alarm.subject))
            explained.add(alarm.subject)
    order = {"bad": 0, "warn": 1, "info": 2}
    return tuple(sorted(out, key=lambda p: order[p.level]))


def _explained_rail(alarm: Alarm, found: Sequence[Problem]) -> bool:
    """A rail alarm is explained by a rail figure or a loss named after its sag."""
    return alarm.subject == "psu" and any(p.subject == "psu" or "after rail" in p.text for p in found)


def reason(found: Sequence[Problem], limit: int = 2) -> str:
    """The cluster row's reason: the ``limit`` worst problems joined, and how many more."""
    if not found:
        return ""
    text = joined(found[:limit])
    if len(found) > limit:
        text += f" (+{len(found) - limit} more)"
    return text


def joined(found: Sequence[Problem]) -> str:
    """The texts of ``found`` one after the other: ``A; B``. A text that ends a sentence (an alarm message
    quoting the kernel: ``... GPU has fallen off the bus.``) loses its full stop before the ``;``, which
    read ``bus.; collector gpu failing``."""
    last = len(found) - 1
    return "; ".join(p.text.removesuffix(".") if i < last else p.text for i, p in enumerate(found))
