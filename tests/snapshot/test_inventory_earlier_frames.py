"""inventory.json takes a device's facts from the newest frame of the window that read them (a GPU lost since is
listed in the latest frame by its identity alone), says which frame, and leaves the rest the latest frame's."""

from __future__ import annotations

from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame, GpuReading, Readings, TemperatureReading
from rigmon.snapshot.bundle import frames_gzip
from rigmon.snapshot.inventory import inventory

T0 = 1_790_000_000.0
UUID = "GPU-3"


def gpu(index: int, uuid: str, lost: bool = False, clock_max_sm_mhz: int = 1530) -> GpuReading:
    """A V100 as NVML reads it; lost, by its identity alone (as the GPU collector lists a lost GPU)."""
    ids = {"index": index, "uuid": uuid, "name": "Tesla V100-SXM2-16GB", "serial": f"S{uuid}",
           "pci_bus_id": f"0000:1{index}:00.0", "pci_bus_id_nvml": None, "pci_bus_id_xid": None}
    if lost:
        return GpuReading(**ids, state="lost", lost_at=T0 + 50, lost_reason="NVML: GPU is lost")  # type: ignore[arg-type]
    return GpuReading(**ids, mem_total_bytes=16 << 30, power_limit_default_w=300.0,  # type: ignore[arg-type]
                      clock_max_sm_mhz=clock_max_sm_mhz, clock_max_mem_mhz=877, clock_max_graphics_mhz=1530,
                      pcie_gen_max=3, pcie_width_max=16, power_w=250.0)


def frame(seq: int, *gpus: GpuReading, run_id: str = "r1", after_s: float = 0.0) -> Frame:
    # A sensor without a critical limit: a fact missing from every frame, not one that was read earlier.
    sensor = TemperatureReading(sensor="acpitz", label="acpitz", temp_c=40.0 + seq, max_c=None, crit_c=None)
    return Frame(schema=SCHEMA_VERSION, node="n1", run_id=run_id, seq=seq, taken_at=T0 + after_s + seq,
                 agent_start=T0 + after_s,
                 collectors={"gpu": CollectorStatus(state="ok", ok=True)},
                 readings=Readings(gpus=gpus, temperatures=(sensor,)))


def test_a_lost_gpu_has_the_facts_of_the_newest_frame_that_read_them_and_says_which() -> None:
    # GPU 3 (index 1 here) read in frames 1-3 (its clock limit re-read in 3), lost from frame 4 on.
    frames = [frame(1, gpu(0, "GPU-0"), gpu(1, UUID, clock_max_sm_mhz=1500)),
              frame(2, gpu(0, "GPU-0"), gpu(1, UUID, clock_max_sm_mhz=1500)),
              frame(3, gpu(0, "GPU-0"), gpu(1, UUID)),
              *[frame(seq, gpu(0, "GPU-0"), gpu(1, UUID, lost=True)) for seq in range(4, 9)]]
    inv = inventory(None, frames[-1], frames_gzip(frames))
    healthy, lost = inv["readings"]["gpus"]
    assert (lost["uuid"], lost["serial"], lost["pcie_width_max"], lost["clock_max_sm_mhz"]) == (UUID, "SGPU-3", 16, 1530)
    assert lost["mem_total_bytes"] == 16 << 30
    assert lost["facts_from"] == {"taken_at": T0 + 3, "run_id": "r1", "seq": 3}
    assert "state" not in lost and "lost_reason" not in lost  # still facts only
    # The rest is the latest frame's, said by nothing more.
    assert "facts_from" not in healthy and healthy["pcie_width_max"] == 16
    (sensor,) = inv["readings"]["temperatures"]
    assert sensor == {"sensor": "acpitz", "label": "acpitz", "max_c": None, "crit_c": None}
    assert inv["taken_at"] == T0 + 8


def test_a_gpu_is_followed_by_its_uuid_when_its_index_moves() -> None:
    # NVML numbers the GPUs it finds: in the agent's next run index 0 is another GPU than before.
    frames = [frame(1, gpu(0, "GPU-A"), gpu(1, "GPU-B")),
              frame(2, gpu(0, "GPU-A", lost=True), gpu(1, "GPU-B")),
              frame(1, gpu(0, "GPU-B", clock_max_sm_mhz=1380), gpu(1, "GPU-A", lost=True), run_id="r2", after_s=60)]
    inv = inventory(None, frames[-1], frames_gzip(frames))
    b, a = inv["readings"]["gpus"]
    assert (b["uuid"], b["clock_max_sm_mhz"], "facts_from" in b) == ("GPU-B", 1380, False)
    assert (a["uuid"], a["index"], a["clock_max_sm_mhz"]) == ("GPU-A", 0, 1530)
    assert a["facts_from"] == {"taken_at": T0 + 1, "run_id": "r1", "seq": 1}


def test_frames_that_do_not_decompress_leave_the_latest_frames_facts() -> None:
    frames = [frame(1, gpu(0, UUID)), frame(2, gpu(0, UUID, lost=True))]
    (listed,) = inventory(None, frames[-1], frames_gzip(frames)[:40])["readings"]["gpus"]
    assert listed["pcie_width_max"] is None and "facts_from" not in listed
