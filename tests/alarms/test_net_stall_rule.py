"""The default rule net_link_stalled on the simulated Strix Halo pair (incident 7): a thunderbolt-net link
that is up but passes no packet alarms with no [[peers]] configured, and resolves when traffic passes again."""

from __future__ import annotations

from pathlib import Path

from rigmon.alarms.engine import AlarmEngine
from rigmon.sim.scenarios.strix_usb4 import STALLED
from tests.alarms.helpers import T0, FakeClock, default, sim_frames


def test_a_stalled_thunderbolt_net_link_alarms_without_peers(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    engine = AlarmEngine(default("net_link_stalled"), "n1", clock)
    seen: list[tuple[float, str, str]] = []
    messages = []
    for frame in sim_frames("strix-usb4", 1, tmp_path, clock, 170, 1.0):
        for tr in engine.evaluate(frame):
            seen.append((frame.taken_at - T0, tr.change, tr.alarm.subject))
            messages.append(tr.alarm.message)
    # Only thunderbolt0 (the Ethernet NIC beside it is never stalled), within the stall: after
    # net_stall_after_s (5 s) of no packet, and not before the stall began.
    firing = [(t, subject) for t, change, subject in seen if change == "firing"]
    assert [subject for _, subject in firing] == ["link:thunderbolt0"], seen
    assert STALLED[0] + 4.0 <= firing[0][0] < STALLED[1], seen
    # Traffic passes again at the stall's end: resolved after the clear hold (30 s).
    resolved = [t for t, change, _ in seen if change == "resolved"]
    assert resolved and STALLED[1] + 29.0 <= resolved[0] <= STALLED[1] + 32.0, seen
    assert messages[0].startswith("link thunderbolt0 is up but passes no packet: a thunderbolt-net lockup"), messages
