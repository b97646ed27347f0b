"""The undervolt guard on the dashboard: the node screen's line, the cluster mark, hold and release keys."""

from __future__ import annotations

import time
from pathlib import Path

from msgspec.structs import replace

from rigmon.cluster.config import NodeTarget
from rigmon.schema import GuardGpuSettings, GuardReading
from rigmon.sim.rig import running_rig
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.widgets.guard_line import GuardLine, guard_mark, guard_text
from tests.token_files import control_token_config
from tests.tui.snapshot_apps.dashboard import wait_for

SIZE = (160, 50)
CONTROL_TOKEN = "control-s3cret"

ENGAGED = GuardReading(mode="enforce", acting=True, state="engaged", step=1, step_name="app_clocks",
                       trigger="rail minimum 11.26 V below 11.5 V [/]", gpus=(0, 1, 2, 3), actions_last_hour=1,
                       max_actions_per_hour=6, settings=(GuardGpuSettings(0, 877, 1005, None, 300.0),))


def test_mark_and_text() -> None:
    assert guard_mark(None) == "" and guard_mark(GuardReading("dry-run", False, "armed", 0)) == ""
    assert guard_mark(ENGAGED) == "G1"
    assert guard_mark(GuardReading("dry-run", False, "held", 2)) == "dry2h"
    text = guard_text(ENGAGED)
    assert text.startswith("guard engaged (enforce): step 1, application clocks on GPUs 0,1,2,3 at 877/1005 MHz")
    assert "because rail minimum 11.26 V below 11.5 V [/]" in text and "1 action this hour (at most 6 steps)" in text
    assert "7 actions this hour (at most 6 steps)" in guard_text(replace(ENGAGED, actions_last_hour=7))
    denied = GuardReading("enforce", False, "armed", 0, reason="cannot act: no permission; staying in dry-run")
    assert guard_text(denied).startswith("guard armed (enforce, not acting)") and "no permission" in guard_text(denied)


def test_the_power_limit_step_says_the_limit_in_force() -> None:
    capped = GuardReading(mode="enforce", acting=True, state="engaged", step=3, step_name="power_limit",
                          gpus=(0, 1), settings=(GuardGpuSettings(0, 877, 1005, 1005, 150.0),))
    assert guard_text(capped).startswith("guard engaged (enforce): step 3, power limit on GPUs 0,1 at 877/1005 MHz, "
                                         "150 W")


def notices(app: RigmonApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def test_node_screen_shows_the_guard_and_holds_and_releases_it(tmp_path: Path) -> None:
    extra = control_token_config(tmp_path, CONTROL_TOKEN)
    # Speed 2: the guard must act within ~3 simulated seconds of the first sag (a loaded machine).
    async with running_rig("undervolt-bus-drop-guarded", 1, base_port=0, speed=2, workdir=tmp_path / "rig",
                           extra_config=extra) as rig:
        url = rig.urls[0]
        guard = rig.agents[0].guard
        assert guard is not None
        app = RigmonApp([NodeTarget(url, control_token=CONTROL_TOKEN)], refresh_s=0.2, alarm_poll_s=0.5)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: url in app.cluster.nodes and app.cluster.nodes[url].latest is not None)
            app.open_node(url)
            await pilot.pause()
            assert isinstance(app.screen, NodeScreen)

            def line() -> GuardLine:
                return app.screen.query_one(GuardLine)

            await wait_for(lambda: line().guard is not None and line().guard.state == "engaged", timeout_s=40)
            assert "guard engaged (enforce): step 1" in str(line().render())
            await pilot.press("g")
            await wait_for(lambda: guard.reading().state == "held")
            await wait_for(lambda: any(n.startswith("Guard hold") for n in notices(app)))
            await pilot.press("G")
            await wait_for(lambda: guard.reading().state == "released")
            await wait_for(lambda: any(n.startswith("Guard release") for n in notices(app)))


async def test_the_guard_line_stays_under_the_status_when_a_box_in_trouble_moves_up() -> None:
    # A node whose enclosure link retrained and whose array lags: its storage and links boxes
    # move to the top. The guard's line (what it did to the GPUs, and the keys to hold or
    # release it) was pushed down with each box moved, ending under the last of them.

    from rigmon.tui.widgets.node_status import NodeStatus
    from tests.tui.snapshot_apps.record_frames import load_frames
    from tests.tui.snapshot_apps.recorded import build, open_node, settle

    frames = [replace(f, readings=replace(f.readings, guard=ENGAGED))
              for f in load_frames("enclosure-link-10g-array-lagging")[:45]]
    app, fleet, _ = build([("encl", frames, len(frames))])
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        body = app.screen.query_one("#node-body")
        children = list(body.children)
        status = app.screen.query_one(NodeStatus)
        assert children.index(app.screen.query_one(GuardLine)) == children.index(status) + 1
        line = app.screen.query_one(GuardLine)
        assert line.display and line.region.y < status.region.bottom + 2


def test_after_a_failed_restore_the_line_says_what_happens_to_each_gpu() -> None:
    # A GPU off the bus is not retried (the agent retries on the GPUs still there): "retrying" misled.
    stuck = GuardReading("enforce", True, "armed", 0, settings=(GuardGpuSettings(0, 877, 1005),
                                                                 GuardGpuSettings(3, 877, 1005)), off_bus=(3,))
    text = guard_text(stuck)
    assert "the restore failed: retrying on GPUs 0; GPUs 3 off the bus: not retried until back" in text
    gone = replace(stuck, settings=stuck.settings[1:])
    assert "retrying" not in guard_text(gone) and "GPUs 3 off the bus" in guard_text(gone)
    cannot = replace(stuck, acting=False)
    assert "reset them by hand" in guard_text(cannot) and "retrying" not in guard_text(cannot)


def test_an_engaged_guard_that_cannot_read_the_rail_says_it_holds_the_caps() -> None:
    at = 1_700_000_000.0
    blind = replace(ENGAGED, unread=("rail",), unread_since=at)
    since = time.strftime("%H:%M:%S", time.gmtime(at))
    assert f"at 877/1005 MHz; holding caps: rail not read since {since} UTC" in guard_text(blind)
    assert "holding caps" not in guard_text(replace(blind, state="held"))  # the operator's hold says enough


def test_a_released_guard_says_until_when_it_stays_away() -> None:
    # After `G` (or POST /v1/guard release) the guard does not engage again for restore_after_s: the line
    # said only "guard released (enforce)" while the rail sagged and a GPU fell off the bus, the guard idle.
    at = 1_700_000_000.0
    released = GuardReading("enforce", True, "released", 0, released_until=at, actions_last_hour=2,
                            max_actions_per_hour=6)
    until = time.strftime("%H:%M:%S", time.gmtime(at))
    assert guard_text(released).startswith(f"guard released (enforce): does not engage again before {until} UTC, "
                                           "whatever the rail does")
    assert "before" not in guard_text(replace(released, state="armed", released_until=None))


def test_a_guard_that_does_not_act_says_it_would_cap_not_that_it_capped() -> None:
    # In dry-run the line read "guard engaged (dry-run): step 1, application clocks on GPUs 0,1,2,3 at 877/1005 MHz"
    # beside GPUs running at 1530 MHz: the events say "would cap", the line did not.
    dry = replace(ENGAGED, mode="dry-run", acting=False)
    assert guard_text(dry).startswith("guard engaged (dry-run): would take step 1, application clocks on GPUs "
                                      "0,1,2,3 at 877/1005 MHz (nothing changed)")
    # Caps a previous run left are really in force, acting or not.
    left = replace(dry, left_behind=True)
    assert "would" not in guard_text(left) and "nothing changed" not in guard_text(left)
    assert "would" not in guard_text(ENGAGED)


def test_a_guard_held_before_it_engaged_says_what_the_hold_means() -> None:
    # `g` on an armed guard: the line said only "guard held (enforce)", as if caps were held.
    held = GuardReading("enforce", True, "held", 0, actions_last_hour=0, max_actions_per_hour=6)
    assert guard_text(held).startswith("guard held (enforce): nothing capped; caps it takes on a sag stay until "
                                       "released")
