"""The history view of a node whose problem is a temperature opens on that temperature, against its limits:
a CPU package at TjMax (``cpu-cooler-failed``), NVMe drives at their warning temperature (``nvme-thermal-throttle``)."""

from __future__ import annotations

from rigmon.cluster.chart import charts_for, frame_values
from rigmon.tui.screens.history import HistoryScreen
from rigmon.tui.widgets.history_chart import HistoryChart
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.recorded import build, open_node, settle
from tests.tui.test_history import history_requests, open_history

PACKAGE = "coretemp-isa-0000/Package id 0"


def head(screen: HistoryScreen) -> str:
    """The line above the chart and its legend, as text."""
    return str(screen.query_one("#history-head").render())


async def test_a_cpu_at_its_critical_limit_opens_on_its_temperature() -> None:
    app, fleet, _ = build([("node01", "cpu-cooler-failed", 61)])
    agent = next(iter(fleet.agents.values()))
    agent.journal = True
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        screen = await open_history(app, pilot)
        assert screen.chart is not None and screen.chart.key == "temp:coretemp-isa-0000"
        assert f"temperatures[{PACKAGE}].temp_c" in history_requests(agent)[-1].url.params["series"].split(",")
        text = head(screen)
        assert "high 80, critical 100" in text
        assert PACKAGE in text  # the line's label: the sensor's boot-stable name
        assert screen.plotted is not None and screen.plotted.highest == 100.0
        assert [t.value for t in screen.query_one(HistoryChart).plotted.thresholds] == [80.0, 100.0]  # type: ignore[union-attr]


async def test_hot_nvme_drives_open_on_their_temperature_from_the_cluster_screen() -> None:
    app, fleet, _ = build([("node01", "nvme-partitioned-thermal-throttle", 86)])
    agent = next(iter(fleet.agents.values()))
    agent.journal = True
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        screen = await open_history(app, pilot)
        # Not the Thunderbolt link speeds (the node's first chart): the hot drives against WCTEMP.
        assert screen.chart is not None and screen.chart.key == "nvme_temp"
        assert "high 81.85, critical 84.85" in head(screen)
        assert screen.plotted is not None and screen.plotted.highest is not None
        assert screen.plotted.highest > 81.85
        # The series key still cycles through every chart, from the first.
        await pilot.press("s")
        assert screen.chart.key != "nvme_temp"


async def test_a_node_off_screen_offers_every_temperature_chart_its_agent_has() -> None:
    # Before: a node followed by summary records (every node on the cluster screen) offered only the charts of
    # its slim frame: the NVMe drives and the sensors at their critical limit, none of the host's others.
    app, fleet, _ = build([("node01", "nvme-partitioned-thermal-throttle", 0)])
    agent = next(iter(fleet.agents.values()))
    agent.journal = True
    agent.summaries = True
    store = app.cluster.nodes[agent.url]
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: any(r.url.params.get("view") == "summary" for r in agent.requests
                                   if r.url.path == "/v1/stream"))
        agent.publish(80)
        await wait_for(lambda: store.latest is not None and store.latest.seq == 80)
        assert not store.latest_whole
        assert not any(c.key.startswith("temp:") for c in charts_for(frame_values(store.latest)))
        app.refresh_screen()
        await pilot.pause()
        screen = await open_history(app, pilot)
        assert screen.chart is not None and screen.chart.key == "nvme_temp"
        every = [c.key for c in charts_for(frame_values(agent.frames[-1]))]
        assert any(k.startswith("temp:") for k in every)
        await wait_for(lambda: [c.key for c in screen.charts] == every)
        assert any(r.url.path == "/v1/latest" for r in agent.requests)
        # The chart shown stays; the series key reaches the host's sensors.
        assert screen.chart.key == "nvme_temp"
        for _ in every:
            await pilot.press("s")
            if screen.chart.key.startswith("temp:"):
                break
        assert screen.chart.key.startswith("temp:")
        await wait_for(lambda: screen.history is not None)
        await pilot.pause()
        assert screen.plotted is not None and screen.plotted.lines
        # Charts offered later without the one shown (a reading a newer frame lacks) do not take it away.
        shown = screen.chart
        screen.offer([c for c in charts_for(frame_values(agent.frames[-1])) if c.key != shown.key])
        assert screen.chart is shown and len(screen.charts) == len(every)
