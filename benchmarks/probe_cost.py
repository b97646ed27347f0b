"""Benchmark: what latency probes cost an agent, and how close their round trips are to the wire's delay.

Starts two real agents (``python -m rigmon agent``) side by side on an empty root: one probes
15 peers at 10 Hz, the other has no peers. The 15 peers are probe responders in this process
(`rigmon.probes.responder`, as in an agent) behind the simulator's wire (`rigmon.sim.wire`),
which adds a known delay per peer (0, 20 us, 300 us, 2 ms, round robin; every fifth peer is
reached directly, without the relay, to show what the relay itself adds). Over the same
window both agents' CPU is read from /proc, so the difference is what probing costs; then the
probing agent's /v1/latest gives each path's p50/p99, compared with the configured delay.

    python benchmarks/probe_cost.py [--peers 15] [--rate 10] [--seconds 60] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import cpu_seconds, free_port, machine, rigmon_cmd, rigmon_env, stop  # noqa: E402
from rigmon.probes.responder import ProbeResponder  # noqa: E402
from rigmon.probes.wire import derive_key  # noqa: E402
from rigmon.sim.wire import SimWire, WirePath  # noqa: E402

#: Delay the wire adds per peer, round robin; ``None``: no relay, straight to the responder.
DELAYS_US: tuple[float | None, ...] = (None, 0.0, 20.0, 300.0, 2000.0)


def latest(url: str) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(f"{url}/v1/latest", timeout=5) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]
    except OSError:
        return None


def _paths(frame: dict[str, object] | None) -> list[dict[str, object]]:
    assert frame is not None
    readings = frame["readings"]
    assert isinstance(readings, dict)
    return list(readings["peer_paths"])


def write_config(path: Path, node: str, port: int, state: Path, peers: list[dict[str, object]], key_file: Path,
                 window_s: float, rate_hz: float) -> None:
    lines = [f'[agent]\nnode = "{node}"\nlisten = "127.0.0.1:{port}"\nroot = "{path.parent / "root"}"\n'
             f'state_dir = "{state}"\n',
             f'[probes]\nbind = "127.0.0.1"\nport = 0\nkey_file = "{key_file}"\nwindow_s = {window_s}\n'
             f'rate_hz = {rate_hz}\n']
    for peer in peers:
        lines.append(f'[[peers]]\nname = "{peer["name"]}"\n'
                     f'paths = [{{ name = "lan", address = "127.0.0.1", port = {peer["port"]} }}]\n')
    path.write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", type=int, default=15)
    parser.add_argument("--rate", type=float, default=10.0, help="probes per second per peer")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window (after a warm-up of one window)")
    parser.add_argument("--smoke", action="store_true", help="5 peers, 3 s (CI)")
    args = parser.parse_args()
    window_s = 10.0
    if args.smoke:
        args.peers, args.seconds, window_s = 5, 3.0, 2.0
    # The responders and the relay are threads of this process: hand the GIL over often, or a
    # reply waits for it (the agents are separate processes and keep their defaults).
    sys.setswitchinterval(0.0005)

    work = Path(tempfile.mkdtemp(prefix="rigmon-bench-probes-"))
    (work / "root").mkdir()
    key_file = work / "probe.key"
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"benchmark-probe-key\n")
    os.close(fd)
    key = derive_key("benchmark-probe-key")
    names = [f"peer{i + 1:02d}" for i in range(args.peers)]
    delays = {name: DELAYS_US[i % len(DELAYS_US)] for i, name in enumerate(names)}
    # Node 0 is the agent; node i + 1 is peer i.
    wire = SimWire([WirePath(0, i + 1, "lan", d) for i, name in enumerate(names) if (d := delays[name]) is not None],
                   lambda: 0.0)
    responders: list[ProbeResponder] = []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, name in enumerate(names):
            responder = ProbeResponder(name, key, frozenset({"bench"}), 1000.0, 1000)
            responder.bind("127.0.0.1", 0)
            responder.start()
            responders.append(responder)
            assert responder.sock is not None
            wire.set_responder(i + 1, responder.sock.getsockname()[1])
        wire.start()
        peers = [{"name": name, "port": wire.relay_port(0, i + 1, "lan") if delays[name] is not None
                  else responders[i].sock.getsockname()[1]}  # type: ignore[union-attr]
                 for i, name in enumerate(names)]
        urls = []
        for node, node_peers in (("bench", peers), ("idle", [])):
            port = free_port()
            config = work / f"{node}.toml"
            write_config(config, node, port, work / f"state-{node}", node_peers, key_file, window_s, args.rate)
            procs.append(subprocess.Popen(rigmon_cmd("agent", "--config", str(config), "--state-dir",
                                                     str(work / f"state-{node}")),
                                          env=rigmon_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
            urls.append(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 30
        while not all(latest(u) for u in urls):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                errors = [p.stderr.read().decode() for p in procs if p.poll() is not None and p.stderr]
                raise SystemExit(f"agents did not come up: {errors}")
            time.sleep(0.2)
        time.sleep(window_s + 1.0)  # warm-up: a full window, imports done
        cpu0 = [cpu_seconds(p.pid) for p in procs]
        sent0 = sum(int(str(p["sent_total"])) for p in _paths(latest(urls[0])))
        t0 = time.monotonic()
        time.sleep(args.seconds)
        elapsed = time.monotonic() - t0
        cpu = [cpu_seconds(p.pid) - c for p, c in zip(procs, cpu0)]
        frame = latest(urls[0])
        load = os.getloadavg()
    finally:
        for proc in procs:
            stop(proc)
        wire.close()
        for responder in responders:
            responder.close()
        shutil.rmtree(work, ignore_errors=True)
    paths = _paths(frame)
    sent = sum(int(str(p["sent_total"])) for p in paths) - sent0
    extra = cpu[0] - cpu[1]
    print(f"machine: {machine()}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{args.peers} peers x {args.rate:g} Hz, window {window_s:g} s, measured over {elapsed:.1f} s; "
          f"{sent / elapsed:.0f} probes/s sent\n")
    print("| agent | CPU s | CPU % of one core |")
    print("|---|---|---|")
    print(f"| with {args.peers} peers | {cpu[0]:.2f} | {100 * cpu[0] / elapsed:.2f} |")
    print(f"| without peers | {cpu[1]:.2f} | {100 * cpu[1] / elapsed:.2f} |")
    print(f"| probing (difference) | {extra:.2f} | {100 * extra / elapsed:.2f} |")
    print(f"\nprobing: {1e3 * extra / elapsed:.1f} ms CPU per second, {1e6 * extra / max(sent, 1):.0f} us per probe "
          "(send, reply, statistics; CPU ticks are 10 ms, so short runs are coarse)\n")
    print("Per configured delay: the median over its paths of each path's p50 and p99.\n")
    print("| configured delay us | paths | received/sent | p50 us | p50 - delay us | p99 us | p99 - delay us |")
    print("|---|---|---|---|---|---|---|")
    for delay in DELAYS_US:
        group = [p for p in paths if delays[str(p["peer"])] == delay]
        if not group:
            continue
        p50 = [float(str(p["rtt_p50_us"])) for p in group if p["rtt_p50_us"] is not None]
        p99 = [float(str(p["rtt_p99_us"])) for p in group if p["rtt_p99_us"] is not None]
        received = sum(int(str(p["received"])) for p in group)
        total = sum(int(str(p["sent"])) for p in group)
        label = "direct (no relay)" if delay is None else f"{delay:g}"
        if not p50:
            print(f"| {label} | {len(group)} | {received}/{total} | - | - | - | - |")
            continue
        mid50, mid99 = sorted(p50)[len(p50) // 2], sorted(p99)[len(p99) // 2]
        base = delay or 0.0
        print(f"| {label} | {len(group)} | {received}/{total} | {mid50:.0f} | {mid50 - base:+.0f} | "
              f"{mid99:.0f} | {mid99 - base:+.0f} |")
    return 0 if all(p["received"] for p in paths) else 1


if __name__ == "__main__":
    sys.exit(main())
