"""Benchmark: where a probe's round trip goes in the simulated tp-cluster (four agents and the wire in one process).

Runs ``running_rig("tp-cluster", 4, speed=4)`` (as tests/sim/test_tp_cluster.py does) for
``--seconds`` and records, for every answered probe of the healthy paths (every path but the
slow node02<->node03 RoCE and the thunderbolt-net pair), from timestamps of the kernel and of
the threads:

- ``kernel rtt``: the prober's send to the kernel's receive time of the reply (what the
  prober measured before replies carried the responder's hold time);
- ``responder hold``: what the reply says the responder held the request (its kernel's
  receive time to its reply), and ``measured``: the round trip the agent reports (kernel rtt
  minus the hold);
- ``relay wake``: per datagram, how long the wire's thread took from the kernel's receive
  time to handling it (request and reply legs): the simulator's own GIL and CPU waits. Only
  with ``--wire-thread``: the relays on a thread of this process, as the rig ran them before
  it gave them a process of their own (``SimWire.start(own_process=True)``).

Prints percentiles of each (microseconds), the switch interval, and the medians of the agents'
own readings (node01's view, as the test reads them).

    python benchmarks/tp_rtt_breakdown.py [--seconds 20] [--wire-thread] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from statistics import median, quantiles

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rigmon.probes import sender as sender_module  # noqa: E402
from rigmon.sim import rig as rig_module  # noqa: E402
from rigmon.sim.scenarios.tp_cluster import MGMT_DELAY_US, ROCE_DELAY_US  # noqa: E402
from rigmon.sim.wire import SimWire, _Relay  # noqa: E402

#: Paths the scenario makes slow or silent (node indices), left out of the healthy figures.
_NOT_HEALTHY = {("node02", "node03", "roce"), ("node03", "node02", "roce"), ("node03", "node04", "tbnet"),
                ("node04", "node03", "tbnet")}

#: By path name (roce, mgmt): the prober's round trips and the responders' holds.
kernel_rtt_us: dict[str, list[float]] = {"roce": [], "mgmt": []}
held_us: dict[str, list[float]] = {"roce": [], "mgmt": []}
measured_us: dict[str, list[float]] = {"roce": [], "mgmt": []}
wake_us: dict[bool, list[float]] = {True: [], False: []}


#: ``--wire-thread``: the relays on a thread of this process (timed), not in a child process.
wire_thread = False


class _TimedWire(SimWire):
    """The simulator's wire, noting each datagram's wait between the kernel and the relay's thread."""

    def start(self, own_process: bool = False) -> None:
        super().start(own_process=own_process and not wire_thread)

    def _relay(self, relay: _Relay, front: bool, data: bytes, addr: tuple[str, int], arrived_ns: int | None) -> None:
        if arrived_ns is not None and (relay.path.path != "roce" or {relay.src, relay.dst} != {1, 2}):
            wake_us[front].append((time.time_ns() - arrived_ns) / 1000)
        super()._relay(relay, front, data, addr, arrived_ns)


_answered = sender_module.ProbeSender._answered


def _timed_answered(self: sender_module.ProbeSender, path: sender_module._Path, seq: int, end_ns: int,
                    kernel_ns: int | None = None, held_ns: int | None = None, flooded: bool = False,
                    rdma_down: bool = False) -> None:
    sent = path.by_seq.get(seq)
    fresh = sent is not None and sent.rtt_us is None
    _answered(self, path, seq, end_ns, kernel_ns, held_ns, flooded, rdma_down)
    if not fresh or sent is None or kernel_ns is None or (self.node, path.target.peer, path.target.path) in _NOT_HEALTHY:
        return
    kind = path.target.path
    kernel_rtt_us[kind].append((kernel_ns - sent.start_wall_ns) / 1000)
    if held_ns is not None:
        held_us[kind].append(held_ns / 1000)
    if sent.rtt_us is not None:
        measured_us[kind].append(sent.rtt_us)


def _row(name: str, values: list[float]) -> str:
    if len(values) < 10:
        return f"| {name} | {len(values)} | | | | |"
    q = quantiles(values, n=100)
    return f"| {name} | {len(values)} | {q[49]:.0f} | {q[89]:.0f} | {q[98]:.0f} | {max(values):.0f} |"


async def main(seconds: float) -> None:
    rig_module.SimWire = _TimedWire  # type: ignore[attr-defined]
    sender_module.ProbeSender._answered = _timed_answered  # type: ignore[method-assign]
    async with rig_module.running_rig("tp-cluster", 4, base_port=0, speed=4.0) as rig:
        await asyncio.sleep(3.0)  # the first window
        for table in (kernel_rtt_us, held_us, measured_us, wake_us):
            for values in table.values():
                values.clear()
        p50: dict[str, list[float]] = {}
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.sleep(0.5)
            latest = rig.agents[0].buffer.latest if rig.agents[0].buffer else None
            for p in latest.readings.peer_paths if latest else []:
                if p.rtt_p50_us is not None:
                    p50.setdefault(p.name, []).append(p.rtt_p50_us)
    where = "a thread of this process" if wire_thread else "a process of their own (not timed)"
    print(f"switch interval {sys.getswitchinterval() * 1e3:g} ms, {seconds:g} s, healthy paths of every node, "
          f"relays on {where}")
    print()
    print("| us | n | p50 | p90 | p99 | max |")
    print("|---|---|---|---|---|---|")
    for kind, delay in (("roce", ROCE_DELAY_US), ("mgmt", MGMT_DELAY_US)):
        print(_row(f"{kind} ({delay:g} us): kernel rtt (prober send to reply in its kernel)", kernel_rtt_us[kind]))
        print(_row(f"{kind}: responder hold (its kernel to its reply)", held_us[kind]))
        print(_row(f"{kind}: measured (kernel rtt - hold)", measured_us[kind]))
    print(_row("relay wake, request leg", wake_us[True]))
    print(_row("relay wake, reply leg", wake_us[False]))
    print()
    print("node01's readings, median of its windows' p50 (us): "
          + ", ".join(f"{name} {median(v):.0f}" for name, v in sorted(p50.items())))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--wire-thread", action="store_true", help="relays on a thread of this process, timed")
    parser.add_argument("--smoke", action="store_true", help="2 s (tests/benchmarks/test_smoke.py)")
    args = parser.parse_args()
    wire_thread = args.wire_thread
    asyncio.run(main(2.0 if args.smoke else args.seconds))
