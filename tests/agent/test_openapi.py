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


async def test_history_answers_are_described_with_their_media_types_and_headers(tmp_path: Path) -> None:
    # Every answer of /v1/history, over a journal with a damaged block: each media type it
    # is sent as and each of its rigmon-* headers is in the description, with a value of the
    # type described.
    from types import SimpleNamespace
    from typing import Any, cast

    from rigmon.agent.api import ApiState, build_app
    from rigmon.agent.buffer import FrameBuffer
    from tests.agent.test_history_api import spoilt_journal

    path, t0 = spoilt_journal(tmp_path)
    info = cast(Any, lambda: SimpleNamespace(node="n1"))  # /v1/history reads only the node's name
    state = ApiState(buffer=FrameBuffer(10), info=info, token=None, max_streams=4, max_request_bytes=1 << 16,
                     journal_path=path, now=lambda: t0 + 1000)
    described = SPEC["paths"]["/v1/history"]["get"]["responses"]["200"]
    parse = {"integer": int, "number": float}
    sent: dict[str, set[str]] = {}
    transport = httpx.ASGITransport(app=build_app(state))
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        for frames in ("0", "1"):
            for accept in ("application/json", "application/x-ndjson", "application/gzip"):
                r = await client.get("/v1/history", params={"from": repr(t0), "to": repr(t0 + 999), "frames": frames},
                                     headers={"Accept": accept})
                assert r.status_code == 200, r.text
                media = r.headers["content-type"].split(";")[0]
                assert media in described["content"], (frames, accept)
                for name, value in r.headers.items():
                    if name.startswith("rigmon-"):
                        schema = described["headers"][name]["schema"]
                        assert parse[schema["type"]](value) >= schema.get("minimum", float("-inf")), name
                        sent.setdefault(name, set()).add(media)
    # Each header described is one the route sends.
    assert set(described["headers"]) == set(sent)
    assert sent["rigmon-frames"] == {"application/x-ndjson", "application/gzip"}
