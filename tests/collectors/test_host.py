"""Host collector parsers and behaviour over two samples."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from rigmon.collectors.base import CollectorError
from rigmon.collectors.host import HostCollector
from rigmon.collectors.host_proc import parse_loadavg, parse_meminfo, parse_net_dev, parse_proc_stat, parse_uptime
from rigmon.hw.root import HostRoot
from rigmon.schema import HostReading, NetInterfaceReading, TemperatureReading
from rigmon.sim import write_tree
from rigmon.sim.tree import Tree
from tests.hw.refusals import refuse_reads

NET_DEV_HEAD = (
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def monotonic(self) -> float:
        return self.now


def test_parse_proc_stat_counts_iowait_as_idle_and_cpus() -> None:
    text = "cpu  100 0 50 800 50 0 0 0 30 0\ncpu0 50 0 25 400 25 0 0 0 15 0\ncpu1 50 0 25 400 25 0 0 0 15 0\n"
    cpu = parse_proc_stat(text)
    assert (cpu.busy, cpu.total, cpu.cpu_count) == (150, 1000, 2)


def _proc_stat(online: list[int], interrupts: int = 3) -> str:
    """/proc/stat as the kernel writes it: the aggregate line, one line per online CPU, then the rest."""
    lines = ["cpu  4705 356 584 3699 23 23 0 0 0 0"]
    lines += [f"cpu{i} 1393280 32966 572056 13343292 6130 0 17875 0 23933 0" for i in online]
    lines += ["intr 114930548 " + " ".join(["113199788"] + ["0"] * (interrupts - 1)),
              "ctxt 1990473", "btime 1062191376", "processes 2915", "procs_running 1", "procs_blocked 0",
              "softirq 183433 0 21755 12 39 0 0 0 0 0 0"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("online", "count"), [
    ([0], 1), ([0, 1, 2, 3], 4),
    ([0, 2, 3], 3),  # cpu1 offline: no line, so not max index + 1
    ([0, 1, 2, 5, 6, 7], 6),  # several offline, the last one online
    (list(range(256)), 256),
])
def test_parse_proc_stat_counts_the_online_cpus(online: list[int], count: int) -> None:
    cpu = parse_proc_stat(_proc_stat(online))
    assert (cpu.busy, cpu.total, cpu.cpu_count) == (5668, 9390, count)


def test_parse_proc_stat_does_not_depend_on_the_interrupt_counts() -> None:
    # intr has one count per interrupt number: thousands on a large machine, most of the file.
    assert parse_proc_stat(_proc_stat([0, 1], interrupts=5000)) == parse_proc_stat(_proc_stat([0, 1]))
    # The last line of a text cut short still counts.
    assert parse_proc_stat("cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 3 4").cpu_count == 2


def test_cpus_going_offline_and_back_change_the_count(tmp_path: Path) -> None:
    clock = FakeClock()
    collector = HostCollector(HostRoot(tmp_path), clock)
    counts = []
    for online in ([0, 1, 2, 3], [0, 2, 3], [0], [0, 1, 2, 3]):
        write_tree(tmp_path, {"/proc/stat": _proc_stat(online)})
        host = next(r for r in collector.collect() if isinstance(r, HostReading))
        counts.append(host.cpu_count)
        clock.now += 1.0
    assert counts == [4, 3, 1, 4]


def test_parse_proc_stat_old_kernel_four_fields() -> None:
    assert parse_proc_stat("cpu 1 2 3 4\ncpu0 1 2 3 4\n").total == 10


@pytest.mark.parametrize("text", ["", "intr 0\n", "cpu 1 2\n"])
def test_parse_proc_stat_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        parse_proc_stat(text)


def test_parse_small_files() -> None:
    assert parse_loadavg("0.20 0.18 0.12 1/80 11206\n") == (0.2, 0.18, 0.12)
    assert parse_uptime("350735.47 234388.90\n") == 350735.47
    mem = parse_meminfo("MemTotal:  1000 kB\nHugePages_Total:   4\nbroken line\n")
    assert mem == {"MemTotal": 1024000, "HugePages_Total": 4}


def test_parse_meminfo_stops_once_the_wanted_keys_are_read() -> None:
    text = ("MemTotal:  1000 kB\nMemFree:  5 kB\nMemAvailable:  700 kB\nSwapTotal:  0 kB\nSwapFree:  0 kB\n"
            "HugePages_Total:   4\n")
    keys = ("MemTotal", "MemAvailable", "SwapTotal", "SwapFree")
    assert parse_meminfo(text, keys) == {"MemTotal": 1024000, "MemFree": 5120, "MemAvailable": 716800,
                                         "SwapTotal": 0, "SwapFree": 0}
    # A kernel without MemAvailable (before 3.14): every line is read, the key is absent.
    old = parse_meminfo(text.replace("MemAvailable", "Cached"), keys)
    assert "MemAvailable" not in old and old["HugePages_Total"] == 4


def test_parse_net_dev_long_names_and_missing_space() -> None:
    text = NET_DEV_HEAD + "enp65s0f0np0:1 2 3 4 0 0 0 0 5 6 7 8 0 0 0 0\n  eth0: 9 9 0 0 0 0 0 0 9 9 0 0 0 0 0 0\n"
    nets = parse_net_dev(text).interfaces
    assert nets["enp65s0f0np0"].rx_bytes == 1
    assert nets["enp65s0f0np0"].tx_dropped == 8
    assert set(nets) == {"enp65s0f0np0", "eth0"}


def test_parse_net_dev_skips_a_short_line_on_its_own() -> None:
    parsed = parse_net_dev(NET_DEV_HEAD + "  eth0: 1 2 3\n  eth1: 9 9 0 0 0 0 0 0 9 9 0 0 0 0 0 0\n")
    assert list(parsed.interfaces) == ["eth1"] and parsed.skipped == ("eth0: 1 2 3",)


def _tree(tmp_path: Path, busy: int, idle: int, rx: int) -> None:
    write_tree(tmp_path, {
        "/proc/stat": f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {busy} 0 0 {idle} 0 0 0 0 0 0\n",
        "/proc/net/dev": NET_DEV_HEAD + f"  eth0: {rx} 10 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        "/sys/class/net/eth0/speed": "25000\n",
        "/sys/class/net/eth0/carrier": "1\n",
    })


def test_second_sample_has_cpu_percent_and_rates(tmp_path: Path) -> None:
    clock = FakeClock()
    _tree(tmp_path, busy=100, idle=900, rx=1000)
    collector = HostCollector(HostRoot(tmp_path), clock)
    first = collector.collect()
    host = next(r for r in first if isinstance(r, HostReading))
    net = next(r for r in first if isinstance(r, NetInterfaceReading))
    assert host.cpu_pct is None and net.rx_bytes_per_s is None
    _tree(tmp_path, busy=400, idle=1600, rx=6000)
    clock.now += 2.0
    second = collector.collect()
    host = next(r for r in second if isinstance(r, HostReading))
    net = next(r for r in second if isinstance(r, NetInterfaceReading))
    assert host.cpu_pct == 30.0
    assert net.rx_bytes_per_s == 2500.0
    assert net.speed_mbps == 25000 and net.carrier is True


def test_counter_reset_gives_no_rate(tmp_path: Path) -> None:
    clock = FakeClock()
    _tree(tmp_path, busy=100, idle=900, rx=10_000)
    collector = HostCollector(HostRoot(tmp_path), clock)
    collector.collect()
    _tree(tmp_path, busy=200, idle=1000, rx=50)  # driver reloaded
    clock.now += 1.0
    net = next(r for r in collector.collect() if isinstance(r, NetInterfaceReading))
    assert net.rx_bytes_per_s is None


def test_missing_proc_stat_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CollectorError):
        HostCollector(HostRoot(tmp_path), FakeClock()).collect()


def test_boot_id_is_read_as_a_fact(tmp_path: Path) -> None:
    """The boot id changes only with a reboot: read until readable, then kept and read again
    every `REFRESH_EVERY` samples, as the collectors' other facts."""
    from rigmon.collectors.device_facts import REFRESH_EVERY

    _tree(tmp_path, busy=100, idle=900, rx=1000)
    collector = HostCollector(HostRoot(tmp_path), FakeClock())

    def boot_id() -> str | None:
        return next(r for r in collector.collect() if isinstance(r, HostReading)).boot_id

    assert boot_id() is None
    tree = write_tree(tmp_path, {"/proc/sys/kernel/random/boot_id": "b1\n"})
    assert boot_id() == "b1"
    tree.write("/proc/sys/kernel/random/boot_id", "b2\n")
    assert boot_id() == "b1"  # kept: not read every sample
    assert [boot_id() for _ in range(REFRESH_EVERY)][-1] == "b2"


def test_one_sensor_or_nic_refusing_a_read_costs_only_that_reading(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # amdgpu answers EPERM for its hwmon files while the GPU is runtime-suspended or in reset;
    # a NIC driver's get_link_ksettings passes on its firmware's ETIMEDOUT through `speed`.
    _tree(tmp_path, busy=100, idle=900, rx=1000)
    write_tree(tmp_path, {
        "/sys/class/hwmon/hwmon0/name": "k10temp\n",
        "/sys/class/hwmon/hwmon0/temp1_input": "45250\n",
        "/sys/class/hwmon/hwmon0/temp1_label": "Tctl\n",
        "/sys/class/hwmon/hwmon1/name": "amdgpu\n",
        "/sys/class/hwmon/hwmon1/temp1_input": "40000\n",
        "/sys/class/hwmon/hwmon1/temp1_label": "edge\n",
    })
    refusals = {f"{tmp_path}/sys/class/hwmon/hwmon1/temp1_input": errno.EPERM,
                f"{tmp_path}/sys/class/net/eth0/speed": errno.ETIMEDOUT}
    refuse_reads(monkeypatch, refusals.get)
    records = HostCollector(HostRoot(tmp_path), FakeClock()).collect()
    assert any(isinstance(r, HostReading) for r in records)
    assert [(t.label, t.temp_c) for t in records if isinstance(t, TemperatureReading)] == [("k10temp Tctl", 45.25)]
    net = next(r for r in records if isinstance(r, NetInterfaceReading))
    assert net.name == "eth0" and net.speed_mbps is None and net.carrier is True


def _psu_temperatures(root: Path, psus: tuple[tuple[int, str | None, int], ...]) -> dict[str, tuple[str, float]]:
    """Sensor -> (label, °C) of the host collector's temperatures for PMBus PSUs at ``hwmonN`` on an
    I2C client (``None``: no device link), next to a k10temp at hwmon0."""
    tree = Tree(root)
    _tree(root, busy=100, idle=900, rx=1000)
    tree.write("/sys/class/hwmon/hwmon0/name", "k10temp\n")
    tree.write("/sys/class/hwmon/hwmon0/temp1_input", "45000\n")
    for hwmon, client, millideg in psus:
        base = f"/sys/class/hwmon/hwmon{hwmon}"
        tree.write(f"{base}/name", "pmbus\n")
        tree.write(f"{base}/temp1_input", f"{millideg}\n")
        if client is not None:
            tree.write(f"/sys/devices/pci0000:00/0000:00:1f.4/i2c-7/{client}/name", "pmbus\n")
            tree.symlink(f"{base}/device", f"../../../devices/pci0000:00/0000:00:1f.4/i2c-7/{client}")
    records = HostCollector(HostRoot(root), FakeClock()).collect()
    return {t.sensor: (t.label, t.temp_c) for t in records if isinstance(t, TemperatureReading)}


def test_psu_temperatures_are_named_by_the_i2c_client_across_a_reboot(tmp_path: Path) -> None:
    # The kernel numbers hwmon devices in probe order: after a reboot the PSU at 7-0059 is
    # hwmon3 where it was hwmon4. Its temperature's sensor (the journal series, /metrics label and
    # selector identity) follows the PSU, as the psu_hwmon collector names the PSU itself.
    before = _psu_temperatures(tmp_path / "boot1", ((3, "7-0058", 38000), (4, "7-0059", 52000), (5, None, 30000)))
    after = _psu_temperatures(tmp_path / "boot2", ((3, "7-0059", 52000), (4, "7-0058", 38000), (5, None, 30000)))
    assert before == after == {
        "k10temp-virtual-0/temp1": ("k10temp temp1", 45.0),  # no device link: libsensors' virtual device
        "7-0058/temp1": ("pmbus temp1", 38.0),
        "7-0059/temp1": ("pmbus temp1", 52.0),
        "hwmon5/temp1": ("pmbus temp1", 30.0),  # no I2C client: the hwmon name, as psu_hwmon does
    }


def test_two_psu_chips_of_one_i2c_client_keep_their_hwmon_names(tmp_path: Path) -> None:
    # One client cannot name two chips' temperatures (psu_sensors): they stay hwmonN, unique.
    temps = _psu_temperatures(tmp_path, ((3, "7-0058", 38000), (4, "7-0058", 52000), (5, "7-0059", 30000)))
    assert set(temps) == {"k10temp-virtual-0/temp1", "hwmon3/temp1", "hwmon4/temp1", "7-0059/temp1"}
