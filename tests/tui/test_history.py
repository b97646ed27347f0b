"""The history view: opened from the node and cluster screens, drawn from the agent's /v1/history,
zoomed and panned by keys, and working in a replay (a node whose agent cannot answer:
``test_history_held.py``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from rigmon.cluster.chart import DEFAULT_SPAN_S, ZOOM_SPANS_S
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.replay import Replay, store_key
from rigmon.sim.rig import running_rig
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.history import HistoryScreen
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.widgets.history_chart import HistoryChart
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent
from tests.tui.snapshot_apps.fake_bundle import write_fake_bundle
from tests.tui.snapshot_apps.recorded import build, open_node, settle, v100_frames


def history_requests(agent: FakeAgent) -> list[httpx.Request]:
    return [r for r in agent.requests if r.url.path == "/v1/history" and "frames" not in r.url.params]


async def open_history(app: RigmonApp, pilot) -> HistoryScreen:  # type: ignore[no-untyped-def]
    await pilot.press("h")
    await wait_for(lambda: isinstance(app.screen, HistoryScreen))
    screen = app.screen
    assert isinstance(screen, HistoryScreen)
    await wait_for(lambda: screen.history is not None or screen.reason is not None)
    await pilot.pause()
    return screen


def lowest_rail(agent: FakeAgent) -> float:
    """The lowest rail minimum the agent's frames hold (the recorded sag)."""
    return min(f.readings.psu_rail.volts.min_volts for f in agent.frames
               if f.readings.psu_rail is not None and f.readings.psu_rail.volts is not None)


def fleet_app(journal: bool = True, frames: list | None = None):  # type: ignore[no-untyped-def,type-arg]
    """A dashboard over one fake agent replaying ``frames`` (the V100 recording by default)."""
    frames = v100_frames() if frames is None else frames
    app, fleet, clock = build([("node01", frames, len(frames))])
    agent = next(iter(fleet.agents.values()))
    agent.journal = journal
    return app, fleet, agent, frames


async def test_node_screen_key_draws_the_rail_from_v1_history() -> None:
    app, fleet, agent, frames = fleet_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        screen = await open_history(app, pilot)
        assert screen.chart is not None and screen.chart.key == "rail"
        asked = history_requests(agent)
        assert len(asked) == 1
        params = asked[0].url.params
        assert "psu_rail.volts.min_volts" in params["series"].split(",")
        # The window ends at the node's last frame.
        assert float(params["to"]) == agent.frames[-1].taken_at
        # The sag's minimum (11.255 V in the recording) is the lowest point drawn, and the
        # chart's y axis reaches below it.
        assert screen.plotted is not None
        assert screen.plotted.lowest == lowest_rail(agent) == 11.255
        assert screen.plotted.y_low < 11.255
        assert screen.query_one(HistoryChart).plotted is screen.plotted
        # The node's events are listed under the chart: the GPU lost among them.
        assert any(e.kind == "gpu_lost" for e in screen.plotted.events)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HistoryScreen)


async def test_zoom_pan_and_series_keys_change_the_request() -> None:
    app, fleet, agent, frames = fleet_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        screen = await open_history(app, pilot)
        first = history_requests(agent)[-1].url.params
        span = float(first["to"]) - float(first["from"])

        async def press(key: str) -> httpx.QueryParams:
            count = len(history_requests(agent))
            await pilot.press(key)
            await wait_for(lambda: len(history_requests(agent)) > count and screen.history is not None)
            await pilot.pause()
            return history_requests(agent)[-1].url.params

        out = await press("minus")
        assert float(out["to"]) - float(out["from"]) > span
        assert float(out["to"]) == float(first["to"])
        inside = await press("plus")
        assert float(inside["to"]) - float(inside["from"]) == span
        earlier = await press("comma")
        assert float(earlier["to"]) == float(first["to"]) - span / 2
        later = await press("full_stop")
        assert float(later["to"]) == float(first["to"])
        # Never past the newest data.
        assert float((await press("full_stop"))["to"]) == float(first["to"])
        power = await press("s")
        assert screen.chart is not None and screen.chart.key == "gpu_power"
        assert "gpus[3].power_peak_w" in power["series"].split(",")
        assert screen.plotted is not None and screen.plotted.highest is not None
        assert screen.plotted.highest > 300.0  # V100 peaks over the 300 W limit are drawn as they are


async def test_cluster_screen_key_opens_the_selected_node() -> None:
    app, fleet, agent, _ = fleet_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        screen = await open_history(app, pilot)
        assert screen.node_name == "node01"
        assert screen.plotted is not None and screen.plotted.lowest == lowest_rail(agent)


async def test_replay_draws_history_from_the_recorded_frames(tmp_path: Path) -> None:
    replay = Replay.open(write_fake_bundle(tmp_path / "bug.tar.gz"))
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space")  # pause
        replay.seek(app.cluster, replay.end_at)
        key = store_key(replay.bundle.nodes[1])
        app.open_node(key)
        await pilot.pause()
        screen = await open_history(app, pilot)
        assert screen.chart is not None and screen.chart.key == "cpu"
        assert screen.window.end_at == replay.at
        assert screen.window.span_s in ZOOM_SPANS_S and screen.window.span_s <= DEFAULT_SPAN_S
        assert screen.plotted is not None and screen.plotted.lines
        cpu = [f.readings.host.cpu_pct for f in replay.frames_until(key)
               if f.readings.host is not None and f.readings.host.cpu_pct is not None
               and f.taken_at >= screen.window.from_at]
        assert screen.plotted.highest == max(cpu)
        assert [e.message for e in screen.plotted.events][-1].startswith("gpu_lost firing")


async def test_history_of_a_real_agent_shows_the_sag_from_its_journal(tmp_path: Path) -> None:
    """A simulated undervolt rig with a real agent and journal: the chart's lowest rail point is
    the journal's lowest rail minimum, below the critical threshold."""
    async with running_rig("undervolt-bus-drop", 1, base_port=0, speed=5, workdir=tmp_path / "rig",
                           interval_s=0.25) as rig:
        app = RigmonApp([NodeTarget(u) for u in rig.urls], refresh_s=0.2, alarm_poll_s=0.5)
        async with app.run_test(size=(120, 40)) as pilot:
            store = next(iter(app.cluster.nodes.values()))
            await wait_for(lambda: any(e.kind == "gpu_lost" for e in store.events), timeout_s=60)
            # The journal commits on its own interval: the chart can only show the loss once the
            # journal holds it (on a loaded machine that is a moment after the live frame).
            async with httpx.AsyncClient(base_url=rig.urls[0]) as http:
                for _ in range(300):
                    events = (await http.get("/v1/history", params={"series": "psu_rail.volts.min_volts"})).json()
                    if any(e["kind"] == "gpu_lost" for e in events["events"]):
                        break
                    await asyncio.sleep(0.1)
            await pilot.pause()
            screen = await open_history(app, pilot)
            assert screen.chart is not None and screen.chart.key == "rail"
            assert screen.history is not None and screen.plotted is not None
            window = screen.window
            async with httpx.AsyncClient(base_url=rig.urls[0]) as http:
                answer = (await http.get("/v1/history", params={
                    "from": repr(window.from_at), "to": repr(window.end_at),
                    "series": "psu_rail.volts.min_volts"})).json()
            lowest = min(answer["series"]["psu_rail.volts.min_volts"]["min"])
            assert screen.plotted.lowest == lowest
            assert lowest < 11.5
            assert any(e.kind == "gpu_lost" for e in screen.plotted.events)


async def test_leaving_the_history_for_another_screen_closes_it() -> None:
    app, fleet, agent, _ = fleet_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        await open_history(app, pilot)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ClusterScreen)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        await open_history(app, pilot)
        await pilot.press("a")
        await pilot.pause()
        app.open_node(agent.url)
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)


async def test_the_line_above_the_chart_gives_the_rail_to_the_millivolt() -> None:
    # The cluster row and the node screen say the sag was 11.255 V; the history's line said
    # "lowest 11.26 V" (and a highest maximum of 12.000 V read "12 V").
    from textual.widgets import Static

    app, fleet, agent, _ = fleet_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        screen = await open_history(app, pilot)
        assert screen.plotted is not None and screen.plotted.lowest == 11.255
        head = str(screen.query_one("#history-head", Static).content)
        assert "lowest 11.255 V, highest " in head
        highest = screen.plotted.highest
        assert highest is not None and f"highest {highest:.3f} V" in head


async def test_a_window_of_another_day_says_which_day() -> None:
    # Before: panned a day back, the line above the chart read "15m to 11:59:59 UTC" as for
    # today's window, and the time axis has no date below a day's span.
    from textual.widgets import Static

    app, fleet, agent, _ = fleet_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        screen = await open_history(app, pilot)
        today = str(screen.query_one("#history-head", Static).content)
        assert " to 20" not in today.split("·")[1]  # today's window: the time alone
        await pilot.press(*["minus"] * 6, ",", ",")  # zoomed out to a day, and a day back
        await wait_for(lambda: screen.history is not None or screen.reason is not None)
        await pilot.pause()
        head = str(screen.query_one("#history-head", Static).content)
        day = time.strftime("%Y-%m-%d", time.gmtime(screen.window.end_at))
        assert screen.window.span_s == 86400 and screen.now() - screen.window.end_at >= 86400
        assert f" to {day} " in head, head


async def test_the_event_list_keeps_one_line_an_event_after_the_terminal_narrows() -> None:
    # Before: the lines were cut to the width the list had when drawn; the terminal narrowed
    # from 200 to 80 columns, they wrapped, and the "… N more events" line fell out of the box.
    from textual.widgets import Static

    app, fleet, agent, _ = fleet_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        screen = await open_history(app, pilot)
        assert screen.plotted is not None and len(screen.plotted.events) > 1
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        events = screen.query_one("#history-events", Static)
        lines = events.render_lines(events.region.reset_offset.shrink(events.styles.gutter))
        texts = [strip.text.rstrip() for strip in lines]
        # Each line an event, numbered, and the last one says how many more there are.
        assert all(text.split()[0].isdigit() for text in texts[:-1]), texts
        assert "more events in this window" in texts[-1], texts


def listed(screen: HistoryScreen) -> list[str]:
    """The event list's lines as drawn."""
    from textual.widgets import Static

    events = screen.query_one("#history-events", Static)
    return [strip.text.rstrip() for strip in events.render_lines(events.region.reset_offset.shrink(events.styles.gutter))]


def with_late_marks(marks: int) -> list:  # type: ignore[type-arg]
    """The V100 recording with the job's marks in its last frames (after the GPU was lost)."""
    from msgspec.structs import replace

    from rigmon.schema import Event

    frames = v100_frames()
    for n in range(marks):
        frame = frames[-2 - n]
        mark = Event(id=f"{frame.run_id}-mark-{n}", at=frame.taken_at, kind="mark", severity="info",
                     subject="node:node01", message=f"epoch {9 - n} checkpoint",
                     data={"text": f"epoch {9 - n} checkpoint", "by": "train.py"})
        frames[-2 - n] = replace(frame, events=(*frame.events, mark))
    return frames


async def test_the_event_list_takes_the_room_a_taller_screen_has() -> None:
    # Before: six lines at most at any size, so at 200x50 the marks late in the window (the job's
    # last checkpoints, after the GPU was lost) were "… N more" under a chart with room to spare.
    frames = with_late_marks(2)
    for size, expected in (((80, 24), 6), ((200, 50), 9)):
        app, fleet, agent, _ = fleet_app(frames=frames)
        async with app.run_test(size=size) as pilot:
            await settle(app, fleet, pilot)
            await open_node(app, agent.url, pilot)
            screen = await open_history(app, pilot)
            assert screen.plotted is not None and len(screen.plotted.events) == 9
            lines = listed(screen)
            assert len(lines) == expected, (size, lines)
            if size == (80, 24):
                # The five that matter most, in time order, and how many more (the chart keeps its rows):
                # the critical ones (the rail's warning, at the second of its critical alarm, is counted).
                assert [line.split()[0] for line in lines[:5]] == ["2", "3", "4", "5", "6"]
                assert "4 more events in this window" in lines[-1], lines
                assert not any("checkpoint" in line for line in lines)
            else:
                assert [line.split()[0] for line in lines] == [str(n) for n in range(1, 10)], lines
                assert "epoch 8 checkpoint" in lines[-2] and "epoch 9 checkpoint" in lines[-1], lines
                assert screen.query_one(HistoryChart).size.height >= 14
            # The screen grows (or shrinks) and the list follows.
            await pilot.resize_terminal(200 if size == (80, 24) else 80, 50 if size == (80, 24) else 24)
            await pilot.pause()
            await pilot.pause()
            assert len(listed(screen)) == (9 if size == (80, 24) else 6), listed(screen)


async def test_a_long_incident_keeps_its_start_on_the_chart_and_counts_what_it_leaves_out() -> None:
    # The QA run: the rail alarms, the Xid (NVML's and the kernel's report, one event) and the lost GPU,
    # then ten of the job's marks: 17 events. Before: the chart kept the newest 12 (the marks, from
    # after the loss) and said "… 7 more" at 80x24, counting neither the dropped five nor the Xid's merge.
    frames = with_late_marks(10)
    for size in ((80, 24), (200, 50)):
        app, fleet, agent, _ = fleet_app(frames=frames)
        async with app.run_test(size=size) as pilot:
            await settle(app, fleet, pilot)
            await open_node(app, agent.url, pilot)
            screen = await open_history(app, pilot)
            plotted = screen.plotted
            assert plotted is not None
            drawn = screen.query_one(HistoryChart).plotted
            assert drawn is not None and len(drawn.events) == 12
            kinds = [e.kind for e in drawn.events]
            # Every hardware event and alarm, then the marks nearest the incident: in time order.
            assert kinds == ["alarm_firing", "alarm_firing", "xid", "alarm_firing", "alarm_firing", "gpu_lost",
                             "alarm_firing"] + ["mark"] * 5, kinds
            assert [e.at for e in drawn.events] == sorted(e.at for e in drawn.events)
            assert [e.message for e in drawn.events if e.kind == "mark"] == [f"epoch {n} checkpoint" for n in range(5)]
            lines = listed(screen)
            if size == (80, 24):
                # The critical five: the rail's, the Xid, its alarm, the loss and its alarm.
                assert [line.split()[0] for line in lines[:-1]] == ["2", "3", "4", "5", "6"], lines
                assert "12 more events in this window" in lines[-1], lines
            else:
                assert [line.split()[0] for line in lines[:-1]] == [str(n) for n in range(1, 13)], lines
                assert "5 more events in this window" in lines[-1], lines
            assert plotted.window_events == 17
