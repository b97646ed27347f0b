"""Host collector network additions: interface kind and the stalled flag."""

from __future__ import annotations

from pathlib import Path

from rigmon.collectors.base import EventDraft
from rigmon.collectors.host import HostCollector, parse_net_kind
from rigmon.hw.root import HostRoot
from rigmon.schema import HostReading, NetInterfaceReading
from rigmon.sim import write_tree

HEAD = "Inter-|   Receive\n face |bytes    packets errs drop fifo frame compressed multicast|bytes\n"


def test_kinds() -> None:
    assert parse_net_kind("thunderbolt0", 1, "thunderbolt-net", True, False, False, False) == "thunderbolt-net"
    assert parse_net_kind("thunderbolt0", 1, None, False, False, False, False) == "thunderbolt-net"
    assert parse_net_kind("enp65s0f0", 1, "mlx5_core", True, False, False, False) == "ethernet"
    assert parse_net_kind("ib0", 32, "mlx5_core", True, False, False, False) == "infiniband"
    assert parse_net_kind("wlp2s0", 1, "iwlwifi", True, True, False, False) == "wifi"
    assert parse_net_kind("br0", 1, None, False, False, True, False) == "bridge"
    assert parse_net_kind("bond0", 1, None, False, False, False, True) == "bond"
    assert parse_net_kind("veth1", 1, None, False, False, False, False) == "virtual"
    assert parse_net_kind("tun0", 65534, None, False, False, False, False) is None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def monotonic(self) -> float:
        return self.now


def _write(tmp_path: Path, packets: int, name: str = "thunderbolt0") -> None:
    write_tree(tmp_path, {
        "/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n",
        "/proc/net/dev": HEAD + f"{name}: {packets * 1500} {packets} 0 0 0 0 0 0 "
                                f"{packets * 1500} {packets} 0 0 0 0 0 0\n",
        f"/sys/class/net/{name}/operstate": "up\n",
        f"/sys/class/net/{name}/carrier": "1\n",
        f"/sys/class/net/{name}/type": "1\n",
    })


def _net(collector: HostCollector) -> NetInterfaceReading:
    (nic,) = [r for r in collector.collect() if isinstance(r, NetInterfaceReading)]
    return nic


def test_an_interface_that_stops_moving_packets_is_stalled(tmp_path: Path) -> None:
    clock = Clock()
    collector = HostCollector(HostRoot(tmp_path), clock, net_stall_after_s=5.0)
    _write(tmp_path, 0)
    assert not _net(collector).stalled
    clock.now = 1.0
    assert not _net(collector).stalled  # up but never carried traffic: idle, not stalled
    for step, packets in ((2.0, 1000), (3.0, 2000), (6.0, 2000), (8.0, 2000)):
        clock.now = step
        _write(tmp_path, packets)
        nic = _net(collector)
    assert nic.kind == "thunderbolt-net"
    assert nic.stalled  # last packet moved at t=3, silent for 5 s
    clock.now = 9.0
    _write(tmp_path, 2100)
    assert not _net(collector).stalled


def test_an_idle_ethernet_link_is_not_stalled(tmp_path: Path) -> None:
    """A real machine's eth0 (and a bridge, Wi-Fi, a veth) is silent for seconds between uses:
    one packet then quiet is idle, not a link that stopped passing traffic."""
    clock = Clock()
    collector = HostCollector(HostRoot(tmp_path), clock, net_stall_after_s=5.0)
    (tmp_path / "sys/class/net/eth0").mkdir(parents=True)
    (tmp_path / "sys/class/net/eth0/device").symlink_to(tmp_path)  # hardware: kind ethernet
    for step, packets in ((0.0, 0), (1.0, 0), (2.0, 1), (3.0, 2), (6.0, 2), (9.0, 2)):
        clock.now = step
        _write(tmp_path, packets, "eth0")
        nic = _net(collector)
    assert nic.kind == "ethernet"
    assert not nic.stalled


def test_an_interface_that_goes_away_comes_back_with_nothing_kept(tmp_path: Path) -> None:
    """Rates and past activity go with the interface (a Thunderbolt cable pulled and plugged back):
    the first reading after its return has no rate, and it is not stalled by its old packets."""
    clock = Clock()
    tree = write_tree(tmp_path, {})
    collector = HostCollector(HostRoot(tmp_path), clock, net_stall_after_s=5.0)
    for step, packets in ((0.0, 0), (1.0, 1000), (2.0, 2000)):
        clock.now = step
        _write(tmp_path, packets)
        nic = _net(collector)
    assert nic.rx_packets_per_s == 1000.0
    tree.write("/proc/net/dev", HEAD)
    for step in (3.0, 4.0):
        clock.now = step
        assert not [r for r in collector.collect() if isinstance(r, NetInterfaceReading)]
    clock.now = 10.0
    _write(tmp_path, 2000)
    nic = _net(collector)
    assert nic.rx_packets_per_s is None and not nic.stalled
    clock.now = 11.0
    assert _net(collector).rx_packets_per_s == 0.0
    clock.now = 20.0
    assert not _net(collector).stalled  # never moved a packet since it came back


def test_a_garbled_net_dev_line_is_one_warning_and_costs_that_interface_only(tmp_path: Path) -> None:
    """A line cut short costs its interface: CPU, memory, temperatures and the other interfaces
    read (before, a ValueError failed the whole host collector). The warning comes once per line."""
    good = " 1 2 0 0 0 0 0 0 3 4 0 0 0 0 0 0\n"
    write_tree(tmp_path, {"/proc/stat": "cpu  1 0 1 8 0 0 0 0 0 0\ncpu0 1 0 1 8 0 0 0 0 0 0\n",
                          "/proc/meminfo": "MemTotal: 1024 kB\n",
                          "/proc/net/dev": HEAD + "  eth0: 5 6 0 0 0 0 0 0 7\n  eth1:" + good})
    collector = HostCollector(HostRoot(tmp_path), Clock())
    first, second = collector.collect(), collector.collect()
    for records in (first, second):
        assert [r.name for r in records if isinstance(r, NetInterfaceReading)] == ["eth1"]
        assert next(r for r in records if isinstance(r, HostReading)).mem_total_bytes == 1024 * 1024
    assert [(e.kind, (e.data or {})["line"]) for e in first if isinstance(e, EventDraft)] == [
        ("net_dev_line_skipped", "eth0: 5 6 0 0 0 0 0 0 7")]
    assert not [e for e in second if isinstance(e, EventDraft)]
    assert collector.net_skipped_lines_total == 2


def test_an_interface_named_in_other_bytes_has_its_link_state_read(tmp_path: Path) -> None:
    # Linux names an interface in any bytes but "/", ":" and white space. /proc/net/dev read with
    # U+FFFD for them named no sysfs directory: an up link showed no state, carrier, speed or MTU.
    import os

    name = b"eth\xf6"
    write_tree(tmp_path, {"/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"})
    (tmp_path / "proc/net").mkdir()
    (tmp_path / "proc/net/dev").write_bytes(HEAD.encode() + name + b": 1500 1 0 0 0 0 0 0 1500 1 0 0 0 0 0 0\n")
    sysfs = os.path.join(os.fsencode(tmp_path / "sys/class/net"), name)
    os.makedirs(sysfs)
    for attr, value in ((b"operstate", b"up"), (b"carrier", b"1"), (b"type", b"1"), (b"speed", b"10000"),
                        (b"mtu", b"9000")):
        with open(os.path.join(sysfs, attr), "wb") as fh:
            fh.write(value + b"\n")
    nic = _net(HostCollector(HostRoot(tmp_path), Clock()))
    assert (nic.operstate, nic.carrier, nic.speed_mbps, nic.mtu) == ("up", True, 10000, 9000)
    assert nic.name == "eth\\xf6"  # the bad byte as the text \xf6 (rigmon.hw.names.text_name)


def _odd_nics(root: Path, names: dict[bytes, tuple[int, bytes]]) -> None:
    """Interfaces named in raw bytes, each in /sys/class/net (with its speed) and /proc/net/dev
    (with its received bytes)."""
    import os

    write_tree(root, {"/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"})
    (root / "proc/net").mkdir()
    lines = b"".join(name + b": %d 1 0 0 0 0 0 0 1500 1 0 0 0 0 0 0\n" % rx for name, (rx, _) in names.items())
    (root / "proc/net/dev").write_bytes(HEAD.encode() + lines)
    for name, (_, speed) in names.items():
        sysfs = os.path.join(os.fsencode(root / "sys/class/net"), name)
        os.makedirs(sysfs)
        for attr, value in ((b"operstate", b"up"), (b"carrier", b"1"), (b"speed", speed)):
            with open(os.path.join(sysfs, attr), "wb") as fh:
                fh.write(value + b"\n")


def test_two_interfaces_differing_only_in_bad_bytes_keep_distinct_names(tmp_path: Path) -> None:
    # U+FFFD for the bad bytes made eth\xf6 and eth\xfc one name: one series, records that overwrite
    # each other. A name spelled "eth\xf6" in plain text meets neither (its backslash is doubled).
    _odd_nics(tmp_path, {b"eth\xf6": (1000, b"10000"), b"eth\xfc": (2000, b"25000"),
                         b"eth\\xf6": (3000, b"1000"), b"eth0": (4000, b"100"), "eth-ü".encode(): (5000, b"40000")})
    records = [r for r in HostCollector(HostRoot(tmp_path), Clock()).collect() if isinstance(r, NetInterfaceReading)]
    got = {r.name: (r.rx_bytes_total, r.speed_mbps) for r in records}
    assert got == {"eth\\xf6": (1000, 10000), "eth\\xfc": (2000, 25000), "eth\\\\xf6": (3000, 1000),
                   "eth0": (4000, 100), "eth-ü": (5000, 40000)}
    assert all(r.name.encode("utf-8") for r in records)  # plain text: no lone surrogate


def test_an_empty_operstate_is_no_state_not_the_state_empty(tmp_path: Path) -> None:
    """An empty operstate file (a driver mid-reset, a garbled read) came through as the state "":
    the frame, the metrics label and the screens showed a link whose state was blank."""
    import os

    write_tree(tmp_path, {"/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"})
    (tmp_path / "proc/net").mkdir()
    (tmp_path / "proc/net/dev").write_bytes(HEAD.encode() + b"eth0: 1500 1 0 0 0 0 0 0 1500 1 0 0 0 0 0 0\n")
    sysfs = tmp_path / "sys/class/net/eth0"
    os.makedirs(sysfs)
    for attr, value in (("operstate", ""), ("carrier", "1\n"), ("type", "1\n"), ("speed", "10000\n")):
        (sysfs / attr).write_text(value)
    nic = _net(HostCollector(HostRoot(tmp_path), Clock()))
    assert nic.operstate is None and nic.carrier is True
