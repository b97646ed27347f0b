"""The history view's answer made from what the dashboard holds of a node itself (the hour of series
its store keeps, and its events), for when the node's agent cannot answer ``/v1/history``: a node
that just died is when the operator wants its history most."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rigmon.cluster.history import NodeHistory
from rigmon.cluster.history_answer import history_answer
from rigmon.lazy_re import lazy_compile
from rigmon.schema import Frame, History
from rigmon.summary import gpu_key

if TYPE_CHECKING:
    from rigmon.cluster.node_store import NodeStore

#: ``/v1/history`` series (`rigmon.series` names, as `rigmon.cluster.chart.charts_for` asks for them),
#: each with the store's series that holds it (one of `rigmon.cluster.history.SERIES`, or a per-device
#: series of `rigmon.summary.detail_values`).
HELD_SOURCES: dict[str, str] = {
    "psu_rail.volts.min_volts": "rail_min_volts",
    "host.cpu_pct": "cpu_pct",
    "psu_rail.volts.mean_volts": "rail.mean_volts",
}
#: Per-device series of the store (`rigmon.summary.detail_values`) and the ``/v1/history`` series
#: each stands for: ``amd[0000:c3:00.0].power_w`` is ``amd_gpus[0000:c3:00.0].power_w`` (an AMD GPU by its
#: PCI address, `rigmon.series.ELEMENT_KEY_FIELDS`; by card from older agents: `held_sources`).
_DETAIL_NAMES = (
    (lazy_compile(r"amd\[(?P<key>.*)\]\.power_w"), "amd_gpus[{key}].power_w"),
    (lazy_compile(r"raid\[(?P<key>.*)\]\.(?P<field>(read|write)_bytes_per_s)"), "raid[{key}].{field}"),
    (lazy_compile(r"path\[(?P<key>.*)\]\.resistance_mohm"), "path_resistance[{key}].resistance_mohm"),
)

#: Said after the note of a chart none of whose series the dashboard keeps (link speeds, bus errors).
NOT_HELD = "not this series: only the agent's journal keeps it"


@dataclass(frozen=True, slots=True)
class HeldHistory:
    """A history answer the dashboard made from what it holds of the node (`held_history`).

    Attributes:
        history: the answer, shaped as the agent's ``/v1/history`` would be.
        note: what the line above the chart says of it (`held_note`).
    """

    history: History
    note: str


def held_sources(history: NodeHistory, latest: Frame | None) -> dict[str, str]:
    """The ``/v1/history`` series the store's series hold, each with the store's series holding it.

    A GPU's power (``gpus[0].power_peak_w``, or ``gpus[0].power_w`` where the chart draws the
    reading) is its per-device series (``gpu[<uuid>].power_w``: the peak between polls where the
    driver has it), found by the GPU's index and identity in the node's ``latest`` frame. An AMD GPU's
    (``amd_gpus[0000:c3:00.0].power_w``) is its series of the same PCI address, or, from an agent that
    named it by its DRM card (``amd[card0].power_w``), that card's in ``latest``. The temperatures
    the temperature charts draw are held under their own names (`NodeHistory.temperatures`). Bus error
    rates, link speeds and the rail's maximum are not held: those lines stay empty.
    """
    out = dict(HELD_SOURCES)
    out.update((name, name) for name in history.temperatures)
    for name in history.details:
        for pattern, spelled in _DETAIL_NAMES:
            match = pattern.fullmatch(name)
            if match is not None:
                out[spelled.format(**match.groupdict())] = name
    for gpu in latest.readings.gpus if latest is not None else ():
        held = f"gpu[{gpu_key(gpu.uuid, gpu.index)}].power_w"
        out[f"gpus[{gpu.index}].power_peak_w"] = out[f"gpus[{gpu.index}].power_w"] = held
    for amd in latest.readings.amd_gpus if latest is not None else ():
        wanted = f"amd_gpus[{amd.pci_bus_id or amd.card}].power_w"
        old = f"amd[{amd.card}].power_w"
        if amd.pci_bus_id is not None and f"amd[{amd.pci_bus_id}].power_w" not in history.details \
                and old in history.details:
            out[wanted] = old
    return out


def held_history(store: NodeStore, from_at: float, to_at: float, names: Sequence[str],
                 why: str) -> HeldHistory | None:
    """The answer for ``names`` over ``from_at``..``to_at`` from what ``store`` holds of its node,
    with the note saying so (``why``: why not the agent's, `held_because`); ``None`` when the
    dashboard holds no frame of the node.

    Every frame held is a point (or, for a long window, a bucket of them, as the agent's journal
    makes them: `rigmon.cluster.history_answer`), so a sag or a peak the dashboard saw is drawn as
    it came; the events are the node's events the store keeps. A chart none of whose ``names`` the
    store keeps says so in the note (`NOT_HELD`).
    """
    history = store.history
    times = history.times()
    if not times:
        return None
    sources = held_sources(history, store.latest)
    columns = {name: history.values(sources[name]) for name in names if name in sources}

    def rows() -> Iterator[tuple[float, dict[str, float]]]:
        for index, at in enumerate(times):
            yield at, {name: values[index] for name, values in columns.items() if not math.isnan(values[index])}

    interval_s = store.info.interval_s if store.info is not None else 1.0
    answer = history_answer(rows(), store.name, from_at, to_at, names, interval_s, tuple(store.events))
    note = held_note(why, history.span_s(None), max(times))
    if not columns:
        # An empty chart would read as a node that sent nothing.
        note += f" ({NOT_HELD})"
    return HeldHistory(answer, note)


def held_because(reason: str, status: int | None) -> str:
    """Why the chart is not the agent's, from its failed request's ``reason`` and HTTP ``status``:
    ``agent unreachable`` when no answer came, else ``no history from the agent (HTTP 404: ...)``."""
    if status is None and not reason.startswith("bad answer"):
        return "agent unreachable"
    return f"no history from the agent ({reason})"


def held_note(why: str, span_s: float | None, last_at: float) -> str:
    """The line above a chart of what the dashboard holds: ``agent unreachable: showing the 42
    minutes this dashboard holds, to 03:01:12 UTC`` (``span_s``: from its first frame held to its
    last, ``last_at``, Unix s; ``None`` for a single frame)."""
    clock = time.strftime("%H:%M:%S", time.gmtime(last_at))
    if span_s is None:
        return f"{why}: showing the one frame this dashboard holds, at {clock} UTC"
    if span_s < 60:
        held = f"{span_s:.0f} second" + ("" if round(span_s) == 1 else "s")
    else:
        minutes = round(span_s / 60)
        held = f"{minutes} minute" + ("" if minutes == 1 else "s")
    return f"{why}: showing the {held} this dashboard holds, to {clock} UTC"
