"""Facts read once per device: a device appearing, disappearing or swapped is still seen."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.host import HostCollector
from rigmon.collectors.hwmon_power import HwmonPowerCollector
from rigmon.collectors.nvme import NvmeCollector
from rigmon.collectors.raid import RaidCollector
from rigmon.collectors.thunderbolt import ThunderboltCollector
from rigmon.config import PsuHwmonSection
from rigmon.hw.root import HostRoot
from rigmon.schema import (
    HwmonVoltageReading,
    NetInterfaceReading,
    NvmeReading,
    RaidArrayReading,
    TemperatureReading,
    ThunderboltDeviceReading,
)
from rigmon.sim import write_tree
from rigmon.sim.tree import Tree
from rigmon.sim.udev import FakeUdevSource
from tests.collectors.root_helpers import ListLog


def test_facts_are_read_once_until_the_device_set_changes() -> None:
    reads: list[str] = []

    def read(device: str) -> str:
        reads.append(device)
        return device.upper()

    facts: DeviceFacts[str, str] = DeviceFacts(refresh_every=100)
    for _ in range(3):
        facts.begin(["a", "b"])
        assert [facts.get("a", read), facts.get("b", read)] == ["A", "B"]
    assert reads == ["a", "b"]
    facts.begin(["a", "b", "c"])  # c appeared: everything is read again
    assert [facts.get(d, read) for d in "abc"] == ["A", "B", "C"]
    assert reads == ["a", "b", "a", "b", "c"]
    facts.begin(["a", "c"])  # b disappeared
    facts.get("a", read)
    assert reads[-1] == "a"


def test_facts_are_read_again_every_refresh_and_on_request() -> None:
    reads: list[str] = []

    def read(device: str) -> int:
        reads.append(device)
        return len(reads)

    facts: DeviceFacts[str, int] = DeviceFacts(refresh_every=3)
    values = []
    for _ in range(7):
        facts.begin(["a"])
        values.append(facts.get("a", read))
    assert values == [1, 1, 1, 2, 2, 2, 3]  # ground truth every third read
    facts.forget("a")
    facts.begin(["a"])
    assert facts.get("a", read) == 4
    facts.invalidate()
    facts.begin(["a"])
    assert facts.get("a", read) == 5


def test_the_facts_a_device_had_before_they_were_dropped_stay_at_hand_for_their_next_read() -> None:
    facts: DeviceFacts[tuple[str, int], str] = DeviceFacts(refresh_every=2)
    facts.begin([("hwmon3", 7)])
    assert facts.previous(("hwmon3", 7)) is None
    assert facts.get(("hwmon3", 7), lambda _: "in1 in2") == "in1 in2"
    facts.begin([("hwmon3", 7)])
    facts.begin([("hwmon3", 7)])  # due: dropped, the last ones at hand while they are read again
    assert facts.previous(("hwmon3", 7)) == "in1 in2"
    assert facts.get(("hwmon3", 7), lambda key: f"{facts.previous(key)} in3") == "in1 in2 in3"
    facts.begin([("hwmon3", 8)])  # registered again: another device, none of the old one's facts
    assert facts.previous(("hwmon3", 8)) is None
    facts.get(("hwmon3", 8), lambda _: "in1")
    facts.forget(("hwmon3", 8))
    assert facts.previous(("hwmon3", 8)) == "in1"
    facts.get(("hwmon3", 8), lambda _: "in4")
    facts.invalidate()
    assert facts.previous(("hwmon3", 8)) == "in4"


def test_a_device_whose_read_found_something_missing_is_read_again_backing_off() -> None:
    reads: list[int] = []
    facts: DeviceFacts[str, int] = DeviceFacts(refresh_every=20)

    def read(device: str) -> int:
        reads.append(tick)
        if len(reads) < 6:  # the file it needs comes at the sixth read
            facts.recheck(device)
        return len(reads)

    kept = []
    for tick in range(1, 40):
        kept.append(facts.begin(["a"]))
        facts.get("a", read)
    # Again after 1, 2, 4 and 8 reads of the device set, then at the refresh (the 21st); found: no more.
    assert reads == [1, 2, 4, 8, 16, 21]
    assert kept[:8] == [False, False, True, False, True, True, True, False]


def nvme_files(name: str, model: str, firmware: str = "4B2QJXD7", state: str = "live") -> dict[str, str]:
    base = f"/sys/class/nvme/{name}"
    return {
        f"{base}/model": f"{model}      \n",
        f"{base}/serial": f"S{name}\n",
        f"{base}/firmware_rev": f"{firmware}\n",
        f"{base}/state": f"{state}\n",
        f"{base}/device/current_link_speed": "16.0 GT/s PCIe\n",
        f"{base}/device/current_link_width": "4\n",
        f"{base}/device/max_link_speed": "16.0 GT/s PCIe\n",
        f"{base}/device/max_link_width": "4\n",
        f"{base}/hwmon2/name": "nvme\n",
        f"{base}/hwmon2/temp1_input": "38850\n",
        f"{base}/hwmon2/temp1_crit": "84850\n",
    }


def nvme_readings(records: Sequence[object]) -> dict[str, NvmeReading]:
    return {r.name: r for r in records if isinstance(r, NvmeReading)}


def test_nvme_controller_plugged_unplugged_and_swapped_under_the_same_name(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, nvme_files("nvme0", "Samsung SSD 990 PRO 2TB"))
    collector = NvmeCollector(HostRoot(tmp_path))
    assert nvme_readings(collector.collect())["nvme0"].model == "Samsung SSD 990 PRO 2TB"
    write_tree(tmp_path, nvme_files("nvme1", "WD_BLACK SN850X 4000GB"))
    seen = nvme_readings(collector.collect())
    assert (seen["nvme1"].model, seen["nvme1"].serial, seen["nvme1"].temp_c) == ("WD_BLACK SN850X 4000GB", "Snvme1",
                                                                                  38.85)
    tree.remove("/sys/class/nvme/nvme0")
    assert set(nvme_readings(collector.collect())) == {"nvme1"}
    # Another drive comes back under the old name: it is not mistaken for the first one.
    write_tree(tmp_path, nvme_files("nvme0", "Crucial T705 2TB"))
    assert nvme_readings(collector.collect())["nvme0"].model == "Crucial T705 2TB"


def test_nvme_identity_is_read_again_after_a_reset_and_the_temperature_every_time(tmp_path: Path) -> None:
    write_tree(tmp_path, nvme_files("nvme0", "Samsung SSD 990 PRO 2TB", firmware="4B2QJXD7"))
    collector = NvmeCollector(HostRoot(tmp_path))
    assert nvme_readings(collector.collect())["nvme0"].firmware == "4B2QJXD7"
    # A firmware activation resets the controller: state resetting, then live with the new revision.
    write_tree(tmp_path, {"/sys/class/nvme/nvme0/state": "resetting\n", "/sys/class/nvme/nvme0/firmware_rev": "4B2QJXD8\n",
                          "/sys/class/nvme/nvme0/hwmon2/temp1_input": "45000\n"})
    reset = nvme_readings(collector.collect())["nvme0"]
    assert (reset.state, reset.firmware, reset.temp_c) == ("resetting", "4B2QJXD8", 45.0)


def test_nvme_udev_event_reads_the_identity_again(tmp_path: Path) -> None:
    write_tree(tmp_path, nvme_files("nvme0", "Samsung SSD 990 PRO 2TB"))
    source = FakeUdevSource()
    collector = NvmeCollector(HostRoot(tmp_path), source)
    collector.collect()
    pushed: list[Sequence[object]] = []
    got = threading.Event()

    def push(records: Sequence[object]) -> None:
        pushed.append(records)
        got.set()

    collector.start(push)
    try:
        # Swapped between two polls under the same name; only udev tells.
        write_tree(tmp_path, nvme_files("nvme0", "Crucial T705 2TB"))
        source.inject("add", "/devices/pci0000:00/0000:00:01.1/0000:64:00.0/nvme/nvme0", "nvme")
        assert got.wait(10)
    finally:
        collector.close()
    assert nvme_readings(pushed[-1])["nvme0"].model == "Crucial T705 2TB"
    assert nvme_readings(collector.collect())["nvme0"].model == "Crucial T705 2TB"


def test_nvme_namespaces_are_listed_once_until_a_change_is_signalled(tmp_path: Path) -> None:
    files = nvme_files("nvme0", "Samsung SSD 990 PRO 2TB")
    tree = write_tree(tmp_path, files)
    root = ListLog(tmp_path)
    source = FakeUdevSource()
    collector = NvmeCollector(root, source)
    # Hot-plugged: the namespace comes a moment after the controller, and is looked for each read until then.
    assert nvme_readings(collector.collect())["nvme0"].namespaces == ()
    tree.write("/sys/class/nvme/nvme0/nvme0n1/size", "100\n")
    assert nvme_readings(collector.collect())["nvme0"].namespaces == ("nvme0n1",)
    root.listed.clear()
    for _ in range(3):
        reading = nvme_readings(collector.collect())["nvme0"]
        assert (reading.namespaces, reading.temp_c) == (("nvme0n1",), 38.85)
    # The controllers and the hwmon registrations (listed once a tick for every collector, in the
    # agent's read scope): no controller directory.
    assert root.listed == ["/sys/class/nvme", "/sys/class/hwmon"] * 3
    # A namespace attached: the controller gets a change event (NVME_AEN), which lists it again.
    tree.write("/sys/class/nvme/nvme0/nvme0n2/size", "100\n")
    pushed: list[Sequence[object]] = []
    got = threading.Event()

    def push(records: Sequence[object]) -> None:
        pushed.append(records)
        got.set()

    collector.start(push)
    try:
        source.inject("change", "/devices/pci0000:00/0000:00:01.1/0000:64:00.0/nvme/nvme0", "nvme")
        assert got.wait(10)
    finally:
        collector.close()
    assert nvme_readings(pushed[-1])["nvme0"].namespaces == ("nvme0n1", "nvme0n2")
    # A reset (state change) lists it again too; so does the periodic re-read (see DeviceFacts).
    tree.write("/sys/class/nvme/nvme0/state", "resetting\n")
    tree.remove("/sys/class/nvme/nvme0/nvme0n2")
    assert nvme_readings(collector.collect())["nvme0"].namespaces == ("nvme0n1",)
    root.listed.clear()
    for _ in range(61):
        collector.collect()
    assert root.listed.count("/sys/class/nvme/nvme0") == 1


def psu_chip(tmp_path: Path, index: int, label: str, port: int) -> Tree:
    """``hwmon<index>``: a Super I/O whose hardware monitor is at I/O port ``port``, below its platform device."""
    base = f"/sys/class/hwmon/hwmon{index}"
    tree = write_tree(tmp_path, {f"{base}/name": "nct6779\n", f"{base}/in4_input": "1832\n",
                                 f"{base}/in4_label": f"{label}\n", f"{base}/in4_min": "1712\n"})
    tree.symlink(f"{base}/device", f"../../../devices/platform/nct6775.{port}")
    tree.symlink(f"/sys/devices/platform/nct6775.{port}/subsystem", "../../../bus/platform")
    return tree


def test_hwmon_chip_appearing_and_reregistered_is_seen(tmp_path: Path) -> None:
    tree = psu_chip(tmp_path, 1, "12V", 0x290)
    collector = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection())

    def volts() -> dict[str, str]:
        return {r.sensor: r.label for r in collector.collect() if isinstance(r, HwmonVoltageReading)}

    assert volts() == {"nct6779-isa-0290/in4": "12V"}
    psu_chip(tmp_path, 2, "VIN", 0xA20)
    assert volts() == {"nct6779-isa-0290/in4": "12V", "nct6779-isa-0a20/in4": "VIN"}
    # The driver is unloaded, then loaded again with other labels: the kernel re-uses the number.
    tree.remove("/sys/class/hwmon/hwmon1")
    assert volts() == {"nct6779-isa-0a20/in4": "VIN"}
    psu_chip(tmp_path, 1, "+12V rail", 0x290)
    assert volts() == {"nct6779-isa-0290/in4": "+12V rail", "nct6779-isa-0a20/in4": "VIN"}
    # Values are read every time.
    write_tree(tmp_path, {"/sys/class/hwmon/hwmon2/in4_input": "1900\n"})
    (vin,) = [r for r in collector.collect()
              if isinstance(r, HwmonVoltageReading) and r.sensor == "nct6779-isa-0a20/in4"]
    assert vin.volts == 1.9


def host_files(nics: dict[str, int]) -> dict[str, str]:
    head = "Inter-|   Receive\n face |bytes    packets errs drop fifo frame compressed multicast|bytes\n"
    files = {"/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n",
             "/proc/net/dev": head + "".join(f"{n}: {p} {p} 0 0 0 0 0 0 {p} {p} 0 0 0 0 0 0\n"
                                            for n, p in nics.items())}
    for name in nics:
        files[f"/sys/class/net/{name}/type"] = "1\n"
        files[f"/sys/class/net/{name}/operstate"] = "up\n"
    return files


def test_host_interface_and_sensor_appearing_are_seen_with_their_kind_and_label(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    write_tree(tmp_path, {**host_files({"eth0": 10}), "/sys/class/hwmon/hwmon0/name": "k10temp\n",
                          "/sys/class/hwmon/hwmon0/temp1_input": "45000\n"})

    class Clock:
        def time(self) -> float:
            return 0.0

        def monotonic(self) -> float:
            return 0.0

    collector = HostCollector(HostRoot(tmp_path), Clock())

    def kinds() -> dict[str, str | None]:
        return {r.name: r.kind for r in collector.collect() if isinstance(r, NetInterfaceReading)}

    assert kinds() == {"eth0": "virtual"}
    # A USB network gadget plugged in comes up as usb0 with a driver: ethernet.
    write_tree(tmp_path, host_files({"eth0": 20, "usb0": 5}))
    write_tree(tmp_path, {"/sys/class/net/usb0/device/uevent": "DRIVER=cdc_ether\n"})
    tree.symlink("/sys/class/net/usb0/device/driver", "../../../bus/usb/drivers/cdc_ether")
    assert kinds() == {"eth0": "virtual", "usb0": "ethernet"}
    # Unplugged, then a Thunderbolt host-to-host link takes its place under the same name.
    write_tree(tmp_path, host_files({"eth0": 30}))
    tree.remove("/sys/class/net/usb0")
    assert kinds() == {"eth0": "virtual"}
    write_tree(tmp_path, host_files({"eth0": 40, "usb0": 7}))
    write_tree(tmp_path, {"/sys/class/net/usb0/device/uevent": "DRIVER=thunderbolt-net\n"})
    tree.symlink("/sys/class/net/usb0/device/driver", "../../../bus/thunderbolt/drivers/thunderbolt-net")
    assert kinds() == {"eth0": "virtual", "usb0": "thunderbolt-net"}
    # A sensor chip leaves and another registers under its number.
    tree.remove("/sys/class/hwmon/hwmon0")
    assert not [r for r in collector.collect() if isinstance(r, TemperatureReading)]
    write_tree(tmp_path, {"/sys/class/hwmon/hwmon0/name": "nvme\n", "/sys/class/hwmon/hwmon0/temp1_input": "39000\n",
                          "/sys/class/hwmon/hwmon0/temp1_label": "Composite\n"})
    temps = {r.sensor: r.label for r in collector.collect() if isinstance(r, TemperatureReading)}
    assert temps == {"nvme-virtual-0/Composite": "nvme Composite"}


def tb_files(name: str, vendor: str, device: str, unique_id: str) -> dict[str, str]:
    base = f"/sys/bus/thunderbolt/devices/{name}"
    return {f"{base}/uevent": "DEVTYPE=thunderbolt_device\n", f"{base}/vendor_name": f"{vendor}\n",
            f"{base}/device_name": f"{device}\n", f"{base}/unique_id": f"{unique_id}\n",
            f"{base}/generation": "4\n", f"{base}/authorized": "1\n", f"{base}/rx_speed": "20.0 Gb/s\n",
            f"{base}/tx_speed": "20.0 Gb/s\n", f"{base}/rx_lanes": "2\n", f"{base}/tx_lanes": "2\n"}


def test_thunderbolt_enclosure_swapped_on_a_port_is_seen(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, tb_files("0-1", "OWC", "Express 1M2", "uid-a"))

    class Clock:
        def time(self) -> float:
            return 0.0

        def monotonic(self) -> float:
            return 0.0

    source = FakeUdevSource()
    collector = ThunderboltCollector(HostRoot(tmp_path), Clock(), events=source)

    def devices(records: Sequence[object]) -> dict[str, tuple[str | None, str | None]]:
        return {r.name: (r.device_name, r.unique_id) for r in records if isinstance(r, ThunderboltDeviceReading)}

    assert devices(collector.collect()) == {"0-1": ("Express 1M2", "uid-a")}
    tree.remove("/sys/bus/thunderbolt/devices/0-1")
    assert devices(collector.collect()) == {}
    write_tree(tmp_path, tb_files("0-1", "Sabrent", "Rocket XTRM 5", "uid-b"))
    assert devices(collector.collect()) == {"0-1": ("Rocket XTRM 5", "uid-b")}
    # Swapped between two polls: the udev event makes it read the new identity at once.
    pushed: list[Sequence[object]] = []
    got = threading.Event()

    def push(records: Sequence[object]) -> None:
        pushed.append(records)
        got.set()

    collector.start(push)
    try:
        write_tree(tmp_path, tb_files("0-1", "OWC", "Envoy Ultra", "uid-c"))
        source.inject("add", "/devices/pci0000:00/0000:00:08.3/0000:c6:00.5/domain0/0-0/0-1", "thunderbolt",
                      "thunderbolt_device")
        assert got.wait(10)
    finally:
        collector.close()
    assert devices(pushed[-1]) == {"0-1": ("Envoy Ultra", "uid-c")}


def md_files(uuid: str, members: tuple[str, ...], level: str = "raid1", reshape: str = "") -> dict[str, str]:
    status = "U" * len(members)
    files = {
        "/proc/mdstat": f"Personalities : [{level}]\nmd0 : active {level} "
                        + " ".join(f"{m}[{i}]" for i, m in enumerate(members))
                        + f"\n      1953382400 blocks super 1.2 [{len(members)}/{len(members)}] [{status}]\n{reshape}"
                        + "unused devices: <none>\n",
        "/proc/diskstats": "",
        "/sys/block/md0/md/level": f"{level}\n",
        "/sys/block/md0/md/uuid": f"{uuid}\n",
        "/sys/block/md0/md/raid_disks": f"{len(members)}\n",
        "/sys/block/md0/md/array_state": "clean\n",
    }
    for i, m in enumerate(members):
        files[f"/sys/block/md0/md/dev-{m}/state"] = "in_sync\n"
        files[f"/sys/block/md0/md/dev-{m}/slot"] = f"{i}\n"
        files[f"/sys/block/{m}/size"] = "1\n"
    return files


def test_md_array_reassembled_or_reshaped_is_seen(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, md_files("aaaa:1111", ("sda", "sdb")))

    class Clock:
        def time(self) -> float:
            return 0.0

        def monotonic(self) -> float:
            return 0.0

    collector = RaidCollector(HostRoot(tmp_path), Clock())

    def md0() -> RaidArrayReading:
        (array,) = [r for r in collector.collect() if isinstance(r, RaidArrayReading)]
        return array

    assert (md0().uuid, md0().raid_disks) == ("aaaa:1111", 2)
    # Stopped, and another array assembled as md0 from other disks.
    tree.remove("/sys/block/md0")
    write_tree(tmp_path, md_files("bbbb:2222", ("sdc", "sdd")))
    assert md0().uuid == "bbbb:2222"
    # Grown to three disks: the reshape is read as it goes, and the new count after it.
    progress = "      [>....................]  reshape =  1.0% (1/100) finish=10.0min speed=1000K/sec\n"
    write_tree(tmp_path, md_files("bbbb:2222", ("sdc", "sdd"), reshape=progress))
    assert md0().raid_disks == 2
    write_tree(tmp_path, {"/sys/block/md0/md/raid_disks": "3\n"})
    assert md0().raid_disks == 3
    write_tree(tmp_path, md_files("bbbb:2222", ("sdc", "sdd", "sde")))
    assert (md0().raid_disks, md0().uuid) == (3, "bbbb:2222")
