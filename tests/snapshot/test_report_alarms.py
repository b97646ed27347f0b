"""REPORT.md lists every alarm of the window with its end: a reader of a bug report sees how long the rail
stayed below critical, not only that it went there (an alarm's resolution is an info event, which the
list of warning and critical events leaves out)."""

from __future__ import annotations

from rigmon.schema import SCHEMA_VERSION, Event, EventValue, History
from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.report import render_report, window_alarms

T0 = 1_790_000_000.0


def alarm(n: int, at: float, change: str, alarm_id: str, rule: str, severity: str, subject: str,
          value: EventValue, reason: str | None = None) -> Event:
    data: dict[str, EventValue] = {"alarm_id": alarm_id, "rule": rule, "severity": severity, "state": change,
                                   "value": value}
    if reason is not None:
        data["reason"] = reason
    return Event(id=f"run-{n}", at=at, kind=f"alarm_{change}",
                 severity=severity if change == "firing" else "info",  # type: ignore[arg-type]
                 subject=subject, message=f"{rule} {change}", data=data)


EVENTS = (
    # Resolved in the window, fired before it.
    alarm(1, T0 + 2, "resolved", "a0", "thunderbolt_degraded", "warning", "tb:0-1", "10 Gb/s", "cleared"),
    alarm(2, T0 + 10, "firing", "a1", "psu_rail_low_critical", "critical", "psu", 11.38),
    alarm(3, T0 + 11, "firing", "a2", "psu_rail_undervoltage_latched", "critical", "psu", True),
    # A pending alarm that never fired is no alarm of the window.
    alarm(4, T0 + 12, "pending", "a3", "collector_failing", "warning", "collector:psu", "error"),
    alarm(5, T0 + 13, "resolved", "a3", "collector_failing", "warning", "collector:psu", "error", "cleared"),
    alarm(6, T0 + 20, "firing", "a4", "gpu_lost", "critical", "gpu:3", "lost"),
    # The resolution carries the episode's worst value.
    alarm(7, T0 + 80, "resolved", "a1", "psu_rail_low_critical", "critical", "psu", 11.255, "cleared"),
)


def test_the_alarms_of_the_window_come_with_their_ends() -> None:
    assert [(ep.first.data["rule"], ep.fired_at, ep.ended_at) for ep in window_alarms(EVENTS)] == [
        ("thunderbolt_degraded", None, T0 + 2),
        ("psu_rail_low_critical", T0 + 10, T0 + 80),
        ("psu_rail_undervoltage_latched", T0 + 11, None),
        ("gpu_lost", T0 + 20, None),
    ]


def test_the_report_says_when_each_alarm_ended_and_how_long_it_lasted() -> None:
    part = NodePart(node="v100-a", source="http://v100-a:9871", from_at=T0, to_at=T0 + 100,
                    history=History(schema=SCHEMA_VERSION, node="v100-a", from_at=T0, to_at=T0 + 100, tier="frames",
                                    step_s=1.0, series={}, events=EVENTS))
    report = render_report([part], 600.0, T0 + 200)
    table = report.split("Alarms of the window", 1)[1].split("\n\n", 2)[1].splitlines()
    assert table[2:] == [
        ("| thunderbolt_degraded | warning | tb:0-1 | before the window | 2026-09-21 14:13:22 UTC (cleared) | - "
         "| 10 Gb/s | thunderbolt_degraded resolved |"),
        ("| psu_rail_low_critical | critical | psu | 2026-09-21 14:13:30 UTC | 2026-09-21 14:14:40 UTC (cleared) "
         "| 70 s | 11.255 | psu_rail_low_critical resolved |"),
        ("| psu_rail_undervoltage_latched | critical | psu | 2026-09-21 14:13:31 UTC "
         "| still firing at the window's end | - | true | psu_rail_undervoltage_latched firing |"),
        ("| gpu_lost | critical | gpu:3 | 2026-09-21 14:13:40 UTC | still firing at the window's end | - | lost "
         "| gpu_lost firing |"),
    ]


def test_the_report_names_the_nvidia_driver_each_node_runs() -> None:
    # A GPU falling off the bus is a driver question as often as a power one: before, the report gave the
    # kernel's and rigmon's versions only.
    nvrm = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"
            "GCC version:  gcc version 12.2.0\n")
    parts = [NodePart(node="v100-a", source="a", files={"/sys/module/nvidia/version": "535.183.01\n",
                                                          "/proc/driver/nvidia/version": nvrm}),
             NodePart(node="v100-b", source="b", files={"proc/driver/nvidia/version": nvrm}),
             NodePart(node="strix", source="c", files={"/proc/loadavg": "0.1 0.1 0.1 1/100 1\n"})]
    rows = [line for line in render_report(parts, 600.0, T0).splitlines() if line.startswith("| ")]
    assert rows[0].split(" | ")[4] == "NVIDIA driver"
    assert [row.split(" | ")[4] for row in rows[1:4]] == ["535.183.01", "550.54.14", "-"]


def test_the_alarms_firing_on_every_node_are_listed_before_the_nodes_table() -> None:
    # Two nodes: the second node's own section (and its degraded link) came screens below the first's tables.
    from rigmon.schema import Alarm

    def active(node: str, rule: str, severity: str, subject: str, state: str, at: float) -> Alarm:
        return Alarm(id=f"{node}-{rule}", rule=rule, rule_kind="state", severity=severity,  # type: ignore[arg-type]
                     node=node, subject=subject, state=state, message=f"{rule} on {subject}",  # type: ignore[arg-type]
                     started_at=at, updated_at=at)

    a = NodePart(node="strix-a", source="x", alarms=(active("strix-a", "net_link_slower", "warning", "link:tb0",
                                                            "pending", T0),))
    b = NodePart(node="strix-b", source="y", alarms=(
        active("strix-b", "thunderbolt_degraded", "warning", "link:0-1", "firing", T0 + 5),
        active("strix-b", "gpu_lost", "critical", "gpu:0", "firing", T0 + 9)))
    head = render_report([a, b], 600, T0 + 60).split("| node |")[0]
    items = [line for line in head.splitlines() if line.startswith("- ")]
    assert "## Alarms firing" in head
    # Critical first; a pending alarm is not firing.
    assert items == ["- **strix-b** critical gpu_lost on gpu:0 since 2026-09-21 14:13:29 UTC: gpu_lost on gpu:0",
                     ("- **strix-b** warning thunderbolt_degraded on link:0-1 since 2026-09-21 14:13:25 UTC: "
                      "thunderbolt_degraded on link:0-1")], items
    assert "## Alarms firing" not in render_report([a], 600, T0 + 60)
