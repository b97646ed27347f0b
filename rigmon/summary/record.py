"""The summary stream's record of a frame (`SummaryRecord`): the slim frame, its summary and its per-device series.

What an agent sends on ``/v1/stream?view=summary`` for a node the dashboard does not show.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec.structs import fields, replace

from rigmon.schema import Frame, GpuReading, NvLinkReading, Readings, Record
from rigmon.summary.figures import detail_values
from rigmon.summary.node_summary import NodeSummary, summarize

#: Readings a summary record's frame leaves out, the bulk of a frame: what neither the cluster
#: screen's row (its problems, power scale) nor the cluster rules' peer checks read. A history view
#: offers its charts from the node's latest frame, and does read some of these: the host's
#: temperatures. The temperatures at or over their critical limit (``over_crit``) are kept (the
#: cluster row names them: `rigmon.cluster.incident.critical_temperatures`, a CPU package at TjMax is
#: a red problem); the others are not sent every second for every node off screen: a history view
#: opened on such a node asks its agent for its whole latest frame once (`rigmon.tui.operations.
#: history_screen`), and the dashboard keeps the temperatures the charts draw of the frames it gets
#: (`rigmon.cluster.history.NodeHistory.temperatures`: the NVMe drives', which the slim frame keeps,
#: and the host's while the node screen shows the node) for when the agent cannot answer.
#: A readings field not named here is kept, so a new source reaches the cluster screen unless
#: it is listed.
SLIM_DROPPED: frozenset[str] = frozenset({
    "temperatures", "disks", "kernel_log", "hwmon_volts", "pmbus_psus",
    "gpu_processes", "infiniband",
})
#: The dropped readings' empty values; the temperatures are not among them (those at their critical limit stay).
_SLIM_EMPTY = {f.name: getattr(Readings(), f.name) for f in fields(Readings)
               if f.name in SLIM_DROPPED and f.name != "temperatures"}
#: Fields of a GPU a summary record's frame keeps (the others are null or empty there): its
#: identity and state, power and limit, and its bus (PCIe training, replays, the NVLinks whose
#: error counters have counted), which is what the cluster screen and a history view's choice
#: of charts read of a GPU. A GPU is most of a frame's bytes.
SLIM_GPU_FIELDS: frozenset[str] = frozenset({
    "index", "uuid", "name", "state", "lost_at", "lost_reason", "power_w", "power_peak_w", "power_limit_w",
    "pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "pcie_replay_total", "pcie_replay_per_s", "nvlinks",
})
_GPU_EMPTY: dict[str, Any] = {f.name: None if f.default is msgspec.NODEFAULT else f.default
              for f in fields(GpuReading) if f.name not in SLIM_GPU_FIELDS}


class SummaryRecord(Record, frozen=True):
    """One frame as the agent's ``/v1/stream?view=summary`` sends it (SSE event ``summary``).

    A wire record like the frame it holds (`rigmon.schema.Record`: frozen, ``gc=False``), so the
    dashboard decodes it with msgspec's typed decoder straight into Structs. It cannot be part of
    a cycle: its frame and summary are frozen records, and ``details`` is a dict of floats that
    nothing writes a record into.

    Attributes:
        frame: `slim_frame` of the frame: without the readings of `SLIM_DROPPED`, its GPUs
            with only `SLIM_GPU_FIELDS` (same node, run id, seq, time, collector states,
            events and other readings).
        summary: the frame's `NodeSummary` (``summarize``; the dashboard adds the worst
            figures of its window, the session inventory and the alarm counts).
        details: the frame's per-device series (`detail_values`), so the node's trends stay
            whole while the node is followed by summaries.
    """

    frame: Frame
    summary: NodeSummary
    details: dict[str, float | None]


def _counted(link: NvLinkReading) -> bool:
    return any(v for v in (link.replay_total, link.crc_flit_total, link.replay_per_s, link.crc_flit_per_s))


def slim_gpu(gpu: GpuReading) -> GpuReading:
    """``gpu`` with only the fields of `SLIM_GPU_FIELDS`, and only the NVLinks whose error counters counted."""
    return replace(gpu, **_GPU_EMPTY, nvlinks=tuple(link for link in gpu.nvlinks if _counted(link)))


def slim_frame(frame: Frame) -> Frame:
    """``frame`` without the readings of `SLIM_DROPPED` (but the temperatures at their critical limit), its
    GPUs `slim_gpu`."""
    readings = frame.readings
    return replace(frame, readings=replace(readings, **_SLIM_EMPTY,
                                           temperatures=tuple(t for t in readings.temperatures if t.over_crit),
                                           gpus=tuple(slim_gpu(g) for g in readings.gpus)))


def summary_record(frame: Frame) -> SummaryRecord:
    """The summary stream's record of ``frame``."""
    return SummaryRecord(frame=slim_frame(frame), summary=summarize(frame), details=detail_values(frame.readings))
