"""API fuzzing: schemathesis drives every operation of the published OpenAPI description
against a real agent on loopback (a simulated node, journal, tokens); no answer may be a 5xx,
and every answer must be one the description lists, in its declared shape."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from rigmon.agent.agent import Agent
from rigmon.agent.api import OPENAPI_PATH
from rigmon.agent.background import BackgroundAgent
from rigmon.sim.rig import SimRig, get_scenario, node_agent_config

TOKEN = "read-token-for-fuzz"
CONTROL = "control-token-for-fuzz"
#: Examples per operation and generation mode: about 8 s on a 2-core machine. A longer run:
#: RIGMON_FUZZ_EXAMPLES=300 (about a minute; found nothing more when last run).
EXAMPLES = int(os.environ.get("RIGMON_FUZZ_EXAMPLES", "25"))
#: The stream never ends: its parameters are tested in tests/agent/test_api.py.
SKIPPED = {"/v1/stream"}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def agent_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("fuzz-agent")
    rig = SimRig(get_scenario("healthy"), 1, workdir)
    config = node_agent_config(rig.nodes[0], "127.0.0.1:0", 0.2, workdir / "state",
                               {"agent": {"rate_limit_per_s": 0.0}})
    background = BackgroundAgent(Agent(config, token=TOKEN, control_token=CONTROL))
    url = background.start()
    try:
        yield url
    finally:
        background.stop()
        rig.close()


def test_no_operation_answers_5xx_or_off_description(agent_url: str) -> None:
    spec = json.loads(OPENAPI_PATH.read_text())
    schema = schemathesis.openapi.from_dict(spec)
    operations = [op.ok() for op in schema.get_all_operations()]
    fuzzed = []
    for operation in operations:
        if operation.path in SKIPPED:
            continue
        token = CONTROL if operation.path.endswith("/ack") else TOKEN
        # Valid inputs must get a described answer; invalid ones (negative mode) at least no 5xx.
        modes = [(GenerationMode.POSITIVE, CHECKS)]
        if set(spec["paths"][operation.path][operation.method.lower()]) & {"parameters", "requestBody"}:
            modes.append((GenerationMode.NEGATIVE, [not_a_server_error]))
        for mode, checks in modes:

            @settings(max_examples=EXAMPLES, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode), authorized=st.booleans())
            def run(case: schemathesis.Case, authorized: bool) -> None:
                headers = {"Authorization": f"Bearer {token}"} if authorized else {}
                response = case.call(base_url=agent_url, headers=headers, timeout=30)
                case.validate_response(response, checks=checks)

            run()
        fuzzed.append(operation.path)
    assert len(fuzzed) == len(operations) - len(SKIPPED)
