"""A GPU process's exit names the node's last hardware trouble and how long after it came."""

from __future__ import annotations

from rigmon.agent.trouble import WINDOW_S, TroubleMemory
from rigmon.schema import Event


def _event(kind: str, at: float, severity: str = "info", **data: float | str | None) -> Event:
    return Event(id=f"r-{kind}", at=at, kind=kind, severity=severity, subject="gpu:3",  # type: ignore[arg-type]
                 message=f"{kind} message", data=dict(data))


def test_exit_after_gpu_lost_is_noted() -> None:
    memory = TroubleMemory()
    memory.note(_event("gpu_lost", 100.0, "critical", gpu_index=3))
    # The exit is seen at the collector's next poll, up to a poll interval after it happened:
    # the message does not claim the exit itself came 1.0 s after the loss.
    noted = memory.note(_event("gpu_process_exited", 101.0, "warning", pid=4245))
    assert noted.message == "gpu_process_exited message, exit seen 1.0 s after GPU 3 was lost"
    assert noted.data["after_kind"] == "gpu_lost" and noted.data["after_event"] == "r-gpu_lost"
    assert noted.data["after_s"] == 1.0 and noted.data["pid"] == 4245


def test_alarms_are_not_trouble_and_other_kinds_are_not_noted() -> None:
    memory = TroubleMemory()
    memory.note(_event("xid", 10.0, "critical", xid=79, gpu_index=3))
    memory.note(_event("alarm_firing", 11.0, "critical"))
    assert memory.note(_event("gpu_process_started", 12.0)).message == "gpu_process_started message"
    assert memory.note(_event("gpu_process_exited", 12.0)).message.endswith("exit seen 2.0 s after Xid 79 on GPU 3")


def test_no_trouble_or_old_trouble_leaves_the_exit_as_is() -> None:
    memory = TroubleMemory()
    assert memory.note(_event("gpu_process_exited", 5.0)).message == "gpu_process_exited message"
    memory.note(_event("gpu_lost", 5.0, "critical", gpu_index=0))
    assert "after" not in memory.note(_event("gpu_process_exited", 5.0 + WINDOW_S + 1)).message


def test_a_process_started_after_the_trouble_is_not_said_to_follow_it() -> None:
    # GPU 3 is lost; the job is restarted on GPUs 0-2 a minute later and fails of its own two
    # minutes on. Before: "exit seen 180.0 s after GPU 3 was lost", of a run that began after it.
    memory = TroubleMemory()
    memory.note(_event("gpu_lost", 100.0, "critical", gpu_index=3))
    restarted = memory.note(_event("gpu_process_exited", 280.0, "warning", pid=5001, started_at=160.0))
    assert restarted.message == "gpu_process_exited message" and "after_event" not in restarted.data
    # A worker that ran when the GPU was lost, or whose start is not known, still is.
    assert "after_event" in memory.note(_event("gpu_process_exited", 101.0, "warning", started_at=90.0)).data
    assert "after_event" in memory.note(_event("gpu_process_exited", 101.0, "warning", started_at=None)).data


def test_a_process_the_agent_cannot_see_leaving_its_gpu_after_trouble_is_noted_without_an_exit() -> None:
    """An agent in another PID namespace sees the worker leave GPU 3 after Xid 79, not its exit: the
    note says when it was seen gone, not that an exit was."""
    memory = TroubleMemory()
    memory.note(_event("xid", 10.0, "critical", xid=79, gpu_index=3))
    left = memory.note(_event("gpu_process_left", 11.5, pid=4245, in_namespace=False))
    assert left.message == "gpu_process_left message, seen 1.5 s after Xid 79 on GPU 3"
    assert left.data["after_event"] == "r-xid" and left.data["after_kind"] == "xid" and left.data["after_s"] == 1.5
