"""Two agents on one state directory (issue 15, item 6): the second refuses to start, naming the
first's pid, and the first's journal shows no made-up ``unclean_shutdown``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from rigmon.sim.tree import write_tree
from tests.ports import free_port as free_port

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0



def start_agent(tmp_path: Path, state: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path / "root"), "--node", "locked",
         "--state-dir", str(state), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})


def wait_serving(port: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/latest", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("the agent did not serve")


def event_kinds(port: int) -> list[str]:
    page = httpx.get(f"http://127.0.0.1:{port}/v1/samples", params={"since": "0"}, timeout=5).json()
    history = httpx.get(f"http://127.0.0.1:{port}/v1/history", params={"from": "0"}, timeout=5).json()
    return [e["kind"] for f in page["frames"] for e in f["events"]] + [e["kind"] for e in history["events"]]


def test_a_second_agent_on_the_same_state_dir_refuses_to_start(tmp_path: Path) -> None:
    write_tree(tmp_path / "root", {"/proc/stat": "cpu  1 2 3 4 5 6 7 8 0 0\n"})
    state = tmp_path / "state"
    first_port, second_port = free_port(), free_port()
    first = start_agent(tmp_path, state, first_port)
    try:
        wait_serving(first_port)
        second = start_agent(tmp_path, state, second_port)
        try:
            out, err = second.communicate(timeout=WAIT_S)
        finally:
            if second.poll() is None:
                second.kill()
                second.wait()
        assert second.returncode not in (0, None)
        assert f"pid {first.pid}" in err and str(state) in err, err
        assert "journal in" not in out  # it never claimed to serve
        # The first keeps running, and nobody claimed it had crashed.
        wait_serving(first_port)
        assert "unclean_shutdown" not in event_kinds(first_port)
    finally:
        first.terminate()
        first.wait(WAIT_S)
    assert first.returncode == 0
    # Once the first has stopped, the directory is free again; its clean stop is not reported as a crash.
    third = start_agent(tmp_path, state, second_port)
    try:
        wait_serving(second_port)
        assert "unclean_shutdown" not in event_kinds(second_port)
    finally:
        third.terminate()
        third.wait(WAIT_S)
    assert third.returncode == 0
