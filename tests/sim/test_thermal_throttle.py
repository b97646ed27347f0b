"""Incident 6's thermally throttling enclosure end to end: the scenario's fake drives heat up under the
model load, the real agent's collectors read their hwmon files, the default rule fires, the array in the
hot enclosure lags the other, the dashboard's incident story says it follows the hot drives, and a
snapshot's REPORT.md names the drive, its array and its figures."""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path

import httpx

from rigmon.cluster.incident import timeline
from rigmon.cluster.node_store import NodeStore
from rigmon.schema import Frame, decode_data
from rigmon.sim.rig import running_rig
from rigmon.snapshot.bundle import read_bundle
from rigmon.snapshot.command import take_snapshot
from rigmon.tui.event_merge import merge_xid_events
from tests.alarms.helpers import FakeClock
from tests.sim.test_scenario_alarms import DEADLINE_S, fired_rules


async def test_a_hot_enclosure_fires_its_alarm_lags_its_array_and_is_in_the_report(tmp_path: Path) -> None:
    async with running_rig("nvme-thermal-throttle", 1, base_port=0, speed=10.0, workdir=tmp_path / "sim",
                           interval_s=0.5) as rig, httpx.AsyncClient(timeout=10) as client:
        deadline = time.monotonic() + DEADLINE_S
        fired: dict[str, set[str]] = {}
        while time.monotonic() < deadline and "nvme_temp_over_warning" not in fired:
            await asyncio.sleep(0.25)
            fired = await fired_rules(rig.urls)
        assert fired == {"nvme_temp_over_warning": {"nvme:nvme0", "nvme:nvme1"}}, fired
        # The throttled drives read a fraction of what md127 asks: it lags md126 (rates of a few frames).
        lag: float | None = None
        while time.monotonic() < deadline:
            frame = (await client.get(f"{rig.urls[0]}/v1/latest")).json()
            arrays = {a["name"]: a for a in frame["readings"]["raid"]}
            lag = arrays["md127"]["vs_fastest_array_pct"]
            if lag is not None and lag < 80.0:
                break
            await asyncio.sleep(0.25)
        assert lag is not None and lag < 80.0, arrays
        assert arrays["md126"]["vs_fastest_array_pct"] == 100.0
        drives = {d["name"]: d for d in frame["readings"]["nvme"]}
        assert drives["nvme0"]["temp_over_max"] is True and drives["nvme0"]["temp_alarm"] is True
        assert drives["nvme0"]["temp_c"] >= drives["nvme0"]["temp_max_c"] == 81.85
        assert drives["nvme0"]["md_arrays"] == ["md127"] and drives["nvme2"]["temp_over_max"] is False
        # The drives were partitioned before mdadm --create: md127 holds their partitions, and the
        # dashboard's story of the node names the hot drives, in md127, as what its lag follows.
        assert [m["name"] for m in arrays["md127"]["members"]] == ["nvme0n1p1", "nvme1n1p1"]
        samples = (await client.get(f"{rig.urls[0]}/v1/samples", params={"since": 0})).json()["frames"]
        store = NodeStore("k", rig.urls[0], FakeClock())
        store.add_frames([decode_data(Frame, raw) for raw in samples])
        assert store.latest is not None
        steps = timeline(merge_xid_events(tuple(store.events)), store.rail.causes(), now=store.view().problems,
                         now_at=store.latest.taken_at)
        assert steps[-1].subject == "md:md127" and " % of md126 now, after NVMe nvme" in steps[-1].text, steps
        assert steps[-1].text.endswith(" reached its warning temperature"), steps
        hot = [s for s in steps if s.kind == "nvme_temp_over_max"]
        assert [s.subject for s in hot] == ["nvme:nvme0", "nvme:nvme1"], steps
        # A drive's step is one line: its figures and its array from the event's data (the critical limit
        # and the model are in the event's message, the report's and the alarm's).
        assert all("≥ warning limit 81.85 °C, in md127" in s.text for s in hot), hot
        path, _ = await asyncio.to_thread(take_snapshot, rig.urls, [], 600.0, tmp_path / "snap.tar.gz", None,
                                          io.StringIO())
    report = read_bundle(path).report
    assert "| nvme_temp_over_warning | warning | firing | nvme:nvme0 |" in report
    assert "NVMe nvme0 (Samsung SSD 990 PRO 2TB) at 8" in report
    assert "at or over its warning limit 81.85 °C (critical 84.85 °C), in md127: it throttles" in report
    # The alarm's message has the figures too (the drive's record's temp_warning_reason).
    assert "| nvme_temp_over_warning | warning | firing | nvme:nvme0 |" in report
    assert "NVMe nvme0 at 8" in report
