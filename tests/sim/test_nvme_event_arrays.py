"""An NVMe drive's events name the md arrays it is in (``md_arrays``, as its temperature events do): a link
that slows, is lost or comes back, a state change, the drive appearing or disappearing. The dashboard and a
notification then say which array a slowed drive slows without looking the drive up in a frame."""

from __future__ import annotations

from pathlib import Path

from rigmon.sim.scenarios.model_load import find_storage
from tests.sim.test_storage_scenarios import Bench


def test_a_partitioned_drive_whose_link_slows_names_its_array(tmp_path: Path) -> None:
    # The enclosure's drives were partitioned before mdadm --create: md127 holds nvme0n1p1 and nvme1n1p1.
    bench = Bench("nvme-thermal-throttle", tmp_path)
    bench.run_to(3.0)
    drive = find_storage(bench.node).drive("nvme0n1")
    drive.retrain("8.0 GT/s PCIe", 4)
    bench.run_to(5.0)
    drive.retrain("16.0 GT/s PCIe", 4)
    bench.run_to(7.0)
    link = [(e.kind, e.subject, e.data["md_arrays"]) for e in bench.events if e.kind.startswith("nvme_link")]
    assert link == [("nvme_link_changed", "nvme:nvme0", "md127"), ("nvme_link_below_max", "nvme:nvme0", "md127"),
                    ("nvme_link_changed", "nvme:nvme0", "md127"), ("nvme_link_recovered", "nvme:nvme0", "md127")]
    slowed = next(e for e in bench.events if e.kind == "nvme_link_below_max")
    assert "PCIe link below its maximum in md127: 8 GT/s x4" in slowed.message


def test_a_drive_trained_slow_from_the_start_names_its_array_and_a_lost_one_too(tmp_path: Path) -> None:
    bench = Bench("nvme-link-gen3", tmp_path)  # md127: RAID0 of nvme0n1 and nvme1n1, nvme1 at Gen3
    bench.run_to(2.0)
    assert [(e.subject, e.data["md_arrays"]) for e in bench.events if e.kind == "nvme_link_below_max"] == [
        ("nvme:nvme1", "md127")]
    drive = find_storage(bench.node).drive("nvme1n1")
    drive.retrain("Unknown", 63)
    bench.run_to(3.0)
    assert [(e.subject, e.data["md_arrays"]) for e in bench.events if e.kind == "nvme_link_lost"] == [
        ("nvme:nvme1", "md127")]


def test_a_drive_that_disappears_names_the_array_it_was_in(tmp_path: Path) -> None:
    bench = Bench("nvme-link-gen3", tmp_path)
    bench.run_to(2.0)
    find_storage(bench.node).drive("nvme0n1").present = False
    bench.run_to(3.0)
    gone = [e for e in bench.events if e.kind == "nvme_removed"]
    assert [(e.subject, e.data["md_arrays"]) for e in gone] == [("nvme:nvme0", "md127")]
    assert gone[0].message.endswith("disappeared in md127")
