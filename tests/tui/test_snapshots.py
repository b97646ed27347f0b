"""SVG snapshots of the cluster, node and alarms screens and of a replay, from seeded fake agents
(host-only or replaying recorded frames of real collectors on simulator trees) or a fixed bundle
on a frozen clock."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from rigmon.cluster.replay import Replay
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.history import HistoryScreen
from tests.tui.snapshot_apps.dashboard import alarms_listed, build, give_alarms, settle, wait_for
from tests.tui.snapshot_apps.fake_agent import START_AT
from tests.tui.snapshot_apps.fake_bundle import GPU_LOST_AT, write_fake_bundle
from tests.tui.snapshot_apps.peer_paths import fleet_nodes
from tests.tui.snapshot_apps.recorded import build as build_recorded
from tests.tui.snapshot_apps.recorded import ddp_frames, open_node, v100_frames
from tests.tui.snapshot_apps.recorded import settle as settle_recorded

THEMES = ["rigmon-dark", "rigmon-light"]


@pytest.mark.parametrize("theme", THEMES)
def test_cluster_screen(snap_compare: Any, theme: str) -> None:
    app, fleet, clock = build(theme)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(app, fleet, clock, pilot)
        app.clear_notifications()  # the unreachable nodes' toasts; the alarms screen shows them
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_node_screen(snap_compare: Any, theme: str) -> None:
    app, fleet, clock = build(theme)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(app, fleet, clock, pilot)
        app.open_node(next(iter(fleet.agents)))
        await pilot.pause()
        app.refresh_screen()
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 50), run_before=run_before)


def test_cluster_screen_64_nodes_wide(snap_compare: Any) -> None:
    app, fleet, clock = build(count=64)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(app, fleet, clock, pilot)
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(200, 60), run_before=run_before)


def test_alarms_screen(snap_compare: Any) -> None:
    app, fleet, clock = build()
    give_alarms(fleet)

    async def run_before(pilot: Pilot[None]) -> None:
        await alarms_listed(app, fleet)
        await settle(app, fleet, clock, pilot)
        await pilot.press("a")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(140, 36), run_before=run_before)


def test_alarms_screen_80x24(snap_compare: Any) -> None:
    app, fleet, clock = build()
    give_alarms(fleet)

    async def run_before(pilot: Pilot[None]) -> None:
        await alarms_listed(app, fleet)
        await settle(app, fleet, clock, pilot)
        await pilot.press("a")
        await pilot.pause()
        await pilot.press("down", "down")  # node01's lost GPU: its message is off-screen in the table
        app.refresh_screen()
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_replay_at_a_fixed_cursor(snap_compare: Any, tmp_path: Any) -> None:
    replay = Replay.open(write_fake_bundle(tmp_path / "bug.tar.gz"))
    app = RigmonApp([], replay=replay, refresh_s=3600)

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("space")
        replay.seek(app.cluster, START_AT + GPU_LOST_AT + 12)
        app.refresh_screen()
        await pilot.pause()
        app.clear_notifications()  # the gpu_lost toast would cover the time cursor
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 24), run_before=run_before)


def _recorded_node_screen(nodes: list[tuple[str, object, int]]):  # type: ignore[no-untyped-def]
    app, fleet, _ = build_recorded(nodes)  # type: ignore[arg-type]

    async def run_before(pilot: Pilot[None]) -> None:
        await settle_recorded(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)

    return app, run_before


def test_node_screen_v100_lost_gpu_rail_sag(snap_compare: Any) -> None:
    app, run_before = _recorded_node_screen([("v100", v100_frames(), 60)])
    assert snap_compare(app, terminal_size=(120, 50), run_before=run_before)


def test_node_screen_storage_and_links(snap_compare: Any) -> None:
    app, run_before = _recorded_node_screen([("encl", "enclosure-link-10g-array-lagging", 45)])
    assert snap_compare(app, terminal_size=(120, 50), run_before=run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_cluster_screen_every_source(snap_compare: Any, theme: str) -> None:
    """Every recorded incident at 80x24: the worst rail of the last 60 s and a line saying why."""
    app, fleet, _ = build_recorded([
        ("v100", v100_frames(), 60), ("encl", "enclosure-link-10g-array-lagging", 45),
        ("raid", "raid1-member-failed-recovering", 25), ("model", "two-raid0-model-load", 30),
        ("usb4", "strix-usb4-thunderbolt-net", 50), ("strix", "strix-amd-gpu", 15),
        ("v100b", "v100-gpu-lost-rail-sag", 10), ("mirror", "raid1-member-failed-recovering", 12),
    ], theme=theme)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle_recorded(app, fleet, pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_node_screen_80x24(snap_compare: Any, theme: str) -> None:
    """The node screen opens on its incident timeline: the sag before the GPU loss."""
    app, fleet, _ = build_recorded([("v100", v100_frames(), 60)], theme=theme)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle_recorded(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def _history_app(theme: str, keys: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    app, fleet, _ = build_recorded([("v100", v100_frames(), 60)], theme=theme)
    agent = next(iter(fleet.agents.values()))
    agent.journal = True

    async def run_before(pilot: Pilot[None]) -> None:
        await settle_recorded(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        for key in ("h", *keys):
            before = len([r for r in agent.requests if r.url.path == "/v1/history"])
            await pilot.press(key)
            await wait_for(lambda: len([r for r in agent.requests if r.url.path == "/v1/history"]) > before)
            await wait_for(lambda: isinstance(app.screen, HistoryScreen) and app.screen.plotted is not None)
            await pilot.pause()
        app.clear_notifications()
        await pilot.pause()

    return app, run_before


@pytest.mark.parametrize("theme", THEMES)
def test_history_chart(snap_compare: Any, theme: str) -> None:
    app, run_before = _history_app(theme)
    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)


def test_history_chart_gpu_power_80x24(snap_compare: Any) -> None:
    app, run_before = _history_app("rigmon-dark", ("s",))
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)

@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_node_screen_gpu_processes(snap_compare: Any, size: tuple[int, int]) -> None:
    """The DDP job's workers under their GPUs, VRAM, throttle reasons (HW slowdown, power brake),
    and the worker on lost GPU 3 exiting after the loss."""
    app, run_before = _recorded_node_screen([("v100", ddp_frames(), 22)])
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_cluster_screen_silent_path(snap_compare: Any) -> None:
    """The TP cluster at 80x24: tbnet between node01 and node02 silent (both rows red, first, with
    why), node03's slow roce path amber; the path column in place of CPU."""
    app, fleet, _ = build_recorded(fleet_nodes())

    async def run_before(pilot: Pilot[None]) -> None:
        await settle_recorded(app, fleet, pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_link_matrix(snap_compare: Any, size: tuple[int, int]) -> None:
    """The link matrix of the TP cluster: one block per path, the silent tbnet pair and the slow roce cell."""
    app, fleet, _ = build_recorded(fleet_nodes())

    async def run_before(pilot: Pilot[None]) -> None:
        await settle_recorded(app, fleet, pilot)
        await pilot.press("l")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)
