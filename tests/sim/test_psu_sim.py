"""Simulated PSU rail: physics, the RM1 it speaks (parsed by rigmon's parser), and the PSU scenarios."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from rigmon.collectors.psu import RailState
from rigmon.collectors.psu_lines import RailWindow, parse_rm1_line
from rigmon.config import PsuSection
from rigmon.sim.node import SimNode
from rigmon.sim.psu import DEFAULT_LINK, SimPsuRail, psu_rail_of
from rigmon.sim.rig import adc_pace, node_agent_config
from rigmon.sim.scenarios import SCENARIOS
from rigmon.sim.scenarios.adc_hang import hung_at
from rigmon.sim.scenarios.adc_unplug import plugged_at
from rigmon.sim.tree import Tree


def node_with(rail: SimPsuRail, tmp_path: Path) -> SimNode:
    node = SimNode(name="n1", tree=Tree(tmp_path), rng=random.Random(3))
    node.devices.append(rail)
    return node


def windows(rail: SimPsuRail) -> list[RailWindow]:
    out = []
    for line in rail.take_lines():
        record = parse_rm1_line(line)
        if isinstance(record, RailWindow):
            out.append(record)
    return out


def test_idle_rail_is_healthy_and_free_of_sags(tmp_path: Path) -> None:
    rail = SimPsuRail(pty=False)
    node = node_with(rail, tmp_path)
    node.load = 0.0
    for k in range(1, 101):
        node.step(k * 0.1)
    got = windows(rail)
    assert len(got) == 10
    for w in got:
        assert 12.0 <= w.volts["v"].min <= w.volts["v"].max <= 12.06
        assert w.flags == 0 and w.volts["vpsu"].mean > w.volts["v"].mean
    assert 11.99 < node.bus["rail_volts"] < 12.06


def test_rail_follows_gpu_power_on_the_bus(tmp_path: Path) -> None:
    rail = SimPsuRail(pty=False, path_mohm=1.0)
    node = node_with(rail, tmp_path)
    node.bus["gpu_power_w"] = 200.0
    node.step(1.0)
    idle = node.bus["rail_volts_mean"]
    node.bus["gpu_power_w"] = 1200.0
    node.step(1.001)
    assert node.bus["rail_volts"] < idle - 0.1, "a 1 kW step dips the rail at once"
    for k in range(2, 12):
        node.step(float(k))
    loaded = node.bus["rail_volts_mean"]
    # Rail = source - R * I: the path alone drops 1 mOhm x ~115 A.
    assert rail.source_volts - rail.rail_volts == pytest.approx(rail.amps * 1.0e-3, rel=1e-6)
    assert 11.6 < loaded < idle - 0.15


def test_two_psus_carry_the_load_one_folds_back(tmp_path: Path) -> None:
    for online, healthy in ((3, True), (2, True), (1, False)):
        rail = SimPsuRail(pty=False, psus=3)
        rail.psus_online = online
        node = node_with(rail, tmp_path)
        node.load = 1.0
        for k in range(1, 20):
            node.step(k * 0.5)
        assert (rail.rail_volts > 11.6) == healthy, (online, rail.rail_volts)


def test_agent_config_hook_points_the_agent_at_the_pty_link(tmp_path: Path) -> None:
    node = node_with(SimPsuRail(pty=False), tmp_path)
    config = node_agent_config(node, "127.0.0.1:0", 1.0)
    assert config.psu.port == DEFAULT_LINK and config.psu.protocol == "rm1"
    assert config.agent.root == str(tmp_path)


def test_corroding_connection_trend_rises_over_simulated_weeks(tmp_path: Path) -> None:
    scenario = SCENARIOS["corroding-connection"]
    node = SimNode(name="n1", tree=Tree(tmp_path), rng=random.Random(1))
    scenario.build(node, 0)
    rail = psu_rail_of(node)
    rail.use_pty = False
    rail.pmbus = False
    node.devices = [rail]  # no files: only the RM1 lines matter here
    state = RailState(PsuSection(port=DEFAULT_LINK))
    t_s = 0.0
    while t_s < 30 * 86400:
        t_s += 300.0
        scenario.drive(node, 0, t_s)
        node.step(t_s)
        for line in rail.take_lines():
            state.line(line, t_s, t_s)
    (estimate,) = state.resistance()
    assert estimate.method == "two_point"
    assert estimate.resistance_mohm == pytest.approx(0.8 + 0.06 * 30, abs=0.1)
    assert estimate.trend_mohm_per_day == pytest.approx(0.06, abs=0.01)
    assert estimate.baseline_mohm == pytest.approx(0.8, abs=0.05) and estimate.trend_days >= 29


def test_adc_unplug_timeline() -> None:
    assert plugged_at(5.0) and not plugged_at(20.0) and not plugged_at(39.9) and plugged_at(40.0)
    assert not plugged_at(85.0)


def test_adc_unplug_removes_and_restores_the_link(tmp_path: Path) -> None:
    scenario = SCENARIOS["adc-unplug"]
    node = SimNode(name="n1", tree=Tree(tmp_path), rng=random.Random(1))
    scenario.build(node, 0)
    link = node.tree.path(DEFAULT_LINK)
    try:
        for t_s, present in ((1.0, True), (21.0, False), (41.0, True)):
            scenario.drive(node, 0, t_s)
            node.step(t_s)
            assert link.is_symlink() == present, t_s
    finally:
        node.close()
    assert not link.is_symlink()


def test_adc_hang_goes_silent_with_its_port_open_and_boots_on_reset(tmp_path: Path) -> None:
    assert not hung_at(19.9) and hung_at(20.0) and hung_at(79.9) and not hung_at(80.0) and hung_at(140.0)
    scenario = SCENARIOS["adc-hang"]
    node = SimNode(name="n1", tree=Tree(tmp_path), rng=random.Random(1))
    scenario.build(node, 0)
    rail = psu_rail_of(node)
    rail.pmbus = False
    rail.use_pty = False
    node.devices = [rail]
    state = RailState(PsuSection(port=DEFAULT_LINK, sag_volts=11.5))
    state.opened(0.0)
    assert not state.reading(mono=1.0, reset=False).stale  # no window yet, but not for long
    seen: dict[float, tuple[int, bool]] = {}
    for k in range(1, 1000):
        t_s = k * 0.1
        scenario.drive(node, 0, t_s)
        node.step(t_s)
        state.feed(rail.take_bytes(), t_s, t_s)
        if k % 50 == 0:
            reading = state.reading(mono=t_s, reset=True)
            seen[round(t_s)] = (reading.windows, reading.stale)
    assert seen[10] == (5, False)  # one-second windows
    assert seen[25][1] and seen[75] == (0, True)  # hung: nothing comes, and it says so
    assert seen[90][0] >= 4 and not seen[90][1]  # reset: windows again
    assert state.reading(mono=100.0, reset=False).counters.reboots_total == 1


def test_adc_garbage_lines_never_parse_to_a_false_reading(tmp_path: Path) -> None:
    scenario = SCENARIOS["adc-garbage"]
    node = SimNode(name="n1", tree=Tree(tmp_path), rng=random.Random(1))
    scenario.build(node, 0)
    rail = psu_rail_of(node)
    rail.pmbus = False
    node.devices = [rail]
    state = RailState(PsuSection(port=DEFAULT_LINK, sag_volts=11.5))
    rail.use_pty = False
    for k in range(1, 600):
        scenario.drive(node, 0, k * 0.5)
        node.step(k * 0.5)
        state.feed(rail.take_bytes(), float(k), float(k))
    reading = state.reading(mono=600.0, reset=True)
    counters = reading.counters
    assert counters.checksum_errors_total + counters.malformed_lines_total + counters.long_lines_total > 20
    assert counters.windows_total > 150 and counters.reboots_total == 0
    assert reading.volts is not None and reading.volts.min_volts > 11.6


def test_on_the_pty_sent_lines_are_not_kept(tmp_path: Path) -> None:
    # A soak at 2000x sends thousands of lines a second: the simulator must not keep them.
    rail = SimPsuRail(win_ms=100)
    rail.pmbus = False
    node = node_with(rail, tmp_path)
    try:
        for i in range(1, 200):
            node.step(i * 0.1)
        assert rail.take_lines() == []
    finally:
        rail.close()


def test_a_fast_simulation_gives_its_adc_a_stale_limit_of_its_pace(tmp_path: Path) -> None:
    # At --speed 20000 a window arrives once a physics step, thousands of simulated seconds apart:
    # on the agent's simulated clock that is no silent ADC (psu_adc_silent fired on corroding-connection).
    node = SimNode(name="n1", tree=Tree(tmp_path), rng=random.Random(1))
    SCENARIOS["corroding-connection"].build(node, 0)
    assert adc_pace(node, 1.0) == {} and adc_pace(node, 5.0) == {}
    assert adc_pace(node, 60.0) == {"psu": {"stale_after_s": 30.0}}
    assert adc_pace(node, 20000.0) == {"psu": {"stale_after_s": 10000.0}}
    config = node_agent_config(node, "127.0.0.1:0", 1.0, extra=adc_pace(node, 20000.0))
    assert config.psu.stale_after_s == 10000.0 and config.psu.port == DEFAULT_LINK
    bare = SimNode(name="n2", tree=Tree(tmp_path / "n2"), rng=random.Random(1))
    assert adc_pace(bare, 20000.0) == {}  # no ADC, no [psu]
    node.close()


def read_all(fd: int) -> bytes:
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


def test_a_pty_nobody_reads_gets_whole_lines_and_the_overrun_flag_after_a_loss(tmp_path: Path) -> None:
    # As the firmware (firmware/rigmon_rm1): a line goes out whole, as the port takes it; a record
    # that comes while one is still going out is dropped, and the next one sent carries flag 8.
    rail = SimPsuRail(win_ms=100)
    rail.pmbus = False
    node = node_with(rail, tmp_path)
    try:
        assert rail.slave_path is None
        node.step(0.1)
        assert rail.slave_path is not None
        reader = os.open(rail.slave_path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            # Nobody reads for 300 s of 100 ms windows (~300 kB): far more than the pty holds.
            for i in range(2, 3000):
                node.step(i * 0.1)
            received = read_all(reader)
            for i in range(3000, 3050):  # read again: the port drains
                node.step(i * 0.1)
                received += read_all(reader)
        finally:
            os.close(reader)
    finally:
        rail.close()
    records = []
    for raw in received.split(b"\r\n")[:-1]:
        record = parse_rm1_line(raw.decode("ascii"))  # a cut line raises LineError here
        if isinstance(record, RailWindow):
            records.append(record)
    seqs = [r.seq for r in records]
    assert seqs == sorted(seqs) and len(seqs) < 2998  # records were lost...
    after_loss = [b for a, b in zip(records, records[1:]) if b.seq != a.seq + 1]
    assert after_loss and all(r.flags & 8 for r in after_loss)  # ...and each loss is flagged
    assert not [r for a, r in zip(records, records[1:]) if r.seq == a.seq + 1 and r.flags & 8]
    assert records[-1].seq == 3048  # the port drained: the newest records arrive


def test_a_dropped_record_passes_its_under_voltage_alert_on(tmp_path: Path) -> None:
    # As the firmware: a record dropped while nobody reads loses its figures, not the INA226's
    # latched under-voltage alert (flag 4), which the next record sent carries with flag 8.
    rail = SimPsuRail(win_ms=100)
    rail.pmbus = False
    node = node_with(rail, tmp_path)
    try:
        node.step(0.1)
        assert rail.slave_path is not None
        reader = os.open(rail.slave_path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            for i in range(2, 400):  # 40 s unread: the pty fills long before the sag at 20 s
                if i == 200:
                    rail.set_volts = 11.0  # one step below the 11.45 V alert limit
                node.step(i * 0.1)
                rail.set_volts = 12.06
            received = read_all(reader)
            for i in range(400, 420):
                node.step(i * 0.1)
                received += read_all(reader)
        finally:
            os.close(reader)
    finally:
        rail.close()
    records = [r for r in (parse_rm1_line(raw.decode("ascii")) for raw in received.split(b"\r\n")[:-1])
               if isinstance(r, RailWindow)]
    sag_seq = 199  # seq 0 is the window that closed at step 1
    assert sag_seq not in [r.seq for r in records]  # the sag's own record was dropped
    (carried,) = [r for r in records if r.flags & 4]
    assert carried.seq > sag_seq and carried.flags & 8


def test_pmbus_supplies_hide_inputs_and_register_again(tmp_path: Path) -> None:
    rail = SimPsuRail(pty=False, psus=2)
    node = node_with(rail, tmp_path)
    node.step(1.0)
    hwmon21 = tmp_path / "sys/class/hwmon/hwmon21"
    assert os.readlink(hwmon21 / "device") == "../../../devices/platform/i2c-1/1-0059"
    inode = os.stat(hwmon21).st_ino
    rail.pmbus_chips[1].hide("curr2_input")
    node.step(2.0)
    assert not (hwmon21 / "curr2_input").exists() and (hwmon21 / "curr2_label").exists()
    rail.pmbus_chips[1].show("curr2_input")
    node.step(3.0)
    assert (hwmon21 / "curr2_input").exists()
    # Its I2C client instantiated again at another address, by another driver: a new directory.
    rail.pmbus_chips[1].reregister(address=0x5C, driver="ibm-cffps")
    node.step(4.0)
    assert os.stat(hwmon21).st_ino != inode
    assert os.readlink(hwmon21 / "device") == "../../../devices/platform/i2c-1/1-005c"
    assert (hwmon21 / "name").read_text() == "ibm-cffps\n" and (hwmon21 / "curr2_input").exists()
    assert sorted(os.listdir(tmp_path / "sys/devices/platform/i2c-1")) == ["1-0058", "1-005c"]
