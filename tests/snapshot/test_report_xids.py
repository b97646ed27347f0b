"""REPORT.md lists one Xid once, naming both sources, as the dashboard does: the agent reports it from NVML's
event set and from the kernel log, and both events stay in the bundle's events.jsonl."""

from __future__ import annotations

import time

from rigmon.schema import SCHEMA_VERSION, History
from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.report import render_report
from tests.tui.snapshot_apps.record_frames import load_frames


def test_the_report_lists_an_xid_reported_by_nvml_and_the_kernel_log_once() -> None:
    # A real agent's frames of undervolt-bus-drop: GPU 3 falls off the bus, its Xid 79 reported by both sources.
    frames = load_frames("v100-gpu-lost-rail-sag")
    events = tuple(e for f in frames for e in f.events)
    assert sorted(str(e.data["source"]) for e in events if e.kind == "xid") == ["kmsg", "nvml"]
    part = NodePart(node="node01", source="http://node01:9871", from_at=frames[0].taken_at, to_at=frames[-1].taken_at,
                    history=History(schema=SCHEMA_VERSION, node="node01", from_at=frames[0].taken_at,
                                    to_at=frames[-1].taken_at, tier="frames", step_s=1.0, series={}, events=events))
    report = render_report([part], 600.0, frames[-1].taken_at + 5)
    listed = [line for line in report.splitlines() if line.startswith("- ") and "`xid`" in line]
    assert len(listed) == 1
    (line,) = listed
    assert line.endswith("Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus (NVML and kernel log)")
    # At the first report's time (NVML's, stamped before the kernel line was read).
    first_at = min(e.at for e in events if e.kind == "xid")
    assert line.startswith(f"- {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(first_at))} UTC **critical** `xid`")
