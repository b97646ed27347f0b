"""An agent that was stopped (SIGSTOP, a paused VM) blames no collector for the time it did not
run: the calls in flight did not hang, the whole process stood still. It says so once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from rigmon.sim.tree import write_tree
from tests.ports import free_port as free_port

REPO = Path(__file__).resolve().parents[2]
#: How long the agent stays stopped: well past its collectors' timeout and several ticks.
STOPPED_S = 4.0



def frames_since(url: str, since: int) -> list[dict[str, object]]:
    body = httpx.get(f"{url}/v1/samples", params={"since": since}, timeout=5).json()
    frames: list[dict[str, object]] = body["frames"]
    return frames


def wait_frames(url: str, since: int, count: int, agent: subprocess.Popen[bytes]) -> list[dict[str, object]]:
    """The frames after ``since`` once there are at least ``count`` of them."""
    end = time.monotonic() + 30
    while True:
        assert agent.poll() is None, "the agent exited"
        try:
            frames = frames_since(url, since)
        except httpx.TransportError:
            frames = []
        if len(frames) >= count:
            return frames
        assert time.monotonic() < end, f"{len(frames)} frames after seq {since}"
        time.sleep(0.05)


def start_agent(tmp_path: Path, extra_config: str = "") -> tuple[subprocess.Popen[bytes], str]:
    """A real agent process on a minimal tree (``tmp_path/root``) sampling every 0.1 s, logging to
    ``tmp_path/agent.log``; returns it and its URL."""
    write_tree(tmp_path / "root", {"/proc/stat": "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n",
                                   "/proc/uptime": "100.0 50.0\n", "/proc/loadavg": "0.1 0.2 0.3 1/100 42\n"})
    (tmp_path / "agent.toml").write_text("[agent]\ninterval_s = 0.1\ncollector_timeout_s = 1.5\n" + extra_config)
    port = free_port()
    with (tmp_path / "agent.log").open("wb") as err:
        agent = subprocess.Popen(
            [sys.executable, "-m", "rigmon", "agent", "--config", str(tmp_path / "agent.toml"), "--root",
             str(tmp_path / "root"), "--state-dir", str(tmp_path / "state"), "--listen", f"127.0.0.1:{port}",
             "--node", "n1"],
            stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "PYTHONPATH": str(REPO)})
    return agent, f"http://127.0.0.1:{port}"


def stopped_for_a_while(agent: subprocess.Popen[bytes], url: str,
                        before: list[dict[str, object]]) -> list[dict[str, object]]:
    """Stop ``agent`` for `STOPPED_S` (SIGSTOP, SIGCONT) after the frames ``before``; the 30 frames after them."""
    agent.send_signal(signal.SIGSTOP)
    time.sleep(STOPPED_S)
    agent.send_signal(signal.SIGCONT)
    return wait_frames(url, int(before[-1]["seq"]), 30, agent)  # type: ignore[call-overload]


def stop_agent(agent: subprocess.Popen[bytes]) -> None:
    agent.send_signal(signal.SIGCONT)
    agent.terminate()
    agent.wait(10)


def test_a_stopped_agent_blames_no_collector(tmp_path: Path) -> None:
    agent, url = start_agent(tmp_path)
    log = tmp_path / "agent.log"
    try:
        before = wait_frames(url, 0, 20, agent)
        after = stopped_for_a_while(agent, url, before)
    finally:
        stop_agent(agent)
    frames = before + after
    states = {name: status["state"] for f in frames
              for name, status in f["collectors"].items()}  # type: ignore[attr-defined]
    events = [e for f in frames for e in f["events"]]  # type: ignore[attr-defined]
    kinds = [e["kind"] for e in events]
    assert "hung" not in {s for f in frames for s in
                          (st["state"] for st in f["collectors"].values())}, states  # type: ignore[attr-defined]
    assert "collector_failed" not in kinds and "collector_recovered" not in kinds, events
    stalled = [e for e in events if e["kind"] == "agent_stalled"]
    assert len(stalled) == 1, events
    assert stalled[0]["data"]["stalled_s"] > 0 and stalled[0]["message"].startswith("agent was not running for ")
    text = log.read_text()
    assert text.count("agent was not running for ") == 1, text
    assert "hung" not in text, text
