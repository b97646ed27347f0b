"""/metrics over a real socket: the text format by default, OpenMetrics when Prometheus asks for it."""

from __future__ import annotations

import shutil
import subprocess

import httpx
import pytest

from rigmon.agent.agent import Agent
from tests.agent.test_api import served, wait_for_seq  # noqa: F401 - `served` is a fixture

#: What Prometheus 2 sends by default (scrape_protocols OpenMetricsText1.0.0, OpenMetricsText0.0.1,
#: PrometheusText0.0.4; scrape/scrape.go acceptHeader).
PROMETHEUS_2 = ("application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
                "text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
#: What Prometheus 3 sends by default (with PrometheusText1.0.0, and escaping on the 1.0.0 formats).
PROMETHEUS_3 = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
                "application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,"
                "text/plain;version=0.0.4;q=0.3,*/*;q=0.2")


async def _scrape(agent: Agent, url: str, accept: str | None) -> httpx.Response:
    await wait_for_seq(agent, 3)
    headers = {} if accept is None else {"Accept": accept}
    async with httpx.AsyncClient(timeout=10) as client:
        r = await client.get(f"{url}/metrics", headers=headers)
    assert r.status_code == 200, r.text
    return r


@pytest.mark.parametrize("accept", [PROMETHEUS_2, PROMETHEUS_3, "application/openmetrics-text"])
async def test_openmetrics_when_prometheus_asks_for_it(served: tuple[Agent, str], accept: str) -> None:  # noqa: F811
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    r = await _scrape(*served, accept)
    assert r.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0; charset=utf-8")
    assert r.text.endswith("# EOF\n")
    families = {f.name: f for f in text_string_to_metric_families(r.text)}  # the OpenMetrics parser takes it
    [temp] = families["rigmon_temperature_temp_celsius"].samples
    assert temp.labels == {"node": "t1", "sensor": "c", "label": "counter"} and temp.value >= 1.0
    assert families["rigmon_collector_up"].type == "gauge"


@pytest.mark.parametrize("accept", [None, "text/plain;version=0.0.4", "*/*", "text/plain"])
async def test_the_text_format_otherwise(served: tuple[Agent, str], accept: str | None) -> None:  # noqa: F811
    r = await _scrape(*served, accept)
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# EOF" not in r.text and 'rigmon_temperature_temp_celsius{' in r.text
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus; .ci/run installs it)")
    out = subprocess.run([promtool, "check", "metrics"], input=r.text, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("accept", [PROMETHEUS_2, PROMETHEUS_3])
async def test_openmetrics_of_a_node_with_a_rail_adc_is_one_family_per_name(accept: str) -> None:
    # The deprecated gauge rigmon_psu_rail_windows is, in OpenMetrics, a second family named as the
    # counter rigmon_psu_rail_windows_total: the OpenMetrics parser refused the whole scrape ("Clashing
    # name") and Prometheus filed the gauge under the counter's TYPE and HELP.
    from typing import Any, cast

    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from rigmon.agent.api import ApiState, build_app
    from rigmon.agent.buffer import FrameBuffer
    from rigmon.agent.metrics import FrameCollector
    from tests.agent.test_metrics import rail_frame

    frame = rail_frame(1000.0, 11.9)
    metrics = FrameCollector(lambda: frame)
    metrics.observe(frame)
    info = cast(Any, lambda: None)  # /metrics reads no identity
    state = ApiState(buffer=FrameBuffer(10), info=info, token=None, max_streams=1, max_request_bytes=1 << 16,
                     metrics=metrics)
    transport = httpx.ASGITransport(app=build_app(state))
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        om = await client.get("/metrics", headers={"Accept": accept})
        text = await client.get("/metrics")
    assert om.headers["content-type"].startswith("application/openmetrics-text")
    families = {f.name: f for f in text_string_to_metric_families(om.text)}
    windows = families["rigmon_psu_rail_windows"]
    assert windows.type == "counter" and windows.documentation == "PsuAdcCounters.windows_total"
    assert [s.name for s in windows.samples] == ["rigmon_psu_rail_windows_total"]
    assert families["rigmon_psu_rail_frame_windows"].samples[0].value == 1
    # The text format has no clash: the old name stays there for one release.
    assert "# TYPE rigmon_psu_rail_windows gauge" in text.text
    assert "# TYPE rigmon_psu_rail_windows_total counter" in text.text
