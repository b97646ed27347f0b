"""NVMe collector: PCIe speed strings of old and new kernels, lost links, namespaces, hwmon, events."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft
from rigmon.collectors.nvme import (
    NvmeCollector,
    is_link_lost,
    judge_nvme_link,
    namespace_of,
    parse_link_speed,
    parse_link_width,
    pcie_gen,
    strip_padded,
    upstream_port,
)
from rigmon.hw.root import HostRoot
from rigmon.schema import NvmeReading
from rigmon.sim import write_tree
from tests.collectors.root_helpers import ListLog
from tests.collectors.test_device_facts import nvme_files


@pytest.mark.parametrize(("text", "gts", "gen"), [
    ("16.0 GT/s PCIe", 16.0, 4), ("8.0 GT/s PCIe", 8.0, 3), ("2.5 GT/s PCIe", 2.5, 1),
    ("8 GT/s", 8.0, 3), ("5 GT/s", 5.0, 2), ("64.0 GT/s PCIe", 64.0, 6),
    ("Unknown", None, None), ("Unknown speed", None, None), (None, None, None),
    # A garbled read of more digits than a float holds is no speed, not an infinite one.
    pytest.param("9" * 400 + " GT/s PCIe", None, None, id="400 digits GT/s"),
])
def test_link_speed_strings(text: str | None, gts: float | None, gen: int | None) -> None:
    assert parse_link_speed(text) == gts
    assert pcie_gen(parse_link_speed(text)) == gen


def test_lost_link() -> None:
    assert is_link_lost("Unknown", 4)
    assert is_link_lost("Unknown speed", None)
    assert is_link_lost("8.0 GT/s PCIe", 63)
    assert not is_link_lost("8.0 GT/s PCIe", 4)
    assert parse_link_width("0") is None and parse_link_width("x") is None and parse_link_width("16") == 16


def test_namespaces_map_through_the_controller() -> None:
    assert namespace_of("nvme1n1") == "nvme1n1"
    assert namespace_of("nvme0c1n1") == "nvme0n1"
    assert namespace_of("hwmon3") is None and namespace_of("device") is None


def test_identity_fields_lose_their_padding() -> None:
    assert strip_padded("Samsung SSD 990 PRO 2TB" + " " * 17) == "Samsung SSD 990 PRO 2TB"
    assert strip_padded("    ") is None


def test_link_retrain_is_an_event(tmp_path: Path) -> None:
    files = {
        "/sys/class/nvme/nvme0/model": "Samsung SSD 990 PRO 2TB                 \n",
        "/sys/class/nvme/nvme0/state": "live\n",
        "/sys/class/nvme/nvme0/address": "0000:64:00.0\n",
        "/sys/bus/pci/devices/0000:64:00.0/current_link_speed": "16.0 GT/s PCIe\n",
        "/sys/bus/pci/devices/0000:64:00.0/current_link_width": "4\n",
    }
    write_tree(tmp_path, files)
    collector = NvmeCollector(HostRoot(tmp_path))
    (first,) = collector.collect()
    assert isinstance(first, NvmeReading) and first.link_speed_gts == 16.0 and first.temp_c is None
    write_tree(tmp_path, {"/sys/bus/pci/devices/0000:64:00.0/current_link_speed": "8.0 GT/s PCIe\n"})
    records = collector.collect()
    events = [r for r in records if isinstance(r, EventDraft)]
    assert [e.kind for e in events] == ["nvme_link_changed"]
    assert events[0].data == {"from_gts": 16.0, "to_gts": 8.0, "from_width": 4, "to_width": 4, "md_arrays": None}
    write_tree(tmp_path, {"/sys/bus/pci/devices/0000:64:00.0/current_link_speed": "Unknown\n"})
    assert [r.kind for r in collector.collect() if isinstance(r, EventDraft)] == ["nvme_link_lost"]


@pytest.mark.parametrize(("args", "state", "reason"), [
    ((16.0, 4, 16.0, 4, None, None, False), "ok", None),
    ((8.0, 4, 16.0, 4, None, None, False), "degraded", "8 GT/s x4, drive can do 16 GT/s x4"),
    ((16.0, 2, 16.0, 4, 16.0, 4, False), "degraded", "16 GT/s x2, drive and port can do 16 GT/s x4"),
    # A Gen4 drive in a Gen3 slot trains at Gen3: that is all the link can do.
    ((8.0, 4, 16.0, 4, 8.0, 4, False), "ok", None),
    ((8.0, 4, 16.0, 4, 16.0, 4, False), "degraded", "8 GT/s x4, drive and port can do 16 GT/s x4"),
    ((None, None, 16.0, 4, None, None, True), "lost", None),
    ((8.0, 4, None, None, None, None, False), "unknown", None),
])
def test_link_below_the_lower_maximum_is_degraded(args: tuple[object, ...], state: str, reason: str | None) -> None:
    assert judge_nvme_link(*args) == (state, reason)  # type: ignore[arg-type]


def test_upstream_port_of_a_function() -> None:
    assert upstream_port("/sys/devices/pci0000:00/0000:00:01.2/0000:64:00.0") == "/sys/devices/pci0000:00/0000:00:01.2"
    assert upstream_port("/sys/devices/pci0000:00/0000:00:01.2") is None  # root port: host bridge above
    assert upstream_port("/sys/bus/pci/devices/0000:64:00.0") is None
    assert upstream_port(None) is None


def test_a_link_that_cannot_be_read_for_a_while_is_not_a_link_change(tmp_path: Path) -> None:
    # current_link_speed/width answer EINVAL while the function's config space cannot be read
    # (D3cold, a reset under way): HostRoot reads that as absent, as a removed file.
    pci = "/sys/bus/pci/devices/0000:64:00.0"
    tree = write_tree(tmp_path, {
        "/sys/class/nvme/nvme0/model": "Samsung SSD 990 PRO 2TB                 \n",
        "/sys/class/nvme/nvme0/state": "live\n",
        "/sys/class/nvme/nvme0/address": "0000:64:00.0\n",
        f"{pci}/current_link_speed": "16.0 GT/s PCIe\n", f"{pci}/current_link_width": "4\n",
        f"{pci}/max_link_speed": "16.0 GT/s PCIe\n", f"{pci}/max_link_width": "4\n",
    })
    collector = NvmeCollector(HostRoot(tmp_path))
    collector.collect()
    tree.remove(f"{pci}/current_link_speed")
    tree.remove(f"{pci}/current_link_width")
    unreadable = collector.collect()
    assert [r.link_state for r in unreadable if isinstance(r, NvmeReading)] == ["unknown"]
    assert not [r for r in unreadable if isinstance(r, EventDraft)]
    tree.write(f"{pci}/current_link_speed", "16.0 GT/s PCIe\n")
    tree.write(f"{pci}/current_link_width", "4\n")
    assert not [r for r in collector.collect() if isinstance(r, EventDraft)]
    # Back at another speed: that is a change, against the last link that was read.
    tree.remove(f"{pci}/current_link_speed")
    collector.collect()
    tree.write(f"{pci}/current_link_speed", "8.0 GT/s PCIe\n")
    events = [r for r in collector.collect() if isinstance(r, EventDraft)]
    assert [e.kind for e in events] == ["nvme_link_changed", "nvme_link_below_max"]
    assert events[0].data == {"from_gts": 16.0, "to_gts": 8.0, "from_width": 4, "to_width": 4, "md_arrays": None}


@pytest.mark.parametrize("unread", ["", None])
def test_an_empty_or_unreadable_state_is_not_present_and_no_state_change(tmp_path: Path, unread: str | None) -> None:
    """An empty ``state`` file was the state ``""`` (a warning ``state live -> `` and back): it says
    nothing, so the state is not present (null) and a change is judged against the last state read."""
    tree = write_tree(tmp_path, {
        "/sys/class/nvme/nvme0/model": "Samsung SSD 990 PRO 2TB\n",
        "/sys/class/nvme/nvme0/state": "live\n",
        "/sys/class/nvme/nvme0/address": "0000:64:00.0\n",
    })
    collector = NvmeCollector(HostRoot(tmp_path))
    collector.collect()
    if unread is None:
        tree.remove("/sys/class/nvme/nvme0/state")
    else:
        tree.write("/sys/class/nvme/nvme0/state", unread)
    records = collector.collect()
    assert [r.state for r in records if isinstance(r, NvmeReading)] == [None]
    assert not [r for r in records if isinstance(r, EventDraft)]
    tree.write("/sys/class/nvme/nvme0/state", "live\n")
    assert not [r for r in collector.collect() if isinstance(r, EventDraft)]
    tree.write("/sys/class/nvme/nvme0/state", "")
    collector.collect()
    tree.write("/sys/class/nvme/nvme0/state", "resetting\n")
    events = [r for r in collector.collect() if isinstance(r, EventDraft)]
    assert [(e.kind, e.severity, e.message) for e in events] == [
        ("nvme_state_changed", "warning", "NVMe nvme0 (Samsung SSD 990 PRO 2TB) state live -> resetting")]


def test_controller_without_namespaces_is_listed_again_backing_off(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, nvme_files("nvme0", "Samsung SSD 990 PRO 2TB"))
    root = ListLog(tmp_path)
    collector = NvmeCollector(root)
    # A drive with no namespace (fresh, or its namespaces deleted): not listed every read, forever.
    for _ in range(20):
        assert [r.namespaces for r in collector.collect() if isinstance(r, NvmeReading)] == [()]
    # Listed at reads 1, 2, 4, 8 and 16: what never comes costs a listing now and then.
    assert root.listed.count("/sys/class/nvme/nvme0") == 5
    # A namespace created is seen at the next look, and its listing is kept after.
    tree.write("/sys/class/nvme/nvme0/nvme0n1/size", "100\n")
    namespaces = [next(r for r in collector.collect() if isinstance(r, NvmeReading)).namespaces for _ in range(16)]
    assert namespaces[-1] == ("nvme0n1",) and namespaces.index(("nvme0n1",)) <= 15
    root.listed.clear()
    for _ in range(5):
        collector.collect()
    assert root.listed.count("/sys/class/nvme/nvme0") == 0
