"""Relating a GPU process's exit to the node's last hardware trouble ("exit seen 1.0 s after GPU 3 was lost")."""

from __future__ import annotations

from msgspec.structs import replace

from rigmon.schema import Event

#: Event kinds that are hardware trouble a training process may die of.
#: (Not PCIe AER: a loosely seated GPU logs corrected errors every few seconds; they are noise here.)
TROUBLE_KINDS = frozenset({"gpu_lost", "xid", "gpu_off_bus", "unclean_shutdown", "tb_link_degraded",
                           "tb_link_changed", "tb_device_removed", "nvme_link_lost", "nvme_removed",
                           "net_link_down", "net_link_flapped", "net_link_removed"})
#: Kinds the note is added to: a process's exit, and a process the agent cannot see leaving its GPU
#: (its exit, if it exited, is not visible).
NOTED_KINDS = frozenset({"gpu_process_exited", "gpu_process_left"})
#: A trouble event older than this is not named (the exit is unlikely to be its consequence).
WINDOW_S = 600.0


def trouble_phrase(event: Event) -> str:
    """How a trouble event is named in another event's message: ``GPU 3 was lost``."""
    data = event.data
    if event.kind == "gpu_lost" and data.get("gpu_index") is not None:
        return f"GPU {data['gpu_index']} was lost"
    if event.kind == "xid" and data.get("xid") is not None:
        return f"Xid {data['xid']} on GPU {data.get('gpu_index')}"
    return event.message


class TroubleMemory:
    """Remembers the node's last trouble event and notes it in the events that follow it.

    A trouble event is one of `TROUBLE_KINDS` or any critical event that is not an alarm's
    (an alarm restates trouble already recorded). The note goes into the message and into
    ``data`` (``after_event``, ``after_s``), so the timeline and scripts both see it. A process
    that started after the trouble (a job restarted since) is not noted.

    ``after_s`` runs from the trouble to the poll that saw the exit, and the message says
    "exit seen": the process ended up to one poll interval before that poll, and neither
    /proc (a zombie's stat has its exit code, not its exit time) nor NVML (without
    accounting mode, which needs root to enable) tells when.
    """

    def __init__(self) -> None:
        self.last: Event | None = None

    def note(self, event: Event) -> Event:
        """Return ``event``, with the trouble it followed noted when it is of `NOTED_KINDS`; remember trouble."""
        if event.kind in TROUBLE_KINDS or (event.severity == "critical" and not event.kind.startswith("alarm_")):
            self.last = event
            return event
        last = self.last
        if event.kind not in NOTED_KINDS or last is None:
            return event
        after_s = max(0.0, event.at - last.at)
        if after_s > WINDOW_S or _started_after(event, last):
            return event
        seen = "exit seen" if event.kind == "gpu_process_exited" else "seen"
        return replace(
            event,
            message=f"{event.message}, {seen} {after_s:.1f} s after {trouble_phrase(last)}",
            data={**event.data, "after_event": last.id, "after_kind": last.kind, "after_s": round(after_s, 3)},
        )


def _started_after(event: Event, trouble: Event) -> bool:
    """Whether the process ``event`` tells of started after ``trouble`` (``data.started_at``, from
    /proc: the job restarted since cannot have died of it). Not when its start is unknown (a
    process in another PID namespace)."""
    started_at = event.data.get("started_at")
    return isinstance(started_at, (int, float)) and not isinstance(started_at, bool) and started_at > trouble.at
