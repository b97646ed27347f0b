"""host and psu_hwmon on simulated PMBus supplies whose inputs the driver hides and shows again,
and that are registered again under the same hwmonN (a driver reload, a PMBus cable replugged)."""

from __future__ import annotations

import errno
import random
from pathlib import Path

import pytest

from rigmon.collectors.device_facts import REFRESH_EVERY
from rigmon.collectors.host import HostCollector
from rigmon.collectors.hwmon_power import HwmonPowerCollector
from rigmon.config import PsuHwmonSection
from rigmon.hw.root import read_scope
from rigmon.schema import PmbusPsuReading, TemperatureReading
from rigmon.sim.host import SimHost
from rigmon.sim.node import SimNode
from rigmon.sim.psu import SimPsuRail
from rigmon.sim.tree import Tree
from tests.collectors.root_helpers import ReadLog
from tests.collectors.test_host import FakeClock
from tests.hw.refusals import refuse_reads

#: What a tick lists while no device comes, goes or is registered again: host's and psu_hwmon's listings.
LISTED = ["/sys/class/thermal", "/sys/class/hwmon", "/sys/class/hwmon"]


class Node:
    """A simulated node with three PMBus supplies (hwmon20-22, clients 1-0058 to 1-005a) read by
    the real host and psu_hwmon collectors, a tick at a time, in one read scope as the agent does."""

    def __init__(self, tmp_path: Path) -> None:
        self.rail = SimPsuRail(pty=False, psus=3)
        self.sim = SimNode(name="n", tree=Tree(tmp_path), rng=random.Random(1), devices=[SimHost(), self.rail])
        self.sim.load = 1.0
        self.root = ReadLog(tmp_path)
        self.host = HostCollector(self.root, FakeClock())
        self.psu_hwmon = HwmonPowerCollector(self.root, PsuHwmonSection())
        self.t_s = 0.0

    def tick(self) -> tuple[list[PmbusPsuReading], dict[str, str]]:
        """The supplies' readings and the temperatures (sensor: label) after one simulated second."""
        self.t_s += 1.0
        self.sim.step(self.t_s)
        self.root.read.clear()
        self.root.listed.clear()
        with read_scope():
            temps = {t.sensor: t.label for t in self.host.collect() if isinstance(t, TemperatureReading)}
            psus = [r for r in self.psu_hwmon.collect() if isinstance(r, PmbusPsuReading)]
        return psus, temps


def show_first_supply_current_and_temperature(node: Node, shown: bool) -> None:
    """The first supply's driver shows (or hides) its output current and temperature inputs."""
    chip = node.rail.pmbus_chips[0]
    for name in ("curr2_input", "temp1_input"):
        if shown:
            chip.show(name)
        else:
            chip.hide(name)


def first_supply_current_and_temperature(node: Node) -> tuple[float | None, str | None]:
    """The first supply's output current and its temperature's label at the next tick (``None``: not read)."""
    psus, temps = node.tick()
    return psus[0].iout_amps, temps.get("1-0058/temp1")


def test_a_supply_registered_again_under_its_hwmon_name_is_named_anew_at_the_next_tick(tmp_path: Path) -> None:
    node = Node(tmp_path)
    psus, temps = node.tick()
    assert [(p.sensor, p.chip) for p in psus] == [("1-0058", "pmbus"), ("1-0059", "pmbus"), ("1-005a", "pmbus")]
    assert "1-0059/temp1" in temps
    # The second supply's PMBus cable is replugged and its I2C client instantiated at another
    # address; the kernel gives it hwmon21 again. The names follow at the next tick, not a
    # refresh of the facts later.
    node.rail.pmbus_chips[1].reregister(address=0x5C)
    psus, temps = node.tick()
    assert [p.sensor for p in psus] == ["1-0058", "1-005c", "1-005a"]
    assert "1-005c/temp1" in temps and "1-0059/temp1" not in temps
    assert all(p.iout_amps for p in psus)
    # A driver reload: the PSU-specific driver takes the third supply, same client, same hwmon22.
    node.rail.pmbus_chips[2].reregister(driver="ibm-cffps")
    psus, temps = node.tick()
    assert [(p.sensor, p.chip) for p in psus] == [("1-0058", "pmbus"), ("1-005c", "pmbus"), ("1-005a", "ibm-cffps")]
    assert temps["1-005a/temp1"] == "ibm-cffps temp1"


def test_an_unchanged_node_lists_and_reads_no_more_than_before(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick()
    node.tick()
    # The thermal zones and the hwmon devices listed (by each collector; the read scope lists them
    # once), no chip directory, no name or label: only the values.
    assert node.root.listed == LISTED
    assert not [r for r in node.root.read if r.endswith(("/name", "_label"))]
    node.rail.pmbus_chips[0].reregister(address=0x5D)
    node.tick()
    assert "/sys/class/hwmon/hwmon20" in node.root.listed  # its facts, read again
    node.tick()
    assert node.root.listed == LISTED


def test_an_input_absent_when_the_facts_are_read_is_read_the_tick_it_comes_back(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick()
    show_first_supply_current_and_temperature(node, False)
    assert first_supply_current_and_temperature(node) == (None, None)
    # Another chip registers (a BMC's sensors): every chip's facts are read again, the first
    # supply's output current and temperature hidden at that moment.
    node.sim.tree.write("/sys/class/hwmon/hwmon1/name", "nct6779\n")
    node.sim.tree.write("/sys/class/hwmon/hwmon1/in0_input", "1016\n")
    assert first_supply_current_and_temperature(node) == (None, None)
    show_first_supply_current_and_temperature(node, True)
    iout, temp = first_supply_current_and_temperature(node)
    assert iout and iout > 1.0 and temp == "pmbus temp1"


def test_an_input_its_driver_creates_a_moment_after_the_registration_is_read_the_next_tick(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick()
    # The driver reloads and registers the first supply again, creating its output current and
    # temperature inputs a moment after the hwmon directory appears (the udev race of a module
    # load): the tick between sees the labels without the inputs.
    node.rail.pmbus_chips[0].reregister()
    show_first_supply_current_and_temperature(node, False)
    assert first_supply_current_and_temperature(node) == (None, None)
    show_first_supply_current_and_temperature(node, True)
    iout, temp = first_supply_current_and_temperature(node)
    assert iout and iout > 1.0 and temp == "pmbus temp1"
    # Complete now: the facts are kept again.
    node.tick()
    assert node.root.listed == LISTED


def test_an_input_hidden_for_good_costs_a_listing_now_and_then_not_a_read_every_tick(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick()
    chip = node.rail.pmbus_chips[2]
    chip.hide("in2_input")
    chip.hide("temp1_input")
    hidden = {"/sys/class/hwmon/hwmon22/in2_input", "/sys/class/hwmon/hwmon22/temp1_input"}
    for _ in range(REFRESH_EVERY):  # until the facts are refreshed and find them gone
        node.tick()
    reads = listings = 0
    for _ in range(3 * REFRESH_EVERY):
        psus, temps = node.tick()
        assert psus[2].vout_volts is None and "1-005a/temp1" not in temps
        reads += len(hidden & set(node.root.read))
        listings += node.root.listed.count("/sys/class/hwmon/hwmon22")
    # Looked for at the refreshes and a few times between, backing off (1, 2, 4... ticks), by
    # listing the chip (host and psu_hwmon share the listing in the tick's read scope).
    assert reads == 0
    assert listings <= 3 * 7
    chip.show("in2_input")
    chip.show("temp1_input")
    for _ in range(REFRESH_EVERY):
        psus, temps = node.tick()
        if psus[2].vout_volts is not None:
            break
    assert psus[2].vout_volts and psus[2].vout_volts > 11.0
    assert "1-005a/temp1" in temps
    # Found: complete again, listed no more.
    node.tick()
    assert node.root.listed == LISTED


def test_an_input_hidden_for_a_tick_at_a_refresh_is_read_the_tick_after(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick()
    chip = node.rail.pmbus_chips[1]
    for _ in range(REFRESH_EVERY - 1):
        node.tick()
    chip.hide("curr2_input")
    psus, _ = node.tick()  # the refresh lists the chip without it
    assert "/sys/class/hwmon/hwmon21" in node.root.listed
    assert psus[1].iout_amps is None
    chip.show("curr2_input")
    psus, _ = node.tick()
    assert psus[1].iout_amps and psus[1].iout_amps > 1.0


def test_an_input_removed_between_two_reads_of_the_facts_is_not_opened_every_tick_until_a_refresh(
        tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick()
    node.tick()
    # The driver removes the first supply's output current and temperature inputs (a sensor unbound)
    # between two reads of the chip's facts: the next tick finds them gone.
    show_first_supply_current_and_temperature(node, False)
    hidden = {"/sys/class/hwmon/hwmon20/curr2_input", "/sys/class/hwmon/hwmon20/temp1_input"}
    read_at = []
    for tick in range(REFRESH_EVERY - 5):
        assert first_supply_current_and_temperature(node) == (None, None)
        if hidden & set(node.root.read):
            read_at.append(tick)
    # Opened (and found gone) once; then the chip is listed now and then, backing off, not the
    # inputs opened every tick until the facts' refresh.
    assert read_at == [0]
    show_first_supply_current_and_temperature(node, True)
    for _ in range(REFRESH_EVERY):
        iout, temp = first_supply_current_and_temperature(node)
        if iout is not None:
            break
    assert iout and iout > 1.0 and temp == "pmbus temp1"


def test_an_input_that_fails_to_read_is_read_again_every_tick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first supply's output current is there but does not answer (EIO: its I2C read failed).
    failing = "/sys/class/hwmon/hwmon20/curr2_input"
    refuse_reads(monkeypatch, lambda path: errno.EIO if path.endswith(failing) else None)
    node = Node(tmp_path)
    node.tick()
    for _ in range(5):
        assert first_supply_current_and_temperature(node)[0] is None
        assert failing in node.root.read
        assert node.root.listed == LISTED  # present: its chip's facts are kept
    monkeypatch.undo()
    iout, _ = first_supply_current_and_temperature(node)
    assert iout and iout > 1.0
