"""Incident 5 on the simulator: the USB4 cable between two Strix Halo nodes is unplugged for 2 s and comes back;
a snapshot taken after it names the flap first, from the counters the real collector read: thunderbolt0 goes away
with the cable and comes back a new interface, its counters started again (between two frames, the link is up in
every frame)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from rigmon.sim.rig import running_rig
from rigmon.sim.scenarios.strix_usb4 import UNPLUGGED
from rigmon.snapshot.bundle import read_bundle
from rigmon.snapshot.command import take_snapshot

SPEED = 10
INTERVAL_S = 0.25


async def snapshot_after_the_flap(workdir: Path) -> Path:
    async with running_rig("strix-usb4", 1, base_port=0, speed=SPEED, workdir=workdir, interval_s=INTERVAL_S) as rr:
        start = rr.rig.clock.time()
        # Past the unplug, and a few frames more.
        while rr.rig.clock.time() - start < UNPLUGGED[1] + 10 * SPEED * INTERVAL_S:
            await asyncio.sleep(0.1)
        path, _ = await asyncio.to_thread(take_snapshot, rr.urls, [], 600.0, workdir / "bug.tar.gz", None,
                                          io.StringIO())
    return path


def test_a_flap_between_frames_is_named_before_the_nodes_table(tmp_path: Path) -> None:
    bundle = read_bundle(asyncio.run(snapshot_after_the_flap(tmp_path)))
    head = bundle.report.split("| node |")[0]
    assert "## Link flaps" in head, bundle.report[:3000]
    assert "- **node01** net[thunderbolt0]: went away and came back once (a new interface: its counters started " \
           "again) " in head, head
    # The other interface did not flap.
    assert "enp191s0" not in head
