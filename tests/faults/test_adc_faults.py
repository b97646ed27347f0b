"""Fault matrix, serial ADC on a real pty: unplugged and replugged 100 times, and a line that
sends random bytes. The reader never dies or leaks descriptors, every unplug is reported and
recovered from, and no byte of noise becomes a reading."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

from rigmon.clock import SystemClock
from rigmon.collectors.base import EventDraft
from rigmon.collectors.psu import PsuCollector
from rigmon.collectors.psu_lines import format_rm1
from rigmon.config import PsuSection
from rigmon.hw.root import HostRoot
from rigmon.schema import PsuRailReading
from tests.collectors.psu_helpers import LINK, PtyDevice, Pushed, wait_for
from tests.faults.harness import agent_config, only, running_agent

CYCLES = 100


def rm1(seq: int, v_mv: int = 12010) -> str:
    return format_rm1(f"RM1,seq={seq},up={(seq + 1) * 1000},win=1000,n=900,v={v_mv}/{v_mv - 9}/{v_mv + 10},"
                      "i=30000/29000/31000,vpsu=12040/12030/12050")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_unplugged_and_replugged_100_times(tmp_path: Path) -> None:
    device = PtyDevice(tmp_path)
    config = PsuSection(port=LINK, reopen_min_s=0.005, reopen_max_s=0.02, query_identity=False)
    collector = PsuCollector(config, HostRoot(tmp_path), SystemClock())
    pushed = Pushed()
    collector.start(pushed)
    seq = 0
    try:
        wait_for(lambda: collector.state.connected)
        fds_before = open_fds()
        for cycle in range(CYCLES):
            # A line with a fresh seq after each replug: the ADC is back and reading.
            windows = collector.state.counters.windows_total
            device.lines("tail", rm1(seq))
            seq += 1
            wait_for(lambda: collector.state.counters.windows_total > windows)
            device.unplug()
            wait_for(lambda: not collector.state.connected)
            device.replug()
            wait_for(lambda: collector.state.connected and collector.state.counters.opens_total == cycle + 2)
        wait_for(lambda: open_fds() <= fds_before)
        counters = collector.state.counters
        assert counters.opens_total == CYCLES + 1 and counters.disconnects_total == CYCLES
        assert counters.windows_total == CYCLES
        disconnected = [r for r in pushed.records if isinstance(r, EventDraft) and r.kind == "psu_adc_disconnected"]
        reconnected = [r for r in pushed.records if isinstance(r, EventDraft) and r.kind == "psu_adc_reconnected"]
        assert len(disconnected) == CYCLES and len(reconnected) == CYCLES
        # Still reading after all that.
        device.lines("tail", rm1(seq, 11990))
        wait_for(lambda: collector.state.counters.windows_total == CYCLES + 1)
        reading = collector.collect()[0]
        assert isinstance(reading, PsuRailReading) and reading.volts is not None
        assert reading.volts.min_volts == 11.981
    finally:
        collector.close()
        device.close()
    assert threading.active_count() < 50


async def test_random_bytes_never_become_readings(tmp_path: Path) -> None:
    device = PtyDevice(tmp_path)
    rng = random.Random(11)
    good_mv = [12010, 11800, 11650, 11990]
    config = agent_config(tmp_path, {"collectors": only("psu"),
                                     "psu": {"port": LINK, "reopen_min_s": 0.01, "reopen_max_s": 0.05}})
    stop = threading.Event()

    def noise() -> None:
        seq = 0
        while not stop.is_set():
            device.write(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 600))))
            if rng.random() < 0.3:
                # A good line, framed by line ends so the noise cannot glue onto it.
                device.write(f"\r\n{rm1(seq, rng.choice(good_mv))}\r\n")
                seq += 1
            time.sleep(0.002)

    try:
        async with running_agent(config) as h:
            writer = threading.Thread(target=noise, daemon=True)
            writer.start()
            try:
                last = await h.wait_for(lambda f: f.readings.psu_rail is not None
                                        and f.readings.psu_rail.counters.windows_total >= 30, "30 good windows")
            finally:
                stop.set()
                writer.join(2)
            allowed = {round((mv - 9) / 1000, 3) for mv in good_mv}
            for frame in h.frames:
                rail = frame.readings.psu_rail
                if rail is not None and rail.volts is not None:
                    assert rail.volts.min_volts in allowed, rail
            assert all(f.collectors["psu"].state in ("ok", "pending") for f in h.frames)
            counters = last.readings.psu_rail.counters  # type: ignore[union-attr]
            assert (counters.malformed_lines_total + counters.long_lines_total + counters.checksum_errors_total
                    + counters.ignored_lines_total) > 0
            await h.api_alive()
    finally:
        device.close()
