"""End to end: an agent pointed at a storage tree reports every array, member and link, and link changes."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import httpx

from rigmon.agent.agent import Agent
from rigmon.config import AgentConfig, AgentSection
from rigmon.sim.rig import running_rig
from rigmon.sim.tree import Tree

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
INTERVAL_S = 0.2


async def _latest(client: httpx.AsyncClient, ready: tuple[str, ...]) -> dict[str, Any]:
    for _ in range(200):
        r = await client.get("/v1/latest")
        if r.status_code == 200:
            frame: dict[str, Any] = r.json()
            if all(frame["collectors"][n]["state"] == "ok" for n in ready):
                return frame
        await asyncio.sleep(0.05)
    raise AssertionError("agent produced no frame with every storage collector ok")


async def test_agent_reports_tree_and_link_change(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(HOSTS / "raid0-two-arrays-loading", root, symlinks=True)
    agent = Agent(AgentConfig(agent=AgentSection(node="strix", root=str(root), interval_s=INTERVAL_S)))
    app = agent.app()
    agent.start()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://agent") as client:
            frame = await _latest(client, ("disks", "raid", "nvme", "thunderbolt"))
            readings = frame["readings"]
            arrays = {a["name"]: a for a in readings["raid"]}
            assert {n: a["md_name"] for n, a in arrays.items()} == {"md127": "raid0n0", "md126": "raid0n1"}
            assert {n: [m["name"] for m in a["members"]] for n, a in arrays.items()} == {
                "md127": ["nvme0n1", "nvme1n1"], "md126": ["nvme2n1", "nvme3n1"]}
            assert all(a["health"] == "ok" for a in arrays.values())
            assert sorted(n["name"] for n in readings["nvme"]) == ["nvme0", "nvme1", "nvme2", "nvme3"]
            tb = {d["name"]: d for d in readings["thunderbolt"]}
            assert {n: d["link_state"] for n, d in tb.items()} == {
                "0-0": "unknown", "0-0:1.1": "unknown", "0-1": "ok", "1-0": "unknown", "1-1": "ok"}
            assert {d["name"] for d in readings["disks"]} == {"nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1",
                                                              "md127", "md126"}

            seq_before = frame["seq"]
            tree = Tree(root)
            for attr in ("tx_speed", "rx_speed"):
                tree.write(f"/sys/bus/thunderbolt/devices/0-1/{attr}", "10.0 Gb/s\n")

            found: dict[str, Any] | None = None
            for _ in range(200):
                body = (await client.get(f"/v1/samples?since={seq_before}")).json()
                found = next((f for f in body["frames"]
                              if any(e["kind"] == "tb_link_changed" for e in f["events"])), None)
                if found is not None:
                    break
                await asyncio.sleep(0.05)
            assert found is not None, "no tb_link_changed event"
            # One polling interval: the first or (if the write raced a tick) the second frame after it.
            assert found["seq"] <= seq_before + 2
            link = next(d for d in found["readings"]["thunderbolt"] if d["name"] == "0-1")
            assert (link["link_state"], link["tx_gbps"]) == ("degraded", 20.0)
            kinds = [e["kind"] for e in found["events"] if e["subject"] == "link:0-1"]
            # The rule's pending alarm travels with the reading that started it, not a frame later.
            assert kinds == ["tb_link_changed", "tb_link_degraded", "alarm_pending"]
    finally:
        await agent.stop()


async def test_simulated_model_load_over_loopback() -> None:
    async with running_rig("model-load", 1, base_port=0, speed=4.0, interval_s=0.5) as rr:
        async with httpx.AsyncClient(base_url=rr.urls[0], timeout=5.0) as client:
            arrays: dict[str, Any] = {}
            for _ in range(100):
                r = await client.get("/v1/latest")
                if r.status_code == 200:
                    arrays = {a["name"]: a for a in r.json()["readings"]["raid"]}
                    if arrays and all(a["read_bytes_per_s"] for a in arrays.values()):
                        break
                await asyncio.sleep(0.1)
            assert set(arrays) == {"md127", "md126"}
            ratio = arrays["md127"]["read_bytes_per_s"] / arrays["md126"]["read_bytes_per_s"]
            assert 0.93 < ratio < 1.0
