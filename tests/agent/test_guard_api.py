"""``/v1/guard``: state with the read token, hold/release only with the control token."""

from __future__ import annotations

from pathlib import Path

import httpx

from rigmon.agent.agent import Agent
from rigmon.config import AgentConfig, AgentSection, GuardSection


def _agent(tmp_path: Path, guard: bool) -> Agent:
    config = AgentConfig(agent=AgentSection(node="t", root=str(tmp_path)), guard=GuardSection(enabled=guard))
    return Agent(config, token="read", control_token="ctl", collectors={})


async def test_guard_routes(tmp_path: Path) -> None:
    agent = _agent(tmp_path, True)
    transport = httpx.ASGITransport(app=agent.app())
    read, ctl = {"Authorization": "Bearer read"}, {"Authorization": "Bearer ctl"}
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        assert (await client.get("/v1/guard")).status_code == 401
        r = await client.get("/v1/guard", headers=read)
        assert r.status_code == 200 and r.json()["state"] == "armed" and r.json()["mode"] == "dry-run"
        r = await client.post("/v1/guard", headers=read, json={"action": "hold"})
        assert r.status_code == 403 and "control token" in r.json()["error"]
        assert (await client.post("/v1/guard", json={"action": "hold"})).status_code == 401
        r = await client.post("/v1/guard", headers=ctl, json={"action": "explode"})
        assert r.status_code == 400
        # by is shown on every dashboard: a terminal escape in it is refused, as in an acknowledgement.
        r = await client.post("/v1/guard", headers=ctl, json={"action": "hold", "by": "x\x1b]0;pwned\x07"})
        assert r.status_code == 400 and "U+001B" in r.json()["error"]
        assert (await client.get("/v1/guard", headers=read)).json()["state"] == "armed"
        r = await client.post("/v1/guard", headers=ctl, json={"action": "release", "by": "alice"})
        assert r.status_code == 200 and r.json()["state"] == "released"
    assert agent.guard is not None
    agent.guard.close()


async def test_guard_routes_when_disabled(tmp_path: Path) -> None:
    agent = _agent(tmp_path, False)
    assert agent.guard is None
    transport = httpx.ASGITransport(app=agent.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        r = await client.get("/v1/guard", headers={"Authorization": "Bearer read"})
        assert r.status_code == 404 and "enabled" in r.json()["error"]
        r = await client.post("/v1/guard", headers={"Authorization": "Bearer ctl"}, json={"action": "hold"})
        assert r.status_code == 404


def test_guard_series_in_metrics() -> None:
    from collections import Counter

    from rigmon.agent.metrics import frame_metrics
    from rigmon.schema import Frame, GuardGpuSettings, GuardReading, Readings

    guard = GuardReading(mode="enforce", acting=True, state="engaged", step=1, step_name="app_clocks",
                         settings=(GuardGpuSettings(0, 877, 1005, None, 300.0),),
                         original=(GuardGpuSettings(0, 877, 1312, None, 300.0),), failures_total=2)
    frame = Frame(schema=1, node="n", run_id="r", seq=1, taken_at=1.0, agent_start=0.0, collectors={},
                  readings=Readings(guard=guard))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in frame_metrics(frame, Counter()) for s in family.samples}
    assert samples[("rigmon_guard_state", (("node", "n"), ("state", "engaged")))] == 1.0
    assert samples[("rigmon_guard_step", (("node", "n"),))] == 1.0
    assert samples[("rigmon_guard_gpu_app_clock_graphics_hertz", (("gpu", "0"), ("node", "n")))] == 1.005e9
    assert samples[("rigmon_guard_failures_total", (("node", "n"),))] == 2.0


async def test_guard_command_not_utf8(tmp_path: Path) -> None:
    """A hold typed in a Latin-1 shell is refused as not UTF-8 (the byte, where), not as a bad command."""
    agent = _agent(tmp_path, True)
    transport = httpx.ASGITransport(app=agent.app())
    ctl = {"Authorization": "Bearer ctl", "Content-Type": "application/json"}
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        body = '{"action": "hold", "by": "ren\u00e9"}'.encode("latin-1")
        r = await client.post("/v1/guard", headers=ctl, content=body)
        assert r.status_code == 400
        assert r.json()["error"].startswith(f"body is not UTF-8 (byte 0xe9 at offset {body.index(0xe9)})")
        r = await client.post("/v1/guard", headers=ctl, content=b"{hold")
        assert r.status_code == 400 and "body must be JSON" in r.json()["error"] and '"hold"' in r.json()["error"]
        # The same command in UTF-8 (a byte order mark ahead of it too) holds.
        r = await client.post("/v1/guard", headers=ctl, content=b"\xef\xbb\xbf" + body.decode("latin-1").encode())
        assert r.status_code == 200
    assert agent.guard is not None and agent.guard.shared.state.held
    agent.guard.close()
