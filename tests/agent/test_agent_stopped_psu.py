"""A stopped agent (SIGSTOP, a paused VM) does not call its rail ADC silent for the time it did not
run: the ADC's lines went on arriving and waited in the pty, so `psu_adc_silent` must not go pending.

Whether a frame is read before the reader has caught up after the stop is up to the threads' order;
tests/collectors/test_psu_stall.py makes that order certain."""

from __future__ import annotations

import threading
from pathlib import Path

from rigmon.collectors.psu_lines import format_rm1
from tests.agent.test_agent_stopped import start_agent, stop_agent, stopped_for_a_while, wait_frames
from tests.collectors.psu_helpers import LINK, PtyDevice

#: Milliseconds between the ADC's windows (it sends one line per window).
WINDOW_MS = 100


def send_lines(device: PtyDevice, stop: threading.Event) -> None:
    """One valid RM1 line per window, healthy rail, until ``stop``."""
    seq = 1
    while not stop.is_set():
        device.lines(format_rm1(f"RM1,seq={seq},up={seq * WINDOW_MS},win={WINDOW_MS},n=90,v=12010/12000/12020"))
        seq += 1
        stop.wait(WINDOW_MS / 1000)


def test_a_stopped_agent_does_not_call_its_adc_silent(tmp_path: Path) -> None:
    device = PtyDevice(tmp_path / "root")
    stop = threading.Event()
    sender = threading.Thread(target=send_lines, args=(device, stop), daemon=True)
    sender.start()
    agent, url = start_agent(tmp_path, f"[psu]\nport = \"{LINK}\"\nstale_after_s = 1.0\n")
    try:
        before = wait_frames(url, 0, 20, agent)
        # Reading the rail before the stop (the first frames may come before the port is open).
        while not any((f["readings"].get("psu_rail") or {}).get("windows")  # type: ignore[attr-defined]
                      for f in before[-5:]):
            before = wait_frames(url, 0, len(before) + 5, agent)
        after = stopped_for_a_while(agent, url, before)
    finally:
        stop_agent(agent)
        stop.set()
        sender.join(5)
        device.close()
    rails = [f["readings"].get("psu_rail") for f in after]  # type: ignore[attr-defined]
    assert all(r is not None and r["stale"] is False for r in rails), [(r or {}).get("stale") for r in rails]
    events = [e for f in before + after for e in f["events"]]  # type: ignore[attr-defined]
    assert [e["kind"] for e in events].count("agent_stalled") == 1, events
    assert not [e for e in events if "psu_adc_silent" in str(e)], events
