"""End to end: rail ADC lines on a real pty reach a real agent's HTTP API on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.check_rail import rail_from_agent
from rigmon.agent.server import make_server
from rigmon.collectors.psu_lines import format_rm1
from rigmon.config import AgentConfig, AgentSection, PsuSection
from rigmon.sim.rig import running_rig
from tests.agent.helpers import listening_port
from tests.collectors.psu_helpers import LINK, PtyDevice

SAG = ("$RM1,seq=1841,up=1843520,win=1000,n=892,v=11712/11384/11790,i=98250/96100/131400,"
       "vpsu=11902/11655/11960,flags=4*09")


async def poll(client: httpx.AsyncClient, url: str, check: object, timeout_s: float = 15.0) -> dict[str, object]:
    """GET ``url`` until ``check(json)`` is true."""
    assert callable(check)
    for _ in range(int(timeout_s / 0.05)):
        response = await client.get(url)
        if response.status_code == 200:
            data = response.json()
            if check(data):
                return data  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)
    raise AssertionError(f"{url}: condition not met")


@pytest.fixture
async def agent_url(tmp_path: Path) -> AsyncIterator[tuple[str, PtyDevice]]:
    device = PtyDevice(tmp_path)
    config = AgentConfig(
        agent=AgentSection(node="rail", listen="127.0.0.1:0", root=str(tmp_path), interval_s=0.5,
                           state_dir=str(tmp_path / "state")),
        psu=PsuSection(port=LINK, reopen_min_s=0.05, reopen_max_s=0.2),
    )
    agent = Agent(config)
    server = make_server(agent, "127.0.0.1", 0)
    agent.start()
    task = asyncio.create_task(server.serve())
    port = await listening_port(server)
    try:
        yield f"http://127.0.0.1:{port}", device
    finally:
        server.should_exit = True
        await agent.stop()
        await asyncio.wait_for(task, 5)
        device.close()


async def test_sag_minimum_reaches_the_api_exactly(agent_url: tuple[str, PtyDevice]) -> None:
    url, device = agent_url
    async with httpx.AsyncClient() as client:
        await poll(client, f"{url}/v1/latest", lambda d: d["collectors"]["psu"]["state"] == "ok")
        device.lines("partial", format_rm1("RM1,seq=1840,up=1842520,win=1000,n=890,v=11800/11790/11810"), SAG)
        frame = await poll(client, f"{url}/v1/latest",
                           lambda d: (d["readings"]["psu_rail"] or {}).get("sag"))
    rail = frame["readings"]["psu_rail"]  # type: ignore[index]
    assert rail["volts"]["min_volts"] == 11.384
    assert rail["channels_volts"]["vpsu"]["min_volts"] == 11.655
    assert rail["under_voltage_latched"] is True
    assert isinstance(frame["readings"]["path_resistance"], list)  # type: ignore[index]


async def test_default_rail_rules_fire_on_a_sag_line(agent_url: tuple[str, PtyDevice]) -> None:
    url, device = agent_url
    async with httpx.AsyncClient() as client:
        await poll(client, f"{url}/v1/latest", lambda d: d["collectors"]["psu"]["state"] == "ok")
        device.lines("partial", SAG)
        alarms = await poll(client, f"{url}/v1/alarms", lambda d: len(d["active"]) >= 2)
    fired = {a["rule"]: a for a in alarms["active"]}  # type: ignore[union-attr]
    assert fired["psu_rail_low_critical"]["value"] == 11.384
    assert "psu_rail_low_warning" in fired


async def test_an_under_voltage_latched_by_the_adc_between_its_samples_is_critical(
        agent_url: tuple[str, PtyDevice]) -> None:
    """Flag 4: the sensor's hardware comparator caught a sag the firmware's samples missed (their
    minimum stays at 11.65 V). It raised nothing."""
    url, device = agent_url
    latched = format_rm1("RM1,seq=1841,up=1843520,win=1000,n=892,v=11800/11650/11900,flags=4")
    async with httpx.AsyncClient() as client:
        await poll(client, f"{url}/v1/latest", lambda d: d["collectors"]["psu"]["state"] == "ok")
        device.lines("partial", latched)
        alarms = await poll(client, f"{url}/v1/alarms",
                            lambda d: any(a["rule"] == "psu_rail_undervoltage_latched" for a in d["active"]))
    fired = {a["rule"]: a for a in alarms["active"]}  # type: ignore[union-attr]
    assert fired["psu_rail_undervoltage_latched"]["severity"] == "critical"
    assert "psu_rail_low_critical" not in fired


async def test_sag_minimum_survives_the_journal_exactly(agent_url: tuple[str, PtyDevice]) -> None:
    """The flight recorder keeps the window minimum itself, in raw frames and in every tier."""
    url, device = agent_url
    series = "psu_rail.volts.min_volts"
    async with httpx.AsyncClient() as client:
        await poll(client, f"{url}/v1/latest", lambda d: d["collectors"]["psu"]["state"] == "ok")
        device.lines("partial", SAG)
        frame = await poll(client, f"{url}/v1/latest", lambda d: (d["readings"]["psu_rail"] or {}).get("sag"))
        now = float(frame["taken_at"])  # type: ignore[arg-type]

        def has_sag(d: dict[str, object]) -> bool:
            points = d["series"].get(series)  # type: ignore[attr-defined]
            return bool(points) and 11.384 in points["min"]

        raw = await poll(client, f"{url}/v1/history?from={now - 60}&to={now + 60}&series={series}", has_sag)
        wide = await poll(client, f"{url}/v1/history?from={now - 7 * 86400}&to={now + 60}&series={series}", has_sag)
    assert raw["tier"] == "frames" and min(raw["series"][series]["min"]) == 11.384  # type: ignore[index]
    assert wide["tier"] != "frames" and min(wide["series"][series]["min"]) == 11.384  # type: ignore[index]


def series(text: str, name: str) -> list[str]:
    """The sample lines of ``name`` in an exposition (its ``_total`` too for a counter)."""
    return [line for line in text.splitlines() if line.startswith((f"{name}{{", f"{name} "))]


async def test_an_unplugged_adc_is_exported_as_not_connected_with_its_counters(
        agent_url: tuple[str, PtyDevice]) -> None:
    """The port gone, the rail left the frame and /metrics: ``rigmon_psu_rail_connected`` was never 0, only
    absent, and the ADC's counters broke off until the replug. The collector still fails meanwhile."""
    url, device = agent_url
    rail_labels = f'{{node="rail",port="{LINK}"}}'
    async with httpx.AsyncClient() as client:
        await poll(client, f"{url}/v1/latest", lambda d: d["collectors"]["psu"]["state"] == "ok")
        device.lines("partial", format_rm1("RM1,seq=7,up=8000,win=1000,n=900,v=12010/12001/12020"))
        await poll(client, f"{url}/v1/latest",
                   lambda d: (d["readings"]["psu_rail"] or {}).get("counters", {}).get("windows_total") == 1)
        device.unplug()
        frame = await poll(client, f"{url}/v1/latest",
                           lambda d: d["collectors"]["psu"]["state"] == "error"
                           and d["readings"]["psu_rail"] is not None and d["readings"]["psu_rail"]["stale"])
        gone = (await client.get(f"{url}/metrics")).text
        device.replug()
        await poll(client, f"{url}/v1/latest", lambda d: d["collectors"]["psu"]["state"] == "ok")
        back = (await client.get(f"{url}/metrics")).text
    rail = frame["readings"]["psu_rail"]  # type: ignore[index]
    assert rail["connected"] is False and rail["volts"] is None
    assert rail["counters"]["disconnects_total"] == 1 and rail["counters"]["windows_total"] == 1
    assert "psu.port" in frame["collectors"]["psu"]["error"]  # type: ignore[index]
    assert series(gone, "rigmon_psu_rail_connected") == [f"rigmon_psu_rail_connected{rail_labels} 0.0"]
    assert series(gone, "rigmon_psu_rail_stale") == [f"rigmon_psu_rail_stale{rail_labels} 1.0"]
    assert series(gone, "rigmon_psu_rail_disconnects_total") == [f"rigmon_psu_rail_disconnects_total{rail_labels} 1.0"]
    assert series(gone, "rigmon_psu_rail_opens_total") == [f"rigmon_psu_rail_opens_total{rail_labels} 1.0"]
    assert 'rigmon_collector_state{collector="psu",node="rail",state="error"} 1.0' in gone
    assert series(back, "rigmon_psu_rail_connected") == [f"rigmon_psu_rail_connected{rail_labels} 1.0"]
    assert series(back, "rigmon_psu_rail_opens_total") == [f"rigmon_psu_rail_opens_total{rail_labels} 2.0"]


async def test_rigmon_check_asking_an_agent_whose_adc_is_unplugged_gets_no_rail(
        agent_url: tuple[str, PtyDevice], tmp_path: Path) -> None:
    """The agent's reading of a gone port (``connected`` false) is no rail for ``rigmon check`` to pass:
    it says why, and the check's psu collector fails as when the agent had no reading at all."""
    url, device = agent_url
    config = AgentConfig(agent=AgentSection(node="rail", root=str(tmp_path), listen=url.removeprefix("http://"),
                                            state_dir=str(tmp_path / "no-agent")))
    async with httpx.AsyncClient() as client:
        await poll(client, f"{url}/v1/latest", lambda d: d["collectors"]["psu"]["state"] == "ok")
        device.unplug()
        await poll(client, f"{url}/v1/latest", lambda d: (d["readings"]["psu_rail"] or {}).get("connected") is False)
    said = await asyncio.to_thread(rail_from_agent, config)
    assert isinstance(said, str) and "has no rail reading (error: psu.port" in said, said


async def test_adc_garbage_scenario_gives_no_false_readings() -> None:
    async with running_rig("adc-garbage", 1, base_port=0, speed=5.0, interval_s=0.5) as rr, httpx.AsyncClient() as client:
        url = rr.urls[0]
        await poll(client, f"{url}/v1/latest",
                   lambda d: (d["readings"]["psu_rail"] or {}).get("counters", {}).get("windows_total", 0) >= 15)
        samples = (await client.get(f"{url}/v1/samples?since=0")).json()
    frames = samples["frames"] if isinstance(samples, dict) else samples
    rails = [f["readings"]["psu_rail"] for f in frames if f["readings"]["psu_rail"]]
    assert rails
    for rail in rails:
        if rail["volts"] is not None:
            assert rail["volts"]["min_volts"] > 11.5
    last = rails[-1]["counters"]
    assert last["checksum_errors_total"] + last["malformed_lines_total"] + last["long_lines_total"] \
        + last["ignored_lines_total"] > 0
    assert all(f["collectors"]["psu"]["state"] == "ok" for f in frames[2:])


async def test_adc_unplug_scenario_fails_recovers_and_notes_the_reboot() -> None:
    async with running_rig("adc-unplug", 1, base_port=0, speed=10.0, interval_s=0.25) as rr, \
            httpx.AsyncClient() as client:
        url = rr.urls[0]
        # Every frame (its events are in that frame only), not the newest one now and then: on a
        # loaded machine a poll of /v1/latest missed the frame that carried the reboot.
        frames: list[dict[str, object]] = []
        deadline = asyncio.get_running_loop().time() + 60.0
        while asyncio.get_running_loop().time() < deadline:
            since = frames[-1]["seq"] if frames else 0
            page = (await client.get(f"{url}/v1/samples?since={since}")).json()
            frames += page["frames"]
            kinds = {e["kind"] for f in frames for e in f["events"]}  # type: ignore[attr-defined]
            if {"psu_adc_rebooted", "collector_recovered"} <= kinds:
                break
            await asyncio.sleep(0.1)
    kinds = [e["kind"] for f in frames for e in f["events"]]
    assert "psu_adc_disconnected" in kinds and "psu_adc_reconnected" in kinds
    assert "collector_failed" in kinds and "collector_recovered" in kinds
    states = [f["collectors"]["psu"]["state"] for f in frames]
    assert "error" in states and "ok" in states[states.index("error"):]
    for f in frames:
        rail = f["readings"]["psu_rail"]
        if rail and rail["volts"]:
            assert rail["volts"]["min_volts"] > 11.5
