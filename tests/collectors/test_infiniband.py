"""RDMA ports: pure parsers, reads of port trees (absent, unreadable, vanished files), rates, events, metrics."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rigmon.agent.check import readings_from
from rigmon.agent.metrics import frame_metrics
from rigmon.collectors.base import EventDraft, NoData
from rigmon.collectors.infiniband import (
    InfinibandCollector,
    judge_port,
    parse_counter,
    parse_rate,
    parse_state,
)
from rigmon.collectors.infiniband_netdev import (
    pick_netdev,
)
from rigmon.hw.root import HostRoot
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame, InfinibandPortReading
from tests.alarms.helpers import FakeClock
from tests.collectors.root_helpers import ListLog

PORT = "sys/class/infiniband/mlx5_0/ports/1"


def write_port(root: Path, state: str = "4: ACTIVE", rate: str = "100 Gb/sec (4X EDR)", **counters: int) -> None:
    base = root / PORT
    (base / "counters").mkdir(parents=True, exist_ok=True)
    (base / "state").write_text(state + "\n")
    (base / "phys_state").write_text(("5: LinkUp" if "ACTIVE" in state else "2: Polling") + "\n")
    (base / "rate").write_text(rate + "\n")
    (base / "link_layer").write_text("InfiniBand\n")
    for name, value in counters.items():
        (base / "counters" / name).write_text(f"{value}\n")


def collect(collector: InfinibandCollector) -> tuple[list[InfinibandPortReading], list[EventDraft]]:
    records = collector.collect()
    return ([r for r in records if isinstance(r, InfinibandPortReading)],
            [r for r in records if isinstance(r, EventDraft)])


@pytest.mark.parametrize(("text", "want"), [
    ("4: ACTIVE", (4, "ACTIVE")), ("5: LinkUp\n", (5, "LinkUp")), ("3: Disabled", (3, "Disabled")),
    ("ACTIVE", (None, None)), ("", (None, None)), (None, (None, None)),
])
def test_parse_state(text: str | None, want: tuple[int | None, str | None]) -> None:
    assert parse_state(text) == want


@pytest.mark.parametrize(("text", "want"), [
    ("100 Gb/sec (4X EDR)", 100.0), ("2.5 Gb/sec (1X SDR)", 2.5), ("56 Gb/sec (4X FDR)", 56.0),
    ("400 Gb/sec (4X NDR)", 400.0), ("Invalid argument", None), ("", None), (None, None),
    pytest.param("9" * 400 + " Gb/sec (4X EDR)", None, id="400 digits Gb/sec"),
])
def test_parse_rate(text: str | None, want: float | None) -> None:
    assert parse_rate(text) == want


@pytest.mark.parametrize(("text", "want"), [("0", 0), ("18446744073709551615", 2**64 - 1), ("0x10", None),
                                            ("-1", None), ("N/A", None), (None, None)])
def test_parse_counter(text: str | None, want: int | None) -> None:
    assert parse_counter(text) == want


def test_judge_port() -> None:
    assert judge_port(4, 5, 100.0, 100.0, True, False) == ("ok", None)
    assert judge_port(4, 5, 50.0, 100.0, True, False)[0] == "degraded"
    assert judge_port(1, 2, 100.0, None, False, False) == ("unused", None)
    assert judge_port(1, 2, 100.0, None, True, False)[0] == "down"
    assert judge_port(1, 3, None, 200.0, False, True)[0] == "down"
    assert judge_port(2, 5, 40.0, None, False, False)[0] == "down"  # INIT with a physical link
    assert judge_port(None, None, None, None, True, True) == ("unknown", None)


def test_no_rdma_devices_is_absent(tmp_path: Path) -> None:
    with pytest.raises(NoData):
        InfinibandCollector(HostRoot(tmp_path), FakeClock()).collect()


def test_counters_become_bytes_and_rates(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    collector = InfinibandCollector(HostRoot(tmp_path), clock)
    write_port(tmp_path, port_rcv_data=1000, port_xmit_data=0, symbol_error=1, port_rcv_errors=2)
    (first,), _ = collect(collector)
    assert first.port_data_received_bytes_total == 4000  # the kernel counts 4-byte words
    assert first.errors_total == 3 and first.port_data_received_bytes_per_s is None
    assert first.port_packets_received_total is None  # absent file: not present, not 0
    write_port(tmp_path, port_rcv_data=1000 + 250_000, port_xmit_data=500, symbol_error=4, port_rcv_errors=2)
    clock.t += 2.0
    (second,), _ = collect(collector)
    assert second.port_data_received_bytes_per_s == pytest.approx(500_000.0)
    assert second.port_data_transmitted_bytes_per_s == pytest.approx(1000.0)
    assert second.errors_per_s == pytest.approx(1.5)
    write_port(tmp_path, port_rcv_data=10, port_xmit_data=500, symbol_error=0, port_rcv_errors=0)  # counters reset
    clock.t += 1.0
    (third,), _ = collect(collector)
    assert third.port_data_received_bytes_per_s is None and third.errors_per_s is None


def test_unreadable_and_vanishing_files_are_not_present(tmp_path: Path) -> None:
    write_port(tmp_path, port_rcv_data=7, link_downed=0)
    # A counter the driver refuses to read (EISDIR here; mlx5 RoCE ports answer EINVAL for some).
    (tmp_path / PORT / "counters" / "symbol_error").mkdir()
    (tmp_path / PORT / "counters" / "port_xmit_data").write_text("garbage\n")
    hw = tmp_path / PORT / "hw_counters"
    hw.mkdir()
    (hw / "out_of_buffer").write_text("5\n")
    (hw / "broken").mkdir()
    (hw / "lifespan").write_text("10\n")
    (tmp_path / "sys/class/infiniband/mlx5_0/ports/notaport").mkdir()
    (reading,), _ = collect(InfinibandCollector(HostRoot(tmp_path), FakeClock()))
    assert reading.symbol_error_total is None and reading.port_data_transmitted_bytes_total is None
    assert set(reading.unreadable_counters) == {"symbol_error", "port_xmit_data"}
    assert reading.port_data_received_bytes_total == 28
    assert [(c.name, c.value_total) for c in reading.hw_counters] == [("out_of_buffer", 5)]
    # The port directory goes away between reads: no reading, a removal event, no crash.
    collector = InfinibandCollector(HostRoot(tmp_path), FakeClock())
    collect(collector)
    import shutil
    shutil.rmtree(tmp_path / "sys/class/infiniband/mlx5_0/ports")
    readings, events = collect(collector)
    assert readings == [] and [e.kind for e in events] == ["rdma_port_removed"]


def test_flap_events_and_states(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    collector = InfinibandCollector(HostRoot(tmp_path), clock)
    write_port(tmp_path, link_downed=0)
    (r,), events = collect(collector)
    assert (r.link_state, r.expected_gbps, r.expected_source, events) == ("ok", 100.0, "best_seen", [])
    write_port(tmp_path, state="1: DOWN", link_downed=1)
    (r,), events = collect(collector)
    assert r.link_state == "down"
    assert [(e.kind, e.severity, e.subject) for e in events] == [
        ("rdma_port_state_changed", "warning", "rdma:mlx5_0/1"), ("rdma_link_downed", "warning", "rdma:mlx5_0/1")]
    write_port(tmp_path, rate="25 Gb/sec (1X EDR)", link_downed=1)
    (r,), events = collect(collector)
    assert (r.link_state, r.rate_gbps, r.expected_gbps) == ("degraded", 25.0, 100.0)
    assert [e.kind for e in events] == ["rdma_port_state_changed", "rdma_port_rate_changed", "rdma_port_degraded"]
    assert events[0].severity == "info" and events[1].severity == "warning"
    # A flap between two reads: the state is the same, the link_downed counter tells.
    write_port(tmp_path, link_downed=3)
    (r,), events = collect(collector)
    assert r.link_state == "ok"
    assert [(e.kind, (e.data or {}).get("downs")) for e in events] == [
        ("rdma_link_downed", 2), ("rdma_port_rate_changed", None)]


def test_a_garbled_rate_does_not_become_the_expected_rate(tmp_path: Path) -> None:
    """A rate of more digits than a float holds, read once, would be an infinite best rate seen:
    the port degraded against it for the agent's life, ``rdma_port_below_rate`` firing."""
    collector = InfinibandCollector(HostRoot(tmp_path), FakeClock())
    write_port(tmp_path)
    collect(collector)
    write_port(tmp_path, rate="9" * 400 + " Gb/sec (4X EDR)")
    (r,), _ = collect(collector)
    assert r.rate_gbps is None
    write_port(tmp_path)
    (r,), _ = collect(collector)
    assert (r.link_state, r.expected_gbps, r.degraded_reason) == ("ok", 100.0, None)


@pytest.mark.parametrize("name", ["state", "phys_state"])
@pytest.mark.parametrize("unread", ["", None])
def test_a_state_file_that_says_nothing_is_no_state_change(tmp_path: Path, name: str, unread: str | None) -> None:
    """An empty or unreadable ``state`` was ``RDMA port mlx5_0/1 ACTIVE (LinkUp) -> ? (LinkUp)`` (a
    warning: it left ACTIVE) and back; a ``phys_state`` one ``ACTIVE (LinkUp) -> ACTIVE``. Neither
    is a change; a real one is still judged against the last state read."""
    collector = InfinibandCollector(HostRoot(tmp_path), FakeClock())
    write_port(tmp_path)
    collect(collector)
    path = tmp_path / PORT / name
    if unread is None:
        path.unlink()
    else:
        path.write_text(unread)
    (r,), events = collect(collector)
    assert events == [] and r.rate_text == "100 Gb/sec (4X EDR)"
    write_port(tmp_path)
    assert collect(collector)[1] == []
    path.write_text("")
    collect(collector)
    write_port(tmp_path, state="1: DOWN")
    _, events = collect(collector)
    was = "ACTIVE (LinkUp)" if name == "state" else "ACTIVE"  # as last read
    assert [(e.kind, e.severity, e.message) for e in events] == [
        ("rdma_port_state_changed", "warning", f"RDMA port mlx5_0/1 {was} -> DOWN (Polling)")]


def test_an_empty_rate_file_is_not_present(tmp_path: Path) -> None:
    write_port(tmp_path, rate="")
    (r,), _ = collect(InfinibandCollector(HostRoot(tmp_path), FakeClock()))
    assert (r.rate_text, r.rate_gbps) == (None, None)


def test_configured_rate_and_never_up_port(tmp_path: Path) -> None:
    write_port(tmp_path, state="1: DOWN")
    (r,), _ = collect(InfinibandCollector(HostRoot(tmp_path), FakeClock()))
    assert (r.link_state, r.expected_gbps) == ("unused", None)
    (r,), _ = collect(InfinibandCollector(HostRoot(tmp_path), FakeClock(), {"mlx5_0": 200.0}))
    assert (r.link_state, r.expected_gbps, r.expected_source) == ("down", 200.0, "config")


def test_metrics_named_after_node_exporter(tmp_path: Path) -> None:
    (tmp_path / PORT / "hw_counters").mkdir(parents=True)
    (tmp_path / PORT / "hw_counters" / "np_cnp_sent").write_text("9\n")
    write_port(tmp_path, port_rcv_data=100, link_downed=2, symbol_error=1)
    records = InfinibandCollector(HostRoot(tmp_path), FakeClock()).collect()
    frame = Frame(schema=SCHEMA_VERSION, node="n1", run_id="r", seq=1, taken_at=1.0, agent_start=0.0,
                  collectors={"infiniband": CollectorStatus(state="ok", ok=True)}, readings=readings_from(records))
    samples = {(s.name, tuple(sorted(s.labels.items())), s.value)
               for m in frame_metrics(frame, Counter()) for s in m.samples}
    labels = (("device", "mlx5_0"), ("link_layer", "InfiniBand"), ("node", "n1"), ("port", "1"))
    assert ("rigmon_infiniband_port_data_received_bytes_total", labels, 400.0) in samples
    assert ("rigmon_infiniband_link_downed_total", labels, 2.0) in samples
    assert ("rigmon_infiniband_state_id", labels, 4.0) in samples
    assert ("rigmon_infiniband_rate_bytes_per_second", labels, 100e9 / 8) in samples
    assert ("rigmon_infiniband_link_state", (*labels[:2], ("link_state", "ok"), *labels[2:]), 1.0) in samples
    assert ("rigmon_infiniband_hw_value_total", (("counter", "np_cnp_sent"), *labels), 9.0) in samples


def test_snapshot_capture_holds_the_port_files(tmp_path: Path) -> None:
    from rigmon.agent.capture import capture_node

    write_port(tmp_path, port_rcv_data=5)
    (tmp_path / PORT / "hw_counters").mkdir()
    (tmp_path / PORT / "hw_counters" / "out_of_buffer").write_text("3\n")
    files = capture_node(HostRoot(tmp_path)).files
    assert files[f"/{PORT}/state"].strip() == "4: ACTIVE"
    assert files[f"/{PORT}/counters/port_rcv_data"].strip() == "5"
    assert files[f"/{PORT}/hw_counters/out_of_buffer"].strip() == "3"


def test_a_ports_files_are_facts_read_again_when_the_port_returns(tmp_path: Path) -> None:
    """Which counters a port has is the driver's: found with the port's facts, not every read,
    and again when the port goes and comes back (a driver reload) or its state is unreadable."""
    import shutil

    write_port(tmp_path, port_rcv_data=7)
    collector = InfinibandCollector(HostRoot(tmp_path), FakeClock())
    (reading,), _ = collect(collector)
    assert reading.hw_counters == () and reading.link_downed_total is None
    write_port(tmp_path, port_rcv_data=9, link_downed=1)  # files the port did not have
    (reading,), _ = collect(collector)
    assert reading.port_data_received_bytes_total == 36 and reading.link_downed_total is None
    shutil.rmtree(tmp_path / PORT)
    assert collect(collector)[0] == []
    write_port(tmp_path, port_rcv_data=9, link_downed=1)
    (tmp_path / PORT / "hw_counters").mkdir()
    (tmp_path / PORT / "hw_counters" / "out_of_sequence").write_text("3\n")
    (reading,), _ = collect(collector)
    assert reading.link_downed_total == 1 and [c.name for c in reading.hw_counters] == ["out_of_sequence"]
    # A driver reset: the state unreadable for a read, the counters changed under it.
    (tmp_path / PORT / "state").unlink()
    (tmp_path / PORT / "counters" / "symbol_error").write_text("0\n")
    collect(collector)
    write_port(tmp_path, port_rcv_data=9, link_downed=1)
    (reading,), _ = collect(collector)
    assert reading.symbol_error_total == 0


def test_a_devices_ports_are_listed_when_it_appears_and_when_a_port_goes(tmp_path: Path) -> None:
    import shutil

    ports = "/sys/class/infiniband/mlx5_0/ports"
    write_port(tmp_path, port_rcv_data=7)
    root = ListLog(tmp_path)
    collector = InfinibandCollector(root, FakeClock())
    collect(collector)
    root.listed.clear()
    for _ in range(3):
        (reading,), _ = collect(collector)
        assert reading.name == "mlx5_0/1"
    assert ports not in root.listed
    # A driver reload: the ports go, then come back (here with a second one).
    shutil.rmtree(tmp_path / "sys/class/infiniband/mlx5_0/ports")
    assert collect(collector)[0] == []
    write_port(tmp_path, port_rcv_data=7)
    (tmp_path / "sys/class/infiniband/mlx5_0/ports/2").mkdir()
    (tmp_path / "sys/class/infiniband/mlx5_0/ports/2/state").write_text("1: DOWN\n")
    assert [r.name for r in collect(collector)[0]] == ["mlx5_0/1", "mlx5_0/2"]
    # The periodic re-read lists them again (ground truth for a change nothing announced).
    root.listed.clear()
    for _ in range(61):
        collect(collector)
    assert root.listed.count(ports) == 1


def test_the_rate_a_down_port_shows_is_no_rate_change(tmp_path: Path) -> None:
    # A port without a link reports a rate of its own (ibstat's "Rate: 10" on a polling port):
    # going down and coming back at the same rate is a state change, not a retrain.
    collector = InfinibandCollector(HostRoot(tmp_path), FakeClock(1000.0))
    write_port(tmp_path, link_downed=0)
    collect(collector)
    write_port(tmp_path, state="1: DOWN", rate="10 Gb/sec (4X)", link_downed=1)
    (r,), events = collect(collector)
    assert r.link_state == "down"
    assert [e.kind for e in events] == ["rdma_port_state_changed", "rdma_link_downed"]
    write_port(tmp_path, link_downed=1)
    (r,), events = collect(collector)
    assert r.link_state == "ok" and [e.kind for e in events] == ["rdma_port_state_changed"]
    # Back at another rate than it had when last active: that is a change, from that rate.
    write_port(tmp_path, state="1: DOWN", rate="10 Gb/sec (4X)", link_downed=2)
    collect(collector)
    write_port(tmp_path, rate="50 Gb/sec (4X HDR)", link_downed=2)
    (r,), events = collect(collector)
    changed = [e for e in events if e.kind == "rdma_port_rate_changed"]
    assert [(e.severity, (e.data or {}).get("from_rate_gbps")) for e in changed] == [("warning", 100.0)]


def _refuse(root: Path, counter: str) -> None:
    """The driver refuses reads of ``counter`` (a directory in its place: EISDIR, as EINVAL on mlx5)."""
    path = root / PORT / "counters" / counter
    path.unlink(missing_ok=True)
    path.mkdir()


def _answer(root: Path, counter: str, value: int) -> None:
    path = root / PORT / "counters" / counter
    if path.is_dir():
        path.rmdir()
    path.write_text(f"{value}\n")


def test_errors_total_never_goes_down_because_a_counter_was_not_read(tmp_path: Path) -> None:
    # One error counter refusing a read for a moment made the sum drop (a counter reset to Prometheus'
    # increase() and the node's counter rule) and rise again by its whole count: errors rising, falsely.
    clock = FakeClock(1000.0)
    collector = InfinibandCollector(HostRoot(tmp_path), clock)
    write_port(tmp_path, symbol_error=40, port_rcv_errors=3)
    totals = []
    for step in ("read", "refused", "read again"):
        if step == "refused":
            _refuse(tmp_path, "symbol_error")
        if step == "read again":
            _answer(tmp_path, "symbol_error", 40)
        clock.t += 1.0
        (reading,), _ = collect(collector)
        totals.append(reading.errors_total)
        if step == "refused":
            assert reading.unreadable_counters == ("symbol_error",) and reading.errors_per_s is None
    assert totals == [43, None, 43]


def test_an_error_counter_first_read_late_joins_the_sum_only_at_zero(tmp_path: Path) -> None:
    # Refused at the first read (a RoCE port refuses IB-only counters for good): the others are summed,
    # and a count it shows later is not added at once, which would read as errors rising.
    clock = FakeClock(1000.0)
    collector = InfinibandCollector(HostRoot(tmp_path), clock)
    write_port(tmp_path, port_rcv_errors=3, link_error_recovery=0)
    _refuse(tmp_path, "symbol_error")
    _refuse(tmp_path, "local_link_integrity_errors")
    totals = []
    for symbol_errors, integrity_errors in ((None, None), (40, 0), (41, 2)):
        if symbol_errors is not None:
            _answer(tmp_path, "symbol_error", symbol_errors)
        if integrity_errors is not None:
            _answer(tmp_path, "local_link_integrity_errors", integrity_errors)
        clock.t += 1.0
        (reading,), _ = collect(collector)
        totals.append(reading.errors_total)
    assert totals == [3, 3, 5]  # symbol_error stays out; local_link_integrity_errors joined at 0
    assert reading.symbol_error_total == 41  # its own series has it


@pytest.mark.parametrize("unread", ["refused", "gone"])
def test_link_downs_while_the_counter_could_not_be_read_are_not_lost(tmp_path: Path, unread: str) -> None:
    # A flapping port's driver refuses a counter read now and then (a reset under way): link_downed 3,
    # unreadable, 5. The two downs were compared with the unreadable read and lost: no rdma_link_downed,
    # so no rdma_port_flapped, in a flap storm.
    clock = FakeClock(1000.0)
    collector = InfinibandCollector(HostRoot(tmp_path), clock)
    write_port(tmp_path, link_downed=3)
    collect(collector)
    if unread == "refused":
        _refuse(tmp_path, "link_downed")
    else:
        (tmp_path / PORT / "counters" / "link_downed").unlink()
    clock.t += 1.0
    (reading,), events = collect(collector)
    assert reading.link_downed_total is None and not [e for e in events if e.kind == "rdma_link_downed"]
    _answer(tmp_path, "link_downed", 5)
    clock.t += 1.0
    _, events = collect(collector)
    assert [(e.kind, (e.data or {}).get("downs")) for e in events if e.kind == "rdma_link_downed"] == \
        [("rdma_link_downed", 2)]
    # A counter that went down was reset (perfquery -R, a driver reload): no downs, and counted from there.
    _answer(tmp_path, "link_downed", 0)
    clock.t += 1.0
    _, events = collect(collector)
    _answer(tmp_path, "link_downed", 1)
    clock.t += 1.0
    _, later = collect(collector)
    assert [e.kind for e in events] == [] and [(e.data or {}).get("downs") for e in later] == [1]


def test_an_error_counter_stopped_at_its_maximum_is_said_once_per_saturation(tmp_path: Path) -> None:
    # The PMA's PortCounters stop at their width's maximum (symbol_error 16 bits, link_downed 8): a
    # marginal cable's symbol errors stopped at 65535 and errors_total stood still, so "errors rising"
    # resolved while the errors went on, and nothing said the counter had stopped counting.
    clock = FakeClock(1000.0)
    collector = InfinibandCollector(HostRoot(tmp_path), clock)

    def saturations(**counters: int) -> list[tuple[str, object]]:
        write_port(tmp_path, **counters)
        clock.t += 1.0
        _, events = collect(collector)
        return [(e.message, (e.data or {}).get("counter")) for e in events if e.kind == "rdma_counter_saturated"]

    assert saturations(symbol_error=65530, link_downed=254) == []
    (said,) = saturations(symbol_error=65535, link_downed=254)
    assert said[1] == "symbol_error" and "symbol_error stopped at 65535" in said[0], said
    assert saturations(symbol_error=65535, link_downed=254) == []  # once, not every read
    assert [c for _, c in saturations(symbol_error=65535, link_downed=255)] == ["link_downed"]
    assert saturations(symbol_error=0, link_downed=0) == []  # cleared (perfquery -R): counting again
    assert [c for _, c in saturations(symbol_error=65535, link_downed=0)] == ["symbol_error"]
    _refuse(tmp_path, "symbol_error")  # a read that could not read it says nothing of it
    clock.t += 1.0
    collect(collector)
    _answer(tmp_path, "symbol_error", 65535)
    clock.t += 1.0
    _, events = collect(collector)
    assert [e for e in events if e.kind == "rdma_counter_saturated"] == []


@pytest.mark.parametrize(("dev_ports", "port", "want"), [
    ({"ib0": 0, "ib1": 1}, 2, "ib1"),
    ({"ib0": 0, "ib0.8001": 0}, 1, "ib0"),
    ({"enp1s0f0np0": None}, 1, "enp1s0f0np0"),
    ({"eth0": None, "eth1": None}, 1, None),
    ({"ib1": 1}, 1, None),
    ({}, 1, None),
])
def test_pick_netdev(dev_ports: dict[str, int | None], port: int, want: str | None) -> None:
    assert pick_netdev(port, dev_ports) == want


def test_a_roce_ports_interface_is_its_default_gids_and_stays_while_the_gid_table_refills(tmp_path: Path) -> None:
    """RoCE: ``gid_attrs/ndevs/0`` names the port's netdev; while it cannot be read (the GID table is
    refilled after a reset: EINVAL) the port keeps the interface its facts named before."""
    write_port(tmp_path)
    ndev = tmp_path / PORT / "gid_attrs" / "ndevs" / "0"
    ndev.parent.mkdir(parents=True)
    ndev.write_text("enp1s0f0np0\n")
    collector = InfinibandCollector(HostRoot(tmp_path), FakeClock())
    (r,), _ = collect(collector)
    assert r.netdev == "enp1s0f0np0"
    ndev.unlink()
    collector._files.invalidate()
    (r,), _ = collect(collector)
    assert r.netdev == "enp1s0f0np0"


def test_an_ib_ports_interface_is_its_ipoib_netdev_by_dev_port(tmp_path: Path) -> None:
    """InfiniBand: no GID has a netdev; IPoIB's ``ib0``/``ib1`` are the PCI function's netdevs, told apart
    by ``dev_port`` (port - 1); none is None, never an error."""
    write_port(tmp_path)
    (r,), _ = collect(InfinibandCollector(HostRoot(tmp_path), FakeClock()))
    assert r.netdev is None
    for name, dev_port in (("ib0", 0), ("ib1", 1), ("ib0.8001", 0)):
        (tmp_path / "sys/class/infiniband/mlx5_0/device/net" / name).mkdir(parents=True)
        (tmp_path / "sys/class/infiniband/mlx5_0/device/net" / name / "dev_port").write_text(f"{dev_port}\n")
    (r,), _ = collect(InfinibandCollector(HostRoot(tmp_path), FakeClock()))
    assert r.netdev == "ib0"


def test_the_ports_interface_is_a_label_of_its_info_series(tmp_path: Path) -> None:
    write_port(tmp_path)
    (tmp_path / PORT / "gid_attrs" / "ndevs").mkdir(parents=True)
    (tmp_path / PORT / "gid_attrs" / "ndevs" / "0").write_text("enp1s0f0np0\n")
    (tmp_path / "sys/class/infiniband/mlx5_0/fw_ver").write_text("16.35.2000\n")
    records = InfinibandCollector(HostRoot(tmp_path), FakeClock()).collect()
    frame = Frame(schema=SCHEMA_VERSION, node="n1", run_id="r", seq=1, taken_at=1.0, agent_start=0.0,
                  collectors={"infiniband": CollectorStatus(state="ok", ok=True)}, readings=readings_from(records))
    info = [s.labels for m in frame_metrics(frame, Counter()) for s in m.samples if s.name == "rigmon_infiniband_info"]
    assert info == [{"node": "n1", "device": "mlx5_0", "port": "1", "link_layer": "InfiniBand",
                     "interface": "enp1s0f0np0", "hca_type": "", "board_id": "", "firmware": "16.35.2000"}]


def test_a_saturated_counter_has_its_series(tmp_path: Path) -> None:
    """``rdma_counter_saturated`` mirrored: 1 per port and counter standing at its maximum, 0 for one read
    below it, no series for a counter not read (here port_rcv_errors, whose file is absent)."""
    write_port(tmp_path, symbol_error=0xFFFF, link_downed=3)
    records = InfinibandCollector(HostRoot(tmp_path), FakeClock()).collect()
    frame = Frame(schema=SCHEMA_VERSION, node="n1", run_id="r", seq=1, taken_at=1.0, agent_start=0.0,
                  collectors={"infiniband": CollectorStatus(state="ok", ok=True)}, readings=readings_from(records))
    got = {s.labels["counter"]: s.value for m in frame_metrics(frame, Counter()) for s in m.samples
           if s.name == "rigmon_infiniband_saturated"}
    assert got == {"symbol_error": 1.0, "link_downed": 0.0}
