"""Benchmark: wall-clock start-up of `rigmon dash` (to its first screen) and `rigmon agent` (to its first frame).

Issue 19 goal 4: the dashboard's first screen under 0.5 s warm, the agent's first frame under
0.2 s. Each run starts a fresh process of this checkout:

- **dash**: ``rigmon dash http://127.0.0.1:PORT`` in a pseudo-terminal of 80x24 (nothing
  listens on PORT: the node shows as connecting, no local agent is started), timed from the
  spawn until the terminal has received the cluster screen's column header (``rail 60s``),
  escape sequences stripped: what the operator sees, not an import.
- **agent**: ``rigmon agent --root EMPTY --state-dir TMP --config /dev/null --listen
  127.0.0.1:PORT``, timed from the spawn until ``GET /v1/latest`` answers 200 (polled every
  5 ms over one kept-open connection).

Runs alternate between the two; the first run of each is a warm-up (byte code compiled, files
in the page cache) and is not counted: the figures are warm. The peer figure, in the same
run, is a bare ``python -c pass`` (the interpreter's own start), so the ratio says how much
of the time is rigmon's. Medians and the spread are printed; the load average at the start
and end says how busy the machine was.

    python benchmarks/startup.py [--runs 9] [--smoke]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from benchmarks.common import free_port, machine, rigmon_cmd, rigmon_env, stop  # noqa: E402

#: Text of the cluster screen's column header: the first screen is on the terminal.
FIRST_SCREEN = b"rail 60s"
ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b[=>]")
TIMEOUT_S = 30.0


def _env(home: Path) -> dict[str, str]:
    """This checkout's rigmon with a throwaway home: no user config, no real state.

    Byte code is written (under the throwaway home) even where the caller's environment sets
    ``PYTHONDONTWRITEBYTECODE``: without it every run compiled rigmon from source (~0.1 s more),
    and "warm" did not mean what it says. An installed rigmon has its byte code.
    """
    env = {**rigmon_env(), "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"),
           "XDG_STATE_HOME": str(home / "state"), "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24",
           "PYTHONPYCACHEPREFIX": str(home / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def dash_first_screen_s(home: Path) -> float:
    """Seconds from spawning `rigmon dash` in an 80x24 pty to its first screen on the terminal."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    port = free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen(rigmon_cmd("dash", f"http://127.0.0.1:{port}"), stdin=slave, stdout=slave,
                            stderr=slave, env=_env(home), start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        while time.perf_counter() - t0 < TIMEOUT_S:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            elapsed = time.perf_counter() - t0
            seen += chunk
            if FIRST_SCREEN in ESCAPES.sub(b"", seen):
                return elapsed
        raise RuntimeError(f"rigmon dash showed no first screen in {TIMEOUT_S:.0f} s: "
                           f"{ESCAPES.sub(b'', seen)[-400:]!r}")
    finally:
        stop(proc)
        os.close(master)


def agent_first_frame_s(home: Path) -> float:
    """Seconds from spawning `rigmon agent` on an empty root to its first frame on /v1/latest."""
    port = free_port()
    root = home / "root"
    root.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="state-", dir=home) as state:
        t0 = time.perf_counter()
        proc = subprocess.Popen(rigmon_cmd("agent", "--root", str(root), "--state-dir", state, "--config",
                                           "/dev/null", "--listen", f"127.0.0.1:{port}"),
                                env=_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=1.0) as client:
                while time.perf_counter() - t0 < TIMEOUT_S:
                    if proc.poll() is not None:
                        raise RuntimeError(f"rigmon agent exited {proc.returncode}: "
                                           f"{proc.stderr.read().decode(errors='replace')[-400:] if proc.stderr else ''}")
                    try:
                        if client.get("/v1/latest").status_code == 200:
                            return time.perf_counter() - t0
                    except httpx.TransportError:
                        pass
                    time.sleep(0.005)
            raise RuntimeError(f"rigmon agent served no frame in {TIMEOUT_S:.0f} s")
        finally:
            stop(proc)


def interpreter_s(home: Path) -> float:
    """Seconds for a bare interpreter to start and exit (the floor under both)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=_env(home))
    return time.perf_counter() - t0


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9, help="counted runs of each (after one warm-up)")
    parser.add_argument("--smoke", action="store_true", help="one counted run each, no timing claims")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    figures: dict[str, list[float]] = {"dash": [], "agent": [], "python": []}
    load_start = loadavg()
    with tempfile.TemporaryDirectory(prefix="rigmon-startup-") as tmp:
        home = Path(tmp)
        dash_first_screen_s(home)  # warm-up: byte code, page cache
        agent_first_frame_s(home)
        interpreter_s(home)
        for _ in range(runs):
            figures["dash"].append(dash_first_screen_s(home))
            figures["agent"].append(agent_first_frame_s(home))
            figures["python"].append(interpreter_s(home))
    print(f"start-up, warm, {runs} counted runs each after one warm-up, alternating; {machine()}; "
          f"load average {load_start} at the start, {loadavg()} at the end")
    print()
    print("| start | median s | min s | max s | goal | median / bare interpreter |")
    print("|---|---:|---:|---:|---|---:|")
    floor = statistics.median(figures["python"])
    goals = {"dash": 0.5, "agent": 0.2}
    names = {"dash": "`rigmon dash` to its first screen (80x24 pty)", "agent": "`rigmon agent` to its first frame",
             "python": "bare interpreter (`python -c pass`)"}
    for key in ("dash", "agent", "python"):
        values = figures[key]
        median = statistics.median(values)
        goal = goals.get(key)
        verdict = "-" if goal is None else f"< {goal} s: {'met' if median < goal else 'missed'}"
        print(f"| {names[key]} | {median:.3f} | {min(values):.3f} | {max(values):.3f} | {verdict} | "
              f"{median / floor:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
