"""Key figures of one node for the cluster screen: one small function per source, one `NodeSummary`.

Pure code shared by both sides: the dashboard summarizes the full frames of the node it
shows, the agent the frames it sends on its ``view=summary`` stream (`summary_record`).

The figures of each source are in `rigmon.summary.figures`, the node's summary and the worst
of its last minute in `rigmon.summary.node_summary`, the summary stream's record (a slim
frame, its summary, its per-device series) in `rigmon.summary.record`. Every name stays
importable from here.
"""

from __future__ import annotations

from rigmon.summary.figures import (
    LINK_NIC_KINDS,
    PATH_STATE_RANK,
    PEAK_OVER_LIMIT_FACTOR,
    RAIL_CRITICAL_VOLTS,
    RAIL_WARN_VOLTS,
    READING_OVER_LIMIT_FACTOR,
    GpuFigures,
    HostFigures,
    LinkFigures,
    PathCell,
    PathFigures,
    StorageFigures,
    amd_key,
    arrays_unknown,
    detail_values,
    gpu_figures,
    gpu_key,
    guard_mark,
    holding_text,
    host_figures,
    link_figures,
    nic_is_healthy,
    nic_is_link,
    path_cell,
    path_figures,
    path_rank,
    peak_figures,
    power_level,
    rail_figures,
    slowest_link_gbps,
    storage_figures,
    worst_path,
)
from rigmon.summary.loss import LOSS_MAX_DECIMALS, loss_figure
from rigmon.summary.node_summary import (
    FAILING_STATES,
    SEVERITY_ORDER,
    WORST_WINDOW_S,
    NodeSummary,
    WorstWindow,
    alarm_count,
    summarize,
    worst_severity,
)
from rigmon.summary.record import (
    SLIM_DROPPED,
    SLIM_GPU_FIELDS,
    SummaryRecord,
    slim_frame,
    slim_gpu,
    summary_record,
)

__all__ = [
    "FAILING_STATES", "LINK_NIC_KINDS", "LOSS_MAX_DECIMALS", "PATH_STATE_RANK", "PEAK_OVER_LIMIT_FACTOR", "RAIL_CRITICAL_VOLTS",
    "RAIL_WARN_VOLTS", "READING_OVER_LIMIT_FACTOR", "SEVERITY_ORDER", "SLIM_DROPPED", "SLIM_GPU_FIELDS",
    "WORST_WINDOW_S", "GpuFigures", "HostFigures", "LinkFigures", "NodeSummary", "PathCell", "PathFigures",
    "StorageFigures", "SummaryRecord", "WorstWindow", "alarm_count", "amd_key", "arrays_unknown", "detail_values", "gpu_figures", "gpu_key",
    "guard_mark", "holding_text", "host_figures", "link_figures", "loss_figure", "nic_is_healthy", "nic_is_link", "path_cell",
    "path_figures", "path_rank", "peak_figures", "power_level", "rail_figures", "slim_frame", "slim_gpu", "slowest_link_gbps",
    "storage_figures", "summarize", "summary_record", "worst_path", "worst_severity",
]
