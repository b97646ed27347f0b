"""Thunderbolt collector: speed strings, expectations, degraded links, change events and udev re-reads."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft, NoData
from rigmon.collectors.thunderbolt import (
    ThunderboltCollector,
    classify,
    expected_link,
    judge_lane_speed,
    judge_link,
    parse_lanes,
    parse_tb_speed,
)
from rigmon.hw.root import MAX_READ_BYTES, HostRoot
from rigmon.schema import ThunderboltDeviceReading
from rigmon.sim import write_tree
from rigmon.sim.udev import FakeUdevSource, SilentUdevSource

DEV = "/sys/bus/thunderbolt/devices"
DEVPATH = "/devices/pci0000:00/0000:00:08.3/0000:c6:00.5/domain0/0-0/0-1"


@pytest.mark.parametrize(("text", "gbps"), [
    ("20.0 Gb/s", 20.0), ("10.0 Gb/s", 10.0), ("40.0 Gb/s", 40.0), ("20.0 Gb/s\n", 20.0),
    ("20.0", None), ("20.0 GT/s", None), ("fast Gb/s", None), (None, None),
    # The kernel prints an unsigned number: anything else is a garbled read.
    ("nan Gb/s", None), ("inf Gb/s", None), ("1e400 Gb/s", None), ("-20.0 Gb/s", None),
])
def test_speed_strings(text: str | None, gbps: float | None) -> None:
    assert parse_tb_speed(text) == gbps


def test_lanes() -> None:
    assert [parse_lanes(t) for t in ("1", "2", "3", "0", "x", None)] == [1, 2, 3, None, None, None]


def test_names() -> None:
    assert classify("0-0", False) == ("host", 0)
    assert classify("1-1", False) == ("device", 1)
    assert classify("0-301", False) == ("device", 0)
    assert classify("0-1", True) == ("xdomain", 0)
    assert classify("0-0:1.1", False) == ("retimer", 0)
    assert classify("domain0", False) is None
    assert classify("0-1.0", False) is None


def test_expectations() -> None:
    assert expected_link(4, None, None) == (40.0, "generation")
    assert expected_link(3, None, 20.0) == (40.0, "generation")
    assert expected_link(4, None, 80.0) == (80.0, "best_seen")
    assert expected_link(None, None, 20.0) == (20.0, "best_seen")
    assert expected_link(4, 20.0, 40.0) == (20.0, "config")
    assert expected_link(None, None, None) == (None, None)


def test_judgement() -> None:
    assert judge_link(40.0, 40.0, 2, 2, 40.0) == ("ok", None)
    assert judge_link(20.0, 20.0, 2, 2, 40.0)[0] == "degraded"
    assert judge_link(20.0, 40.0, 2, 2, 20.0) == ("degraded", "rx 20 Gb/s != tx 40 Gb/s")
    # USB4 v2 asymmetric: three lanes one way, one the other, at 40 Gb/s a lane.
    assert judge_link(40.0, 120.0, 1, 3, 80.0) == ("ok", None)
    assert judge_link(None, None, None, None, 40.0) == ("unknown", None)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def monotonic(self) -> float:
        return self.now


def _tree(tmp_path: Path, speed: str = "20.0 Gb/s", lanes: str = "2") -> None:
    write_tree(tmp_path, {
        f"{DEV}/domain0/security": "user\n",
        f"{DEV}/0-0/generation": "4\n",
        f"{DEV}/0-0/unique_id": "d1030000-0080-7708-2330-a1c81e0a1900\n",
        f"{DEV}/0-1/generation": "4\n",
        f"{DEV}/0-1/authorized": "1\n",
        f"{DEV}/0-1/unique_id": "d1030000-0080-7708-2330-a1c81e0a1914\n",
        f"{DEV}/0-1/vendor_name": "OWC\n",
        f"{DEV}/0-1/tx_speed": f"{speed}\n",
        f"{DEV}/0-1/rx_speed": f"{speed}\n",
        f"{DEV}/0-1/tx_lanes": f"{lanes}\n",
        f"{DEV}/0-1/rx_lanes": f"{lanes}\n",
    })


def _split(records: Sequence[object]) -> tuple[dict[str, ThunderboltDeviceReading], list[EventDraft]]:
    readings = {r.name: r for r in records if isinstance(r, ThunderboltDeviceReading)}
    return readings, [r for r in records if isinstance(r, EventDraft)]


def test_host_router_without_speed_files_is_not_an_error(tmp_path: Path) -> None:
    _tree(tmp_path)
    readings, events = _split(ThunderboltCollector(HostRoot(tmp_path), Clock()).collect())
    assert readings["0-0"].kind == "host" and readings["0-0"].link_state == "unknown"
    assert readings["0-1"].link_state == "ok" and readings["0-1"].rx_gbps == 40.0
    assert events == []


class ReadLog(HostRoot):
    """A root that notes every attribute path read through it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.paths: list[str] = []

    def read_attr(self, rel: str, max_bytes: int = MAX_READ_BYTES) -> str | None:
        self.paths.append(rel)
        return super().read_attr(rel, max_bytes)


def test_a_host_routers_hidden_link_files_are_not_read(tmp_path: Path) -> None:
    # The kernel never shows rx/tx speed and lanes for a host router (route 0): no reads of
    # files that cannot exist, every tick; a device router's are read every tick.
    _tree(tmp_path)
    root = ReadLog(tmp_path)
    collector = ThunderboltCollector(root, Clock())
    collector.collect()
    root.paths.clear()
    readings, _ = _split(collector.collect())
    assert not [p for p in root.paths if "/0-0/" in p and p.rsplit("/", 1)[1] in ("rx_speed", "tx_speed",
                                                                                   "rx_lanes", "tx_lanes")]
    assert {p.rsplit("/", 1)[1] for p in root.paths if "/0-1/" in p} >= {"rx_speed", "tx_speed", "rx_lanes",
                                                                          "tx_lanes"}
    assert readings["0-0"].rx_speed_gbps is None and readings["0-0"].link_state == "unknown"
    assert readings["0-1"].rx_gbps == 40.0


def test_link_dropping_to_10g_is_an_event_and_degraded(tmp_path: Path) -> None:
    _tree(tmp_path)
    clock = Clock()
    collector = ThunderboltCollector(HostRoot(tmp_path), clock)
    collector.collect()
    _tree(tmp_path, speed="10.0 Gb/s")
    clock.now = 5.0
    readings, events = _split(collector.collect())
    assert readings["0-1"].link_state == "degraded"
    assert readings["0-1"].degraded_reason == "20 Gb/s below expected 40 Gb/s"
    assert [(e.kind, e.severity) for e in events] == [("tb_link_changed", "warning"), ("tb_link_degraded", "warning")]
    assert events[0].at == 1_700_000_005.0
    assert events[0].data is not None and events[0].data["from_tx_gbps"] == 40.0
    _tree(tmp_path)
    readings, events = _split(collector.collect())
    assert readings["0-1"].link_state == "ok"
    assert [e.kind for e in events] == ["tb_link_changed", "tb_link_recovered"]


def test_link_that_comes_up_degraded_is_flagged(tmp_path: Path) -> None:
    _tree(tmp_path, lanes="1")
    readings, events = _split(ThunderboltCollector(HostRoot(tmp_path), Clock()).collect())
    assert readings["0-1"].link_state == "degraded"
    assert [e.kind for e in events] == ["tb_link_degraded"]


def test_configured_expectation_by_unique_id(tmp_path: Path) -> None:
    _tree(tmp_path, speed="10.0 Gb/s")
    collector = ThunderboltCollector(HostRoot(tmp_path), Clock(),
                                     expected_gbps={"d1030000-0080-7708-2330-a1c81e0a1914": 20.0})
    readings, events = _split(collector.collect())
    assert (readings["0-1"].link_state, readings["0-1"].expected_source) == ("ok", "config")


def test_unplug_and_replug_are_events(tmp_path: Path) -> None:
    _tree(tmp_path)
    collector = ThunderboltCollector(HostRoot(tmp_path), Clock())
    collector.collect()
    shutil.rmtree(tmp_path / DEV.lstrip("/") / "0-1")
    readings, events = _split(collector.collect())
    assert "0-1" not in readings and [e.kind for e in events] == ["tb_device_removed"]
    _tree(tmp_path)
    _, events = _split(collector.collect())
    assert [e.kind for e in events] == ["tb_device_added"]


def test_no_bus_is_absent(tmp_path: Path) -> None:
    with pytest.raises(NoData):
        ThunderboltCollector(HostRoot(tmp_path), Clock()).collect()


def _watched(tmp_path: Path) -> tuple[ThunderboltCollector, FakeUdevSource, list[list[object]], threading.Event]:
    """A collector of the tree `_tree` writes, read once and started on a fake udev source: what it pushes
    is appended to the list, and the event set at each push."""
    _tree(tmp_path)
    source = FakeUdevSource()
    collector = ThunderboltCollector(HostRoot(tmp_path), Clock(), events=source)
    collector.collect()
    pushed: list[list[object]] = []
    got = threading.Event()

    def push(records: Sequence[object]) -> None:
        pushed.append(list(records))
        got.set()

    collector.start(push)
    return collector, source, pushed, got


def test_udev_change_triggers_an_immediate_reread(tmp_path: Path) -> None:
    collector, source, pushed, got = _watched(tmp_path)
    try:
        # Lane bonding failed after enumeration: the kernel changes the file, then sends a bare change.
        _tree(tmp_path, lanes="1")
        source.inject("change", DEVPATH, "thunderbolt", "thunderbolt_device", USB4_VERSION="1.0", USB4_TYPE="device")
        assert got.wait(5.0)
        readings, events = _split(pushed[0])
        assert readings["0-1"].tx_lanes == 1 and readings["0-1"].link_state == "degraded"
        assert [e.kind for e in events] == ["tb_link_changed", "tb_link_degraded"]
        # Lost events (ENOBUFS) make it re-scan too.
        got.clear()
        _tree(tmp_path)
        source.overflow()
        assert got.wait(5.0)
        readings, _ = _split(pushed[1])
        assert readings["0-1"].tx_lanes == 2
        # Events of other subsystems are ignored.
        got.clear()
        source.inject("add", "/devices/virtual/block/loop0", "block", "disk")
        assert not got.wait(0.6)
    finally:
        collector.close()
    assert source.closed


def test_an_unplug_and_replug_within_one_udev_burst_are_events(tmp_path: Path) -> None:
    # Incident 5: a USB4 link flaps. The kernel removes the router and adds it again (a remove and an add
    # uevent) faster than a read: the re-read after the burst saw it present with the same link, as if
    # nothing had happened, and the flap left no event.
    collector, source, pushed, got = _watched(tmp_path)
    try:
        source.inject("remove", DEVPATH, "thunderbolt", "thunderbolt_device")
        source.inject("add", DEVPATH, "thunderbolt", "thunderbolt_device", USB4_VERSION="1.0", USB4_TYPE="device")
        assert got.wait(5.0)
    finally:
        collector.close()
    readings, events = _split([r for records in pushed for r in records])
    assert readings["0-1"].link_state == "ok"
    assert [(e.kind, e.subject) for e in events] == [("tb_device_removed", "link:0-1"), ("tb_device_added", "link:0-1")]
    assert events[0].message == "Thunderbolt 0-1 (OWC) disconnected (udev: back before the next read)"
    assert events[1].message == "Thunderbolt 0-1 (OWC) connected again at 20 Gb/s x2"
    # A plain read after it sees nothing new.
    assert _split(collector.collect())[1] == []


def test_silent_udev_is_quiet(tmp_path: Path) -> None:
    _tree(tmp_path)
    pushed: list[object] = []
    collector = ThunderboltCollector(HostRoot(tmp_path), Clock(), events=SilentUdevSource())
    collector.start(pushed.append)
    try:
        readings, _ = _split(collector.collect())
        assert readings["0-1"].link_state == "ok"
    finally:
        collector.close()
    assert pushed == []


def test_lane_speed_is_judged_when_the_lane_count_is_unknown() -> None:
    missing = ("rx_lanes", "tx_lanes")
    assert judge_lane_speed(10.0, 10.0, 40.0, missing) == (
        "degraded", "10 Gb/s a lane below 20 Gb/s; lane count unknown (no rx_lanes, tx_lanes)", None)
    state, reason, why = judge_lane_speed(20.0, 20.0, 40.0, missing)
    assert (state, reason) == ("unknown", None) and why is not None and "rx_lanes, tx_lanes" in why
    assert judge_lane_speed(None, None, 40.0, ("rx_speed", "tx_speed", "rx_lanes", "tx_lanes")) == (
        "unknown", None, "no rx_speed, tx_speed, rx_lanes, tx_lanes")


def test_xdomain_without_uevent_is_known_by_its_attributes(tmp_path: Path) -> None:
    base = "/sys/bus/thunderbolt/devices"
    write_tree(tmp_path, {
        f"{base}/0-0/generation": "4\n", f"{base}/0-0/authorized": "1\n", f"{base}/0-0/unique_id": "a\n",
        # 5.11-5.14 XDomain: link files, no maxhopid, none of a router's attributes.
        f"{base}/0-1/unique_id": "b\n", f"{base}/0-1/tx_speed": "10.0 Gb/s\n", f"{base}/0-1/rx_speed": "10.0 Gb/s\n",
        f"{base}/0-1/tx_lanes": "2\n", f"{base}/0-1/rx_lanes": "2\n",
        # A router of the same tree without uevent keeps being a router.
        f"{base}/0-3/unique_id": "c\n", f"{base}/0-3/authorized": "1\n", f"{base}/0-3/generation": "4\n",
        f"{base}/0-3/tx_speed": "20.0 Gb/s\n", f"{base}/0-3/rx_speed": "20.0 Gb/s\n",
        f"{base}/0-3/tx_lanes": "2\n", f"{base}/0-3/rx_lanes": "2\n",
    })
    got = {r.name: r for r in ThunderboltCollector(HostRoot(tmp_path), Clock()).collect()
           if isinstance(r, ThunderboltDeviceReading)}
    assert (got["0-1"].kind, got["0-1"].expected_gbps, got["0-1"].link_state) == ("xdomain", 40.0, "degraded")
    assert (got["0-3"].kind, got["0-3"].link_state) == ("device", "ok")


def test_nvm_version_is_read_as_a_fact_once_readable(tmp_path: Path) -> None:
    """A router's NVM version is read until it is readable (safe mode, NVM not read yet), then
    kept like the other facts until the device set changes or a udev event says so."""
    _tree(tmp_path)
    collector = ThunderboltCollector(HostRoot(tmp_path), Clock())
    readings, _ = _split(collector.collect())
    assert readings["0-1"].nvm_version is None  # not readable yet
    tree = write_tree(tmp_path, {f"{DEV}/0-1/nvm_version": "55.0\n"})
    readings, _ = _split(collector.collect())
    assert readings["0-1"].nvm_version == "55.0"
    tree.write(f"{DEV}/0-1/nvm_version", "56.0\n")  # not without a restart: not read every tick
    readings, _ = _split(collector.collect())
    assert readings["0-1"].nvm_version == "55.0" and readings["0-1"].link_state == "ok"
    # The upgraded router restarts: it goes (the device set changes) and comes back.
    shutil.rmtree(tmp_path / DEV.lstrip("/") / "0-1")
    readings, _ = _split(collector.collect())
    assert "0-1" not in readings
    _tree(tmp_path)
    write_tree(tmp_path, {f"{DEV}/0-1/nvm_version": "56.0\n"})
    readings, _ = _split(collector.collect())
    assert readings["0-1"].nvm_version == "56.0"


@pytest.mark.parametrize(("name", "text", "named"), [
    ("rx_lanes", None, "no rx_lanes"),
    ("rx_lanes", "x2", "no rx_lanes (holds 'x2')"),
    ("tx_speed", "", "no tx_speed (holds '')"),
    ("tx_speed", "nan Gb/s", "no tx_speed (holds 'nan Gb/s')"),
])
def test_one_unusable_link_file_is_unknown_not_a_degraded_link(tmp_path: Path, name: str, text: str | None,
                                                               named: str) -> None:
    """One direction's file unreadable, empty or garbled says nothing of the link: no
    ``rx ? != tx 40 Gb/s`` degraded link (and its alarm: re-plug both ends), no link change
    (``20 Gb/s x2 -> rx 20 Gb/s x?``, a warning, and back); the link is unknown, named by the
    file and what it holds, and judged again on the next read, against the last link read."""
    _tree(tmp_path)
    collector = ThunderboltCollector(HostRoot(tmp_path), Clock())
    collector.collect()
    path = tmp_path / DEV.lstrip("/") / "0-1" / name
    if text is None:
        path.unlink()
    else:
        path.write_text(text)
    readings, events = _split(collector.collect())
    link = readings["0-1"]
    assert (link.link_state, link.degraded_reason) == ("unknown", None)
    assert link.unknown_reason is not None and named in link.unknown_reason
    assert events == []
    _tree(tmp_path)
    readings, events = _split(collector.collect())
    assert (readings["0-1"].link_state, readings["0-1"].expected_gbps) == ("ok", 40.0)
    assert events == []  # not "back at 20 Gb/s x2": it never left


def test_a_degraded_link_read_garbled_for_a_while_is_one_degradation(tmp_path: Path) -> None:
    _tree(tmp_path)
    collector = ThunderboltCollector(HostRoot(tmp_path), Clock())
    collector.collect()
    _tree(tmp_path, speed="10.0 Gb/s")
    _, events = _split(collector.collect())
    assert [e.kind for e in events] == ["tb_link_changed", "tb_link_degraded"]
    (tmp_path / DEV.lstrip("/") / "0-1" / "rx_lanes").write_text("")
    readings, events = _split(collector.collect())
    # Judged on its lane speed alone: still degraded, and the same degradation.
    assert readings["0-1"].link_state == "degraded" and events == []
    (tmp_path / DEV.lstrip("/") / "0-1" / "rx_speed").write_text("nan Gb/s")
    readings, events = _split(collector.collect())
    assert readings["0-1"].link_state == "degraded" and events == []
    _tree(tmp_path, speed="10.0 Gb/s")
    _, events = _split(collector.collect())
    assert events == []
    (tmp_path / DEV.lstrip("/") / "0-1" / "tx_lanes").unlink()
    collector.collect()
    _tree(tmp_path)  # back at 20 Gb/s a lane: against the last link read, 10 Gb/s x2
    _, events = _split(collector.collect())
    assert [(e.kind, e.message) for e in events] == [
        ("tb_link_changed", "Thunderbolt 0-1 (OWC) link 10 Gb/s x2 -> 20 Gb/s x2"),
        ("tb_link_recovered", "Thunderbolt 0-1 (OWC) back at 20 Gb/s x2")]


def test_a_garbled_lane_rate_does_not_raise_the_expected_rate(tmp_path: Path) -> None:
    """``inf Gb/s`` read once would be the best speed seen, so the expected one, for the agent's
    life: every later read at full speed would be degraded against ``inf Gb/s``."""
    _tree(tmp_path)
    collector = ThunderboltCollector(HostRoot(tmp_path), Clock())
    collector.collect()
    _tree(tmp_path, speed="inf Gb/s")
    readings, _ = _split(collector.collect())
    assert readings["0-1"].rx_speed_gbps is None and readings["0-1"].link_state == "unknown"
    _tree(tmp_path)
    readings, _ = _split(collector.collect())
    assert (readings["0-1"].link_state, readings["0-1"].expected_gbps) == ("ok", 40.0)


@pytest.mark.parametrize("unread", ["", "yes", None])
def test_an_unreadable_authorized_file_is_no_deauthorization(tmp_path: Path, unread: str | None) -> None:
    """An empty ``authorized`` file read as False: ``authorized True -> False`` and back, a device
    that seemed de-authorized. It is not present (null), and a change is judged against the last read."""
    _tree(tmp_path)
    collector = ThunderboltCollector(HostRoot(tmp_path), Clock())
    collector.collect()
    path = tmp_path / DEV.lstrip("/") / "0-1" / "authorized"
    if unread is None:
        path.unlink()
    else:
        path.write_text(unread)
    readings, events = _split(collector.collect())
    assert readings["0-1"].authorized is None and events == []
    path.write_text("1\n")
    readings, events = _split(collector.collect())
    assert readings["0-1"].authorized is True and events == []
    path.write_text("")
    collector.collect()
    path.write_text("0\n")
    readings, events = _split(collector.collect())
    assert [(e.kind, e.message) for e in events] == [
        ("tb_authorized_changed", "Thunderbolt 0-1 (OWC) authorized True -> False")]
