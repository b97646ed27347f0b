"""The undervolt guard when the rail ADC goes silent while the caps are in force: it holds them, end to end."""

from __future__ import annotations

import asyncio
import time

import httpx

from rigmon.schema import Event, Frame, GuardReading, decode_data
from rigmon.sim.psu import psu_rail_of
from rigmon.sim.rig import running_rig

#: Simulated seconds the run covers: training (and the first sag) starts at 10 s.
SIM_S = 40.0
DEADLINE_S = 90.0
#: Short, so the old guard restored (blind) well within the run.
RESTORE_AFTER_S = 5.0


async def test_a_silent_adc_mid_sag_keeps_the_caps_in_force_and_the_guard_says_so() -> None:
    """Incident 1 with the guard enforcing; the USB ADC's firmware stops right after the guard capped
    the clocks. No trigger can come from a rail nobody reads: the guard used to call that healthy and
    restored full clocks after ``restore_after_s``, into the sag."""
    events: list[Event] = []
    guard: GuardReading | None = None
    extra: dict[str, object] = {"guard": {"restore_after_s": RESTORE_AFTER_S}}
    async with running_rig("undervolt-bus-drop-guarded", 1, seed=1, base_port=0, speed=2.0, interval_s=0.25,
                           extra_config=extra) as rr, httpx.AsyncClient(base_url=rr.urls[0], timeout=10) as client:
        node = rr.rig.nodes[0]
        rail = psu_rail_of(node)
        since, silent_at = 0, None
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end and node.t_s < SIM_S:
            response = await client.get("/v1/samples", params={"since": since})
            response.raise_for_status()
            for raw in response.json()["frames"]:
                frame = decode_data(Frame, raw)
                since = max(since, frame.seq)
                events += [e for e in frame.events if e.kind.startswith("guard_")]
                guard = frame.readings.guard
            if silent_at is None and any(e.kind == "guard_engaged" for e in events):
                rail.hang()  # the ADC's firmware stops: the port stays, nothing comes
                silent_at = node.t_s
            await asyncio.sleep(0.1)
        assert silent_at is not None and node.t_s >= silent_at + 4 * RESTORE_AFTER_S, (silent_at, node.t_s)
        kinds = [e.kind for e in events]
        assert "guard_restored" not in kinds, kinds
        holding = next(e for e in events if e.kind == "guard_holding")
        assert holding.message.startswith("guard holding caps: rail not read since ") and "stay in force" in holding.message
        assert isinstance(holding.data["unread_since"], float)
        assert guard is not None and (guard.state, guard.step, guard.unread) == ("engaged", 1, ("rail",))
        assert guard.unread_since == holding.data["unread_since"]
        assert all(s.app_clock_graphics_mhz == 1005 for s in guard.settings)
