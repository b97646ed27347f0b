"""Network links that lose their carrier (`rigmon.collectors.net_links`, read by the host collector): the
link_lost state, the down / up / flapped events, and the links that never alarm."""

from __future__ import annotations

from pathlib import Path

from rigmon.collectors.base import EventDraft
from rigmon.collectors.host import HostCollector
from rigmon.hw.root import HostRoot
from rigmon.schema import NetInterfaceReading
from rigmon.sim import write_tree
from tests.collectors.test_host_net import HEAD, Clock

NIC = "enp2s0"


def _write(root: Path, carrier: int | None, changes: int, name: str = NIC, device: bool = True,
           rdma: bool = False, rx_bytes: int = 1500) -> None:
    files = {
        "/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n",
        "/proc/net/dev": HEAD + f"{name}: {rx_bytes} 1 0 0 0 0 0 0 1500 1 0 0 0 0 0 0\n",
        f"/sys/class/net/{name}/operstate": "up\n" if carrier else "down\n",
        f"/sys/class/net/{name}/speed": "10000\n" if carrier else "-1\n",
        f"/sys/class/net/{name}/carrier_changes": f"{changes}\n",
        f"/sys/class/net/{name}/type": "1\n",
    }
    if carrier is not None:
        files[f"/sys/class/net/{name}/carrier"] = f"{carrier}\n"
    if device:
        files[f"/sys/class/net/{name}/device/uevent"] = "PCI_CLASS=20000\n"
    if rdma:
        files[f"/sys/class/net/{name}/device/infiniband/mlx5_0/uevent"] = "NAME=mlx5_0\n"
    write_tree(root, files)
    if carrier is None:
        (root / f"sys/class/net/{name}/carrier").unlink(missing_ok=True)


def _read(collector: HostCollector) -> tuple[NetInterfaceReading, list[EventDraft]]:
    records = collector.collect()
    (nic,) = [r for r in records if isinstance(r, NetInterfaceReading)]
    return nic, [r for r in records if isinstance(r, EventDraft)]


def test_a_link_that_loses_its_carrier_is_lost_until_it_is_back(tmp_path: Path) -> None:
    # Incident 7: the 10 GbE link between two nodes drops (a switch port reset): nothing said so; the link only
    # showed "down" on the links screen of a node the operator opened.
    collector = HostCollector(HostRoot(tmp_path), Clock())
    _write(tmp_path, 1, 1)
    nic, events = _read(collector)
    assert nic.link_lost is False and events == []
    _write(tmp_path, 0, 2)
    nic, events = _read(collector)
    assert nic.link_lost is True
    assert [(e.kind, e.severity, e.subject, e.message) for e in events] == [
        ("net_link_down", "warning", "link:enp2s0", "link enp2s0 lost its carrier (it was up at 10 Gb/s)")]
    assert events[0].data == {"kind": "ethernet", "carrier_changes_total": 2, "speed_mbps": 10000}
    # Administratively down as well (carrier reads EINVAL then): still lost, and no second event.
    _write(tmp_path, None, 2)
    nic, events = _read(collector)
    assert nic.link_lost is True and events == []
    _write(tmp_path, 1, 3)
    nic, events = _read(collector)
    assert nic.link_lost is False
    assert [(e.kind, e.message) for e in events] == [("net_link_up", "link enp2s0 is up again at 10 Gb/s")]


def test_a_flap_between_two_reads_is_an_event(tmp_path: Path) -> None:
    collector = HostCollector(HostRoot(tmp_path), Clock())
    _write(tmp_path, 1, 1)
    _read(collector)
    _write(tmp_path, 1, 3)
    nic, events = _read(collector)
    assert nic.link_lost is False
    assert [(e.kind, e.message) for e in events] == [
        ("net_link_flapped", "link enp2s0 lost its carrier and got it back between two reads")]
    _write(tmp_path, 1, 7)
    assert [e.message for e in _read(collector)[1]] == [
        "link enp2s0 lost its carrier and got it back between two reads (2 times)"]
    # A lower count is a new interface under the name, not a flap.
    _write(tmp_path, 1, 1)
    assert _read(collector)[1] == []


def test_links_that_never_alarm(tmp_path: Path) -> None:
    # A port never seen with a carrier (the free second port): not lost.
    collector = HostCollector(HostRoot(tmp_path), Clock())
    _write(tmp_path, 0, 0)
    for _ in range(2):
        nic, events = _read(collector)
        assert nic.link_lost is False and events == []
    # RoCE: the RDMA port's own state says it (rdma_port_down, rdma_port_flapped), once.
    roce = tmp_path / "roce"
    collector = HostCollector(HostRoot(roce), Clock())
    _write(roce, 1, 1, rdma=True)
    _read(collector)
    _write(roce, 0, 2, rdma=True)
    nic, events = _read(collector)
    assert nic.link_lost is False and events == []
    # A virtual interface (veth, docker) going down is its software's business.
    veth = tmp_path / "veth"
    collector = HostCollector(HostRoot(veth), Clock())
    _write(veth, 1, 1, name="veth1", device=False)
    _read(collector)
    _write(veth, 0, 2, name="veth1", device=False)
    nic, events = _read(collector)
    assert nic.kind == "virtual" and nic.link_lost is False and events == []


def test_a_link_whose_interface_goes_away_and_comes_back_is_said_both_ways(tmp_path: Path) -> None:
    # A thunderbolt-net cable unplugged takes thunderbolt0 along (a NIC off the PCIe bus alike): the link vanished
    # from the frame without a word, and came back as if it had never left.
    collector = HostCollector(HostRoot(tmp_path), Clock())
    _write(tmp_path, 1, 1, rx_bytes=10**9)
    _read(collector)
    write_tree(tmp_path, {"/proc/net/dev": HEAD})
    records = collector.collect()
    assert [(r.kind, r.subject, r.message) for r in records if isinstance(r, EventDraft)] == [
        ("net_link_removed", "link:enp2s0", "link enp2s0 went away (its interface is gone; it was up at 10 Gb/s)")]
    _write(tmp_path, 1, 1, rx_bytes=1500)
    nic, events = _read(collector)
    assert nic.link_lost is False
    assert [(e.kind, e.message) for e in events] == [
        ("net_link_flapped", "link enp2s0 went away and came back at 10 Gb/s (a new interface)")]


def test_an_interface_created_again_between_two_reads_is_a_flap(tmp_path: Path) -> None:
    # Gone and back within one read (a 2 s unplug at a 5 s interval): the new interface's carrier count is what
    # the old one's was; only its counters, started again, tell.
    collector = HostCollector(HostRoot(tmp_path), Clock())
    _write(tmp_path, 1, 1, rx_bytes=10**9)
    _read(collector)
    _write(tmp_path, 1, 1, rx_bytes=4000)
    nic, events = _read(collector)
    assert nic.link_lost is False
    assert [(e.kind, e.message) for e in events] == [
        ("net_link_flapped", ("link enp2s0 went away and came back between two reads (a new interface: its "
                              "counters started again)"))]
