"""The hand-written OpenAPI description matches the agent's routes, methods and records."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from starlette.routing import Route

from rigmon.agent.agent import Agent
from rigmon.agent.api import OPENAPI_PATH
from rigmon.cluster.client import SamplesPage
from rigmon.config import AgentConfig, AgentSection
from rigmon.schema import (
    Alarm,
    AlarmList,
    CollectorStatus,
    Event,
    Frame,
    Gap,
    GuardGpuSettings,
    GuardReading,
    History,
    HistorySeries,
    InfinibandPortReading,
    Info,
    NodeCapture,
    PeerPathReading,
    ProbeResponderReading,
    RdmaHwCounterReading,
)
from rigmon.summary import NodeSummary, PathCell, PathFigures, SummaryRecord
from rigmon.typed import record_fields

SPEC = json.loads(OPENAPI_PATH.read_text())


def _routes(app: object) -> dict[str, set[str]]:
    """Path -> methods of the Starlette app inside the agent's guard."""
    starlette = app.__closure__[0].cell_contents  # type: ignore[attr-defined]
    out: dict[str, set[str]] = {}
    for route in starlette.routes:
        assert isinstance(route, Route)
        out[route.path] = {m.lower() for m in (route.methods or ()) if m != "HEAD"}
    return out


def test_paths_and_methods_match_the_routes(tmp_path: Path) -> None:
    agent = Agent(AgentConfig(agent=AgentSection(node="t", root=str(tmp_path))), collectors={})
    routes = _routes(agent.app())
    described = {path: set(ops) for path, ops in SPEC["paths"].items()}
    assert described == routes


def test_record_schemas_require_what_the_records_require() -> None:
    records = {"CollectorStatus": CollectorStatus, "Event": Event, "Frame": Frame, "Gap": Gap, "Info": Info,
               "Alarm": Alarm, "AlarmList": AlarmList, "HistorySeries": HistorySeries, "History": History,
               "NodeCapture": NodeCapture, "SamplesPage": SamplesPage, "GuardReading": GuardReading,
               "GuardGpuSettings": GuardGpuSettings, "InfinibandPortReading": InfinibandPortReading,
               "RdmaHwCounterReading": RdmaHwCounterReading,
               "PeerPathReading": PeerPathReading, "ProbeResponderReading": ProbeResponderReading,
               "SummaryRecord": SummaryRecord, "NodeSummary": NodeSummary, "PathFigures": PathFigures,
               "PathCell": PathCell}
    for name, cls in records.items():
        schema = SPEC["components"]["schemas"][name]
        fields = {f.name: f for f in record_fields(cls) or ()}
        required = {n for n, f in fields.items() if f.required}
        assert set(schema["properties"]) == set(fields), name
        if name == "SamplesPage":
            # The agent always sends every key of a page; the client's dataclass has defaults.
            required |= {"gap", "more"}
        assert set(schema["required"]) == required, name


async def test_served_at_v1_openapi_json(tmp_path: Path) -> None:
    agent = Agent(AgentConfig(agent=AgentSection(node="t", root=str(tmp_path))), token="t0k", collectors={})
    transport = httpx.ASGITransport(app=agent.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        assert (await client.get("/v1/openapi.json")).status_code == 401
        r = await client.get("/v1/openapi.json", headers={"Authorization": "Bearer t0k"})
    assert r.status_code == 200 and r.json() == SPEC
