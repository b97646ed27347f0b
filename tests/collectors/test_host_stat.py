"""Host collector with an empty or garbled /proc/stat: the CPU figures are null, said once, and
memory, load, temperatures and links still read."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft, status_note
from rigmon.collectors.host import HostCollector
from rigmon.hw.root import HostRoot
from rigmon.schema import HostReading, NetInterfaceReading, TemperatureReading
from rigmon.sim import write_tree
from rigmon.sim.tree import Tree
from tests.collectors.test_host import NET_DEV_HEAD, FakeClock

GOOD = "cpu  100 0 0 900 0 0 0 0 0 0\ncpu0 50 0 0 450 0 0 0 0 0 0\ncpu1 50 0 0 450 0 0 0 0 0 0\n"


def _node(root: Path) -> Tree:
    return write_tree(root, {
        "/proc/stat": GOOD,
        "/proc/loadavg": "0.50 0.40 0.30 1/80 11206\n",
        "/proc/meminfo": "MemTotal:  2048 kB\nMemFree:  512 kB\nMemAvailable:  1024 kB\n",
        "/proc/uptime": "350735.47 234388.90\n",
        "/proc/net/dev": NET_DEV_HEAD + "  eth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n",
        "/sys/class/net/eth0/carrier": "1\n",
        "/sys/class/net/eth0/speed": "25000\n",
        "/sys/class/thermal/thermal_zone0/type": "x86_pkg_temp\n",
        "/sys/class/thermal/thermal_zone0/temp": "52000\n",
    })


def _split(records: object) -> tuple[HostReading, list[EventDraft], list[object]]:
    assert isinstance(records, list)
    host = next(r for r in records if isinstance(r, HostReading))
    events = [r for r in records if isinstance(r, EventDraft)]
    rest = [r for r in records if isinstance(r, (NetInterfaceReading, TemperatureReading))]
    return host, events, rest


@pytest.mark.parametrize("bad", [
    "",  # read while the file was empty
    "\x00\xff garbage " * 50,
    "intr 114930548 113199788\nctxt 1990473\n",  # no aggregate cpu line
    "cpu  100 0 x0 900\ncpu0 100 0 0 900\n",  # a field that is no counter
    "cpu  100 0\n",  # cut short
])
def test_a_bad_proc_stat_costs_only_the_cpu_figures(tmp_path: Path, bad: str) -> None:
    tree = _node(tmp_path)
    clock = FakeClock()
    collector = HostCollector(HostRoot(tmp_path), clock)
    host, events, _ = _split(collector.collect())
    assert (host.cpu_count, events, status_note(collector)) == (2, [], None)

    tree.write("/proc/stat", bad)
    ticks = []
    for _ in range(3):
        clock.now += 1.0
        ticks.append(_split(collector.collect()))
    for host, _, rest in ticks:
        assert (host.cpu_pct, host.cpu_count) == (None, None)
        assert (host.load_1, host.mem_total_bytes, host.mem_available_bytes) == (0.5, 2048 * 1024, 1024 * 1024)
        assert host.uptime_s == 350735.47
        assert [type(r).__name__ for r in rest] == ["TemperatureReading", "NetInterfaceReading"]
    # Said once when it goes bad, and in the collector's status while it stays bad.
    assert [[(e.kind, e.severity) for e in events] for _, events, _ in ticks] == [
        [("proc_stat_garbled", "warning")], [], []]
    note = status_note(collector)
    assert note is not None and note.startswith("no CPU figures: ")
    assert ticks[0][1][0].data == {"error": note.removeprefix("no CPU figures: ")}

    # Back: the busy share is over the ticks since the last good read, the note is gone.
    tree.write("/proc/stat", GOOD.replace("100 0 0 900", "400 0 0 1600", 1))
    clock.now += 1.0
    host, events, _ = _split(collector.collect())
    assert (host.cpu_pct, host.cpu_count, events, status_note(collector)) == (30.0, 2, [], None)
    # Bad again: a new spell, said again.
    tree.write("/proc/stat", bad)
    clock.now += 1.0
    assert [e.kind for e in _split(collector.collect())[1]] == ["proc_stat_garbled"]
