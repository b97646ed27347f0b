"""The default rule net_link_down on the simulated 10 GbE pair (`net-link-flap`, incident 7): node01's data port
loses its carrier and alarms at once, resolves after the clear hold, and its flap faster than a read is an
event; the other node, and node01's management NIC, never alarm."""

from __future__ import annotations

from pathlib import Path

from rigmon.alarms.engine import AlarmEngine
from rigmon.collectors.base import EventDraft
from rigmon.sim.scenarios.net_link_flap import DOWN
from tests.alarms.helpers import T0, FakeClock, default, sim_frames


def test_a_data_link_that_loses_its_carrier_alarms(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    engines = {}
    seen: list[tuple[str, float, str, str]] = []
    messages = []
    drafts: list[EventDraft] = []
    for frame in sim_frames("net-link-flap", 2, tmp_path, clock, 70, 1.0, drafts):
        engine = engines.setdefault(frame.node, AlarmEngine(default("net_link_down"), frame.node, clock))
        for tr in engine.evaluate(frame):
            seen.append((frame.node, frame.taken_at - T0, tr.change, tr.alarm.subject))
            messages.append(tr.alarm.message)
    firing = [(node, t, subject) for node, t, change, subject in seen if change == "firing"]
    assert [(node, subject) for node, _, subject in firing] == [("node01", "link:enp2s0")], seen
    assert DOWN[0] <= firing[0][1] <= DOWN[0] + 1.0, seen
    assert messages[0] == "link enp2s0 lost its carrier: check the cable, the switch port and the peer node"
    resolved = [t for _, t, change, _ in seen if change == "resolved"]
    assert resolved and DOWN[1] + 29.0 <= resolved[0] <= DOWN[1] + 32.0, seen
    links = [(d.kind, d.subject) for d in drafts if d.kind.startswith("net_link")]
    assert links == [("net_link_down", "link:enp2s0"), ("net_link_up", "link:enp2s0"),
                     ("net_link_flapped", "link:enp2s0")], links
    flapped = next(d for d in drafts if d.kind == "net_link_flapped")
    assert flapped.message == "link enp2s0 lost its carrier and got it back between two reads"
