"""The collectors' runner: a batch's collectors share one read scope, the next batch reads afresh."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rigmon.agent.collector_threads import Runner, new_runner, run_batch
from rigmon.collectors.base import Collector, PolledCollector
from rigmon.hw.root import HostRoot
from rigmon.sim import write_tree
from rigmon.sim.tree import Tree


class ChipReader(PolledCollector):
    """Lists the hwmon chips and reads one temperature; ``then`` changes the tree afterwards."""

    def __init__(self, name: str, root: HostRoot, tree: Tree, then: dict[str, str]) -> None:
        self.name = name
        self.root = root
        self.tree = tree
        self.then = then

    def collect(self) -> Sequence[object]:
        seen = [*self.root.listdir("/sys/class/hwmon"), self.root.read_attr("/sys/class/hwmon/hwmon0/temp1_input")]
        for rel, text in self.then.items():
            self.tree.write(rel, text)
        return seen


def run_one_batch(runner: Runner, collectors: dict[str, Collector]) -> dict[str, object]:
    finished: list[Runner] = []
    runner.queued = list(collectors)
    runner.executor.submit(run_batch, runner, collectors.__getitem__, finished.append).result()
    assert finished == [runner]
    outcomes = {name: outcome for name, outcome, _ in runner.done}
    runner.done.clear()
    return outcomes


def test_a_batch_reads_each_file_once_and_the_next_batch_afresh(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, {"/sys/class/hwmon/hwmon0/temp1_input": "40000\n"})
    # Each collector builds its own HostRoot in tests; in the agent they share one.
    changes = {"/sys/class/hwmon/hwmon0/temp1_input": "41000\n", "/sys/class/hwmon/hwmon1/name": "nct6798\n"}
    collectors: dict[str, Collector] = {
        "host": ChipReader("host", HostRoot(tmp_path), tree, changes),
        "psu_hwmon": ChipReader("psu_hwmon", HostRoot(tmp_path), tree, {}),
    }
    runner = new_runner("test-collectors")
    try:
        assert run_one_batch(runner, collectors) == {
            "host": ("ok", ["hwmon0", "40000"]),
            "psu_hwmon": ("ok", ["hwmon0", "40000"]),  # the first collector's reads, not again
        }
        collectors["host"] = ChipReader("host", HostRoot(tmp_path), tree, {})
        assert run_one_batch(runner, collectors) == {
            "host": ("ok", ["hwmon0", "hwmon1", "41000"]),
            "psu_hwmon": ("ok", ["hwmon0", "hwmon1", "41000"]),
        }
    finally:
        runner.executor.shutdown()
    # Outside a batch (a test, a udev re-read), every read is its own.
    root = HostRoot(tmp_path)
    assert root.read_attr("/sys/class/hwmon/hwmon0/temp1_input") == "41000"
    tree.write("/sys/class/hwmon/hwmon0/temp1_input", "42000\n")
    assert root.read_attr("/sys/class/hwmon/hwmon0/temp1_input") == "42000"
