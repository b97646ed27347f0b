"""Benchmark: sustained RM1 ingest over a pty into a real agent process.

Starts ``python -m rigmon agent`` with ``[psu]`` pointing at a pseudo-terminal, writes RM1
windows at a fixed rate (1000 lines/s by default) for a while, and reports the agent's CPU
cost (process user+system time over the window, from /proc/PID/stat) and whether every valid
line arrived (the agent's windows_total and lost_windows_total counters).

    python benchmarks/adc_ingest.py [--rate 1000] [--seconds 20] [--smoke]
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
import tty
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import cpu_seconds, free_port, peak_rss_mb  # noqa: E402
from rigmon.collectors.psu_lines import format_rm1  # noqa: E402


def latest(url: str) -> dict[str, object]:
    with urllib.request.urlopen(f"{url}/v1/latest", timeout=5) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def rail_counters(url: str) -> dict[str, int] | None:
    try:
        rail = latest(url)["readings"]["psu_rail"]  # type: ignore[index]
    except OSError:
        return None
    return None if rail is None else rail["counters"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="RM1 lines per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the measured window")
    parser.add_argument("--smoke", action="store_true", help="1 s at the same rate (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.seconds = 1.0

    work = Path(tempfile.mkdtemp(prefix="rigmon-bench-"))
    master, slave = os.openpty()
    tty.setraw(slave)
    link = work / "usb-rigmon_rm1-if00"
    os.symlink(os.ttyname(slave), link)
    port = free_port()
    config = work / "agent.toml"
    config.write_text(f'[agent]\nnode = "bench"\nlisten = "127.0.0.1:{port}"\nstate_dir = "{work / "state"}"\n\n'
                      f'[psu]\nport = "{link}"\nprotocol = "rm1"\nbaud = 115200\n')
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    # --state-dir on the command line wins over a RIGMON_AGENT_STATE_DIR in the environment.
    agent = subprocess.Popen([sys.executable, "-m", "rigmon", "agent", "--config", str(config),
                              "--state-dir", str(work / "state")], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        # Wait until the agent has the port open and has passed the partial first line
        # (the reader drops it by design), so every measured line counts.
        while not ((c := rail_counters(url)) and c["partial_lines_total"] + c["ignored_lines_total"] >= 2):
            if time.monotonic() > deadline or agent.poll() is not None:
                raise SystemExit(f"agent did not come up: {agent.stderr.read().decode() if agent.stderr else ''}")
            os.write(master, b"sync\r\n")
            time.sleep(0.2)
        before = rail_counters(url)
        assert before is not None
        seq, sent = 0, 0
        period = 1.0 / args.rate
        cpu0, t0 = cpu_seconds(agent.pid), time.monotonic()
        next_at = t0
        while time.monotonic() - t0 < args.seconds:
            now = time.monotonic()
            due = int((now - t0) / period) + 1 - sent
            chunk = []
            for _ in range(max(due, 0)):
                low = 11384 if seq % 5000 == 4999 else 11980
                chunk.append(format_rm1(f"RM1,seq={seq},up={seq + 1},win=1,n=1,v=12010/{low}/12040,"
                                        f"i=95000/94000/96000,vpsu=12180/12170/12190") + "\r\n")
                seq += 1
            if chunk:
                data = "".join(chunk).encode()
                while data:
                    data = data[os.write(master, data):]
                sent += len(chunk)
            next_at += 0.005
            time.sleep(max(0.0, next_at - time.monotonic()))
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds(agent.pid) - cpu0
        rss_mb = peak_rss_mb(agent.pid)
        time.sleep(2.0)
        after = rail_counters(url)
        assert after is not None
    finally:
        agent.terminate()
        agent.wait(10)
        os.close(master)
        os.close(slave)
        shutil.rmtree(work, ignore_errors=True)
    received = after["windows_total"] - before["windows_total"]
    dropped = sent - received
    print(f"rate: {sent / elapsed:.0f} lines/s for {elapsed:.1f} s ({sent} lines)")
    print(f"agent CPU: {cpu:.2f} s over {elapsed:.1f} s = {100 * cpu / elapsed:.1f}% of one core "
          f"({1e6 * cpu / max(sent, 1):.0f} us per line, sampler and HTTP included); peak RSS {rss_mb:.1f} MiB")
    print(f"valid lines received: {received}, dropped: {dropped}, "
          f"lost (seq gaps): {after['lost_windows_total'] - before['lost_windows_total']}, "
          f"rejected: {after['checksum_errors_total'] + after['malformed_lines_total'] - before['checksum_errors_total'] - before['malformed_lines_total']}")
    return 0 if dropped == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
