"""One line per Xid: NVML and kernel-log reports of one Xid merged for display, nothing else."""

from __future__ import annotations

from rigmon.schema import Event, EventValue
from rigmon.tui.event_merge import XID_MERGE_S, merge_xid_events

BUS = "0000:1d:00.0"


def xid(source: str, at: float, code: int = 79, bus: str | None = BUS, index: int | None = 3,
        message: str = "Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus") -> Event:
    data: dict[str, EventValue] = {"source": source, "xid": code, "pci_bus_id": bus, "gpu_index": index}
    return Event(id=f"r-{source}-{at}", at=at, kind="xid", severity="critical", subject=f"gpu:{index}",
                 message=message, data=data)


def lost(at: float) -> Event:
    return Event(id=f"r-lost-{at}", at=at, kind="gpu_lost", severity="critical", subject="gpu:3",
                 message="GPU 3 (0000:1d:00.0) lost")


def test_one_xid_from_nvml_and_the_kernel_log_is_one_line_naming_both() -> None:
    kernel = xid("kmsg", 100.8, message="Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus.")
    events = (xid("nvml", 100.0), kernel, lost(101.0))
    shown = merge_xid_events(events)
    assert [e.kind for e in shown] == ["xid", "gpu_lost"]
    assert shown[0].message == "Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus (NVML and kernel log)"
    assert shown[0].at == 100.0
    assert shown[1] is events[2]


def test_the_kernel_report_may_come_first_or_be_filed_after_a_later_event() -> None:
    events = (xid("kmsg", 99.0), lost(100.5), xid("nvml", 100.0))
    shown = merge_xid_events(events)
    assert [e.kind for e in shown] == ["xid", "gpu_lost"]
    assert shown[0].at == 99.0 and shown[0].message.endswith("(NVML and kernel log)")


def test_reports_not_of_the_same_xid_stay_apart() -> None:
    far = (xid("nvml", 100.0), xid("kmsg", 100.0 + XID_MERGE_S + 0.1))
    other_code = (xid("nvml", 100.0), xid("kmsg", 100.5, code=48))
    other_gpu = (xid("nvml", 100.0), xid("kmsg", 100.5, bus="0000:1c:00.0", index=2))
    same_source = (xid("kmsg", 100.0), xid("kmsg", 100.5))
    for events in (far, other_code, other_gpu, same_source):
        assert merge_xid_events(events) == events


def test_the_gpu_is_matched_by_index_when_nvml_has_no_bus_id() -> None:
    events = (xid("nvml", 100.0, bus=None), xid("kmsg", 100.5))
    assert len(merge_xid_events(events)) == 1
    events = (xid("nvml", 100.0, bus=None, index=2), xid("kmsg", 100.5))
    assert len(merge_xid_events(events)) == 2


def test_each_report_merges_once() -> None:
    # Two Xids 79 a second apart, each seen by both sources: two lines, not one or three.
    events = (xid("nvml", 100.0), xid("kmsg", 100.2), xid("nvml", 101.0), xid("kmsg", 101.2))
    shown = merge_xid_events(events)
    assert [e.at for e in shown] == [100.0, 101.0]
    assert all(e.message.endswith("(NVML and kernel log)") for e in shown)
