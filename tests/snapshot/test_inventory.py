"""A bundle's inventory.json holds what a node is made of (models, serials, firmware, maximum link widths),
never a reading: a hot drive's warning reason changes from one minute to the next."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import msgspec

from rigmon.collectors.nvme import NvmeCollector
from rigmon.hw.root import HostRoot
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame, Readings
from rigmon.schema.record import Record
from rigmon.sim import write_tree
from rigmon.snapshot.bundle import inventory
from rigmon.snapshot.inventory import FACTS
from tests.collectors.test_device_facts import nvme_files, nvme_readings


def hot_drive_frame(tmp_path: Path) -> Frame:
    """A frame holding one NVMe drive above its warning temperature, read by the NVMe collector from its files."""
    hwmon = "/sys/class/nvme/nvme0/hwmon2"
    write_tree(tmp_path, {**nvme_files("nvme0", "Samsung SSD 990 PRO 2TB"), f"{hwmon}/temp1_input": "83850\n",
                          f"{hwmon}/temp1_max": "81850\n", f"{hwmon}/temp1_alarm": "1\n",
                          "/sys/class/nvme/nvme0/device/current_link_width": "2\n"})
    drive = nvme_readings(NvmeCollector(HostRoot(tmp_path)).collect())["nvme0"]
    return Frame(schema=SCHEMA_VERSION, node="rig7", run_id="r1", seq=1, taken_at=1_700_000_000.0,
                 agent_start=1_699_999_000.0, readings=Readings(nvme=(drive,)),
                 collectors={"nvme": CollectorStatus(state="ok", ok=True),
                             "gpu": CollectorStatus(state="absent", ok=True, error="no NVIDIA driver")})


def test_a_reading_is_not_in_the_inventory_and_a_fact_is(tmp_path: Path) -> None:
    frame = hot_drive_frame(tmp_path)
    (drive,) = frame.readings.nvme
    assert drive.temp_warning_reason and drive.link_width == 2 and drive.temp_c == 83.85
    inv = inventory(None, frame)
    (listed,) = inv["readings"]["nvme"]
    # Facts: the drive's model, serial, firmware, its link's capability and its own limits.
    assert (listed["model"], listed["serial"], listed["firmware"]) == ("Samsung SSD 990 PRO 2TB", "Snvme0",
                                                                      "4B2QJXD7")
    assert (listed["max_link_width"], listed["max_link_speed_gts"], listed["temp_max_c"]) == (4, 16.0, 81.85)
    # Readings: the warning's reason, the temperature, the link's present width and state.
    for reading in ("temp_warning_reason", "temp_c", "temp_over_max", "link_width", "link_state", "state"):
        assert reading not in listed, reading
    assert drive.temp_warning_reason not in json.dumps(inv)
    # Which hardware the node lacks is a fact; a collector's health is not.
    assert inv["absent"] == ["gpu"] and "collectors" not in inv


def _record_types(tp: object) -> set[type[Record]]:
    """The record types ``tp`` (an annotation) holds, at any depth of tuples, unions and dicts."""
    if isinstance(tp, type) and issubclass(tp, Record):
        found = {tp}
        for field in msgspec.structs.fields(tp):
            found |= _record_types(field.type)
        return found
    return set().union(*(_record_types(arg) for arg in typing.get_args(tp)))


def test_every_record_a_frame_carries_is_decided_and_every_fact_is_one_of_its_fields() -> None:
    # A new source's record must be named in FACTS (its facts, or none): nothing enters by default.
    carried = set().union(*(_record_types(f.type) for f in msgspec.structs.fields(Readings)))
    assert carried == set(FACTS), carried ^ set(FACTS)
    for tp, names in FACTS.items():
        fields = {f.name for f in msgspec.structs.fields(tp)}
        assert set(names) <= fields, (tp.__name__, set(names) - fields)
