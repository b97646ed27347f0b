"""`gpus_gone`: which GPUs a node had in earlier frames and events and lacks in its latest frame (table cases:
a reboot after the loss, a GPU replaced in its slot, an Xid named by the kernel's bus id only)."""

from __future__ import annotations

from rigmon.schema import SCHEMA_VERSION, Event, Frame, GpuReading, Readings
from rigmon.snapshot.gpus_gone import (
    gone_gpu_data,
    gone_gpu_of_data,
    gone_gpu_text,
    gpus_gone,
)

T0 = 1_780_000_000.0


def gpu(index: int, uuid: str | None, bus: int, *, lost: bool = False) -> GpuReading:
    pci = f"0000:{bus:02x}:00.0" if uuid is not None or not lost else None
    return GpuReading(index=index, uuid=uuid, name=None if uuid is None else "Tesla V100-SXM2-16GB",
                      serial=None, pci_bus_id=pci, pci_bus_id_nvml=None,
                      pci_bus_id_xid=None if pci is None else pci[:-2], state="lost" if lost else "ok")


def frame(run: str, at: float, *gpus: GpuReading) -> Frame:
    return Frame(schema=SCHEMA_VERSION, node="v100-a", run_id=run, seq=1, taken_at=at, agent_start=at,
                 readings=Readings(gpus=gpus), collectors={})


FOUR = [gpu(i, f"GPU-{i}", 0x1A + i) for i in range(4)]


def test_a_gpu_gone_after_a_reboot_is_named_with_when_it_was_last_seen_and_first_missed() -> None:
    # Run 1 had four GPUs; after the reboot NVML finds three: no loss was ever recorded.
    earlier = [frame("r1", T0, *FOUR), frame("r1", T0 + 600, *FOUR), frame("r2", T0 + 700, *FOUR[:3])]
    latest = frame("r2", T0 + 900, *FOUR[:3])
    (gone,) = gpus_gone(latest, earlier, [])
    assert (gone.index, gone.uuid, gone.pci_bus_id, gone.now) == (3, "GPU-3", "0000:1d:00.0", "absent")
    assert (gone.last_seen_at, gone.last_seen_run, gone.absent_since_at) == (T0 + 600, "r1", T0 + 700)
    assert gone.lost_at is None and gone.xids == ()
    assert "the latest frame does not list it" in gone_gpu_text(gone)


def test_a_gpu_on_the_bus_now_is_not_gone_and_an_empty_slot_refilled_by_another_gpu_is() -> None:
    replaced = gpu(3, "GPU-new", 0x1D)
    latest = frame("r2", T0 + 900, *FOUR[:3], replaced)
    (gone,) = gpus_gone(latest, [frame("r1", T0, *FOUR)], [])
    assert gone.uuid == "GPU-3"
    assert gpus_gone(frame("r2", T0 + 900, *FOUR), [frame("r1", T0, *FOUR)], []) == []


def test_the_loss_and_the_xids_come_from_the_events_matched_by_uuid_or_bus_id() -> None:
    lost = Event(id="r1-9", at=T0 + 30, kind="gpu_lost", severity="critical", subject="gpu:3", message="GPU 3 lost",
                 data={"gpu_index": 3, "uuid": "GPU-3", "pci_bus_id": "0000:1d:00.0", "name": "Tesla V100-SXM2-16GB",
                       "reason": "NVML: GPU is lost"})
    # The kernel's report names the bus in its own spelling only; a second 79 is the same code, kept once.
    xid = Event(id="r1-8", at=T0 + 29.5, kind="xid", severity="critical", subject="gpu:3", message="Xid 79",
                data={"xid": 79, "pci_bus_id_xid": "0000:1d:00"})
    again = Event(id="r1-10", at=T0 + 31, kind="xid", severity="critical", subject="gpu:3", message="Xid 79",
                  data={"xid": 79, "uuid": "GPU-3"})
    other = Event(id="r1-11", at=T0 + 32, kind="xid", severity="warning", subject="gpu:0", message="Xid 13",
                  data={"xid": 13, "uuid": "GPU-0"})
    # Restarted since: NVML still counts GPU 3, lost and unnamed.
    latest = frame("r2", T0 + 900, *FOUR[:3], gpu(3, None, 0x1D, lost=True))
    (gone,) = gpus_gone(latest, [frame("r1", T0 + 29, *FOUR)], [again, lost, xid, other])
    assert (gone.lost_at, gone.lost_reason, gone.xids, gone.now) == (
        T0 + 30, "NVML: GPU is lost", ((79, T0 + 29.5),), "lost_unnamed")
    assert gone.last_seen_at == T0 + 29
    # As inventory.json keeps it, and read back.
    assert gone_gpu_of_data(gone_gpu_data(gone)) == gone


def test_without_a_latest_frame_nothing_is_said_gone() -> None:
    assert gpus_gone(None, [frame("r1", T0, *FOUR)], []) == []
