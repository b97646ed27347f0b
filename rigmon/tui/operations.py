"""What the acknowledge and export keys do: coroutines the app runs as workers, reporting by notification."""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.cells import cell_len

from rigmon.alarms.lifecycle import AlreadyResolved, UnknownAlarm
from rigmon.cluster.alarm_board import AlarmRow
from rigmon.cluster.chart import (
    charts_for,
    frame_values,
    history_from_frames,
    opening_span_s,
)
from rigmon.cluster.client import AgentError
from rigmon.cluster.held_history import HeldHistory, held_because, held_history
from rigmon.cluster.sanitise import clean_text
from rigmon.schema import History
from rigmon.tui.critical_toast import toast_text_width
from rigmon.tui.text import notify

if TYPE_CHECKING:
    from rigmon.cluster.chart_model import Chart
    from rigmon.cluster.node_store import NodeStore
    from rigmon.schema import Alarm, GuardReading
    from rigmon.tui.app import RigmonApp
    from rigmon.tui.screens.history import HistoryScreen


def login_name() -> str:
    """Who acknowledges from this dashboard: the login name, sent as the ack's ``by``."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "dashboard"


async def acknowledge(app: RigmonApp, row: AlarmRow) -> None:
    """Acknowledge ``row``'s alarm: on its agent with the node's control token, or for a
    cluster rule in the dashboard itself. One notification says what was acknowledged (a row
    standing for several alarms: how many); a refusal (401, 403, 404, 409) is a notification
    of its own saying why."""
    if app.replay is not None:
        notify(app, "a replay is read-only: nothing to acknowledge", severity="warning", timeout=5)
        return
    # A row may stand for several alarms of one incident (`AlarmRow.also`): each is acknowledged.
    done: list[tuple[Alarm, str]] = []
    for alarm in row.alarms:
        if alarm.state == "resolved" or (alarm is not row.alarm and alarm.acknowledged_at is not None):
            continue
        by, go_on = await _acknowledge_one(app, row, alarm)
        if by is not None:
            done.append((alarm, by))
        if not go_on:
            break
    if done:
        notify(app, _acknowledged(row, done), title="Acknowledged", timeout=5)
    app.refresh_screen()


def _acknowledged(row: AlarmRow, done: Sequence[tuple[Alarm, str]]) -> str:
    """``gpu_lost on node01 gpu:3 by alice``, or for several alarms of the row ``3 alarms on node01
    gpu:0 (nvlink_crc, nvlink_replay, pcie_replay) by alice``."""
    alarm = done[0][0]
    if len(done) == 1:
        what = f"{alarm.rule} on {row.node} {alarm.subject}"
    else:
        what = f"{len(done)} alarms on {row.node} {alarm.subject} ({', '.join(a.rule for a, _ in done)})"
    if row.source == "cluster":
        return f"{what} (cluster rule{'s' if len(done) > 1 else ''})"
    return f"{what} by {', '.join(dict.fromkeys(by for _, by in done))}"


async def _acknowledge_one(app: RigmonApp, row: AlarmRow, alarm: Alarm) -> tuple[str | None, bool]:
    """Acknowledge one alarm of ``row``: who it is acknowledged by (``None``: refused, said in a
    notification), and whether to go on with the row's other alarms (not after a refusal that
    holds for every alarm of the node: 401, 403, no answer)."""
    what = f"{alarm.rule} on {row.node} {alarm.subject}"
    if row.source == "cluster":
        try:
            app.cluster.rules.acknowledge(alarm.id, app.ack_by, app.cluster.clock.time())
        except (UnknownAlarm, AlreadyResolved) as exc:
            notify(app, f"{what}: {exc}", title="Not acknowledged", severity="warning", timeout=8)
            return None, True
        return app.ack_by, True
    target = next((t for t in app.targets if t.url == row.key), None)
    if target is None:
        notify(app, f"{what}: the dashboard does not follow that node", severity="error")
        return None, False
    client = app.client_factory(target)
    try:
        updated = await client.acknowledge(alarm.id, app.ack_by)
    except AgentError as exc:
        refused = exc.status in (401, 403)
        notify(app, f"{what}: {exc.reason}", title="Acknowledge refused" if refused else "Acknowledge failed",
               severity="error", timeout=10)
        # This alarm alone (gone, or resolved since: 404, 409): the others of the row may still be acknowledged.
        return None, exc.status in (404, 409)
    finally:
        await client.aclose()
    app.followers.answered(row.key)
    app.cluster.nodes[row.key].replace_alarm(updated)
    return updated.acknowledged_by or app.ack_by, True


async def guard_command(app: RigmonApp, key: str, action: str) -> None:
    """Hold or release the undervolt guard of node ``key`` with its control token; refusals
    are a notification saying why."""
    if app.replay is not None:
        notify(app, "a replay is read-only: no guard to command", severity="warning", timeout=5)
        return
    target = next((t for t in app.targets if t.url == key), None)
    store = app.cluster.nodes.get(key)
    if target is None or store is None:
        notify(app, "the dashboard does not follow that node", severity="error")
        return
    what = f"guard on {store.name}"
    client = app.client_factory(target)
    try:
        guard = await client.guard_command(action, app.ack_by)
    except AgentError as exc:
        notify(app, f"{what}: {exc.reason}", title=f"{action.capitalize()} refused", severity="error", timeout=10)
        return
    finally:
        await client.aclose()
    app.followers.answered(key)
    notify(app, f"{what} {guard_command_done(action, guard)}", title=f"Guard {action}", timeout=5)


def guard_command_done(action: str, guard: GuardReading) -> str:
    """What a guard command did, from the agent's answer: ``released: nothing was in force (now
    released, step 0)``. A release's answer lists the settings it is putting back in ``original``."""
    if action == "hold":
        done = "held: the caps stay until released"
    else:
        restoring = "restoring the GPUs' settings" if guard.acting else "would restore the GPUs' settings (not acting)"
        done = f"released: {restoring}" if guard.original else "released: nothing was in force"
    return f"{done} (now {guard.state}, step {guard.step})"


async def export(app: RigmonApp) -> None:
    """Save an SVG of the screen as it is now, then write a snapshot bundle of the followed
    nodes (the last hour of each) or of the replay up to its cursor, and say where both went."""
    # Deferred: the export code (bundles, the report's plotext charts, journal encoding) costs
    # the dashboard's first screen a sixth of a second and is needed only when the key is pressed.
    from rigmon.cluster.export import (
        EXPORT_FILE_MODE,
        EXPORT_SINCE_S,
        export_paths,
        make_export_dir,
        pull_targets,
        replay_parts,
        write_export,
    )

    created_at = time.time()
    paths = export_paths(app.export_dir, created_at)
    try:
        make_export_dir(paths.screenshot.parent)
        svg = app.save_screenshot(filename=paths.screenshot.name, path=str(paths.screenshot.parent))
        os.chmod(svg, EXPORT_FILE_MODE)
    except OSError as exc:
        # A full disk leaves the SVG cut short: not a screenshot anyone should open later. (The
        # name was free when chosen: nothing else's file is removed.)
        paths.screenshot.unlink(missing_ok=True)
        notify(app, f"cannot write to {paths.screenshot.parent}: {exc.strerror}", title="Export failed",
               severity="error", timeout=10)
        return
    notify(app, "\n".join(path_lines(f"screenshot {svg}; pulling the nodes...", toast_text_width(app))),
           title="Exporting", timeout=5)
    if app.replay is not None:
        parts = replay_parts(app.replay)
        since_s = max(1.0, app.replay.at - app.replay.start_at)
    else:
        # An agent serving other exports says when to ask again: the wait is said, not silent.
        parts = await pull_targets(app.targets, EXPORT_SINCE_S, note=lambda node, what: notify(
            app, clean_text(f"{node}: {what}"), title="Exporting", severity="warning", timeout=10))
        since_s = EXPORT_SINCE_S
    try:
        bundle = await asyncio.to_thread(write_export, parts, since_s, paths.bundle, created_at)
    except OSError as exc:
        notify(app, f"cannot write {paths.bundle}: {exc.strerror}", title="Export failed", severity="error", timeout=10)
        return
    # Pulled by rigmon.snapshot, not through the client: the node's name and the error may
    # quote the agent, so they are cleaned here.
    failed = [clean_text(f"{p.node}: {p.error}") for p in parts if p.error]
    detail = ("\n" + "\n".join(failed)) if failed else ""
    width = toast_text_width(app)
    where = "\n".join(path_lines(f"bundle {bundle}", width) + path_lines(f"screenshot {svg}", width))
    notify(app, f"{where}{detail}", title="Exported",
           severity="warning" if failed else "information", timeout=20)


def path_lines(text: str, width: int, indent: str = "  ") -> list[str]:
    """``text`` (a label and a path) in lines of at most ``width`` cells, broken after path separators
    (the next lines indented by ``indent``), so that a toast does not wrap a file name in the middle
    (``rigmon-dash-20261128-09`` / ``2849.tar.gz``). A part longer than a line has one of its own."""
    parts = [p for p in text.replace(os.sep, os.sep + "\0").split("\0") if p]
    lines = [""]
    for part in parts:
        if lines[-1].strip() and cell_len(lines[-1] + part) > width:
            lines.append(indent)
        lines[-1] += part
    return lines


def history_screen(app: RigmonApp, key: str) -> HistoryScreen:
    """The history view of node ``key``: its charts from its latest frame (and the temperatures the dashboard
    holds of it: `NodeStore.chart_values`; for a node off screen, once its agent's whole latest frame is in,
    every sensor's), its history from its agent's ``/v1/history`` (or, in a replay, from the recorded frames up
    to the cursor). When the agent cannot answer (a node that just died), the chart is what the dashboard holds
    of the node, and says so (`rigmon.cluster.held_history`)."""
    # Deferred: the history view draws with plotext, which the first screen does not need.
    from rigmon.tui.screens.history import HistoryScreen, HistoryUnavailable

    store = app.cluster.nodes[key]
    replay = app.replay

    def now() -> float:
        if replay is not None:
            # The node's own clock at the cursor: its frames' times, which the history is drawn in.
            return replay.node_time(key)
        # The node's store as it is now: another agent at its URL has a store of its own (`reopen_history`).
        store = app.cluster.nodes[key]
        latest = store.latest
        # The node's own clock: its journal is in its time, and a dead node's ends at its last frame.
        return latest.taken_at if latest is not None else app.cluster.clock.time()

    async def load(from_at: float, to_at: float, series: Sequence[str]) -> History | HeldHistory:
        store = app.cluster.nodes[key]
        if replay is not None:
            frames = replay.frames_until(key)
            if not frames:
                raise HistoryUnavailable("the recording holds no frame of this node up to the cursor")
            interval = store.info.interval_s if store.info is not None else 1.0
            return await asyncio.to_thread(history_from_frames, frames, store.name, from_at, to_at, series, interval)
        target = next((t for t in app.targets if t.url == key), None)
        if target is None:
            raise HistoryUnavailable("the dashboard does not follow that node")
        client = app.client_factory(target)
        try:
            answer = await client.history(from_at, to_at, series)
            app.followers.answered(key)
            return answer
        except AgentError as exc:
            held = held_history(store, from_at, to_at, series, held_because(exc.reason, exc.status))
            if held is None:
                raise HistoryUnavailable(exc.reason) from None
            return held
        finally:
            await client.aclose()

    async def whole_charts() -> Sequence[Chart] | None:
        # A node off screen sends summary records, whose slim frames have only the temperature sensors at their
        # critical limit: its agent's whole latest frame says which charts it offers (one request, at opening).
        store = app.cluster.nodes[key]
        target = next((t for t in app.targets if t.url == key), None)
        if replay is not None or store.latest is None or store.latest_whole or target is None:
            return None
        generation = store.generation
        client = app.client_factory(target)
        try:
            frame = await client.latest()
        except AgentError:
            return None  # out of reach: the charts of what the dashboard holds stay
        finally:
            await client.aclose()
        store = app.cluster.nodes[key]
        if frame is None or store.generation != generation:
            return None  # another agent answers at the node's URL now: `reopen_history` starts the view over
        # With what the view opened on: a reading missing from these frames (the ADC between windows) takes no chart away.
        return charts_for({**opened_on, **store.chart_values(), **frame_values(frame)}, subject)

    # The node's worst problem now: a hot sensor or drive opens the view on its temperature (`opening_chart`).
    worst = store.view(peers_up=app.cluster.peers_up(store)).problems
    subject = worst[0].subject if worst else None
    opened_on = store.chart_values()
    screen = HistoryScreen(store.name, charts_for(opened_on, subject), now, load,
                           reason=_no_frame(store), span_s=opening_span_s(store.history.span_s(None)), subject=subject,
                           more_charts=whole_charts)
    screen.node_key = key
    screen.generation = store.generation
    screen.had_frame = store.latest is not None
    return screen


def _no_frame(store: NodeStore) -> str | None:
    """Why the history view of ``store``'s node has nothing to chart: no frame from it yet (``None``: it has one)."""
    if store.latest is not None:
        return None
    return "no frame from this node yet" + (f" ({store.error})" if store.error else "")


def reopen_history(app: RigmonApp, key: str, note: str | None = None) -> None:
    """Start the open history views of node ``key`` over when what they drew is not the node's now: its store
    was started afresh (``note``: another agent answers at its URL, `rigmon.cluster.identity.AgentNames`), so
    the chart, its name and its fetches in flight were the other agent's; or the view waited for the node's
    first frame, which is in (its charts are known now)."""
    history = sys.modules.get("rigmon.tui.screens.history")
    if history is None:
        return  # never opened: no view is one (see `history_screen`'s deferred import)
    store = app.cluster.nodes[key]
    for screen in app.screen_stack:
        if not isinstance(screen, history.HistoryScreen) or screen.node_key != key:
            continue
        if screen.generation == store.generation and (screen.had_frame or store.latest is None):
            continue
        screen.generation = store.generation
        screen.had_frame = store.latest is not None
        screen.reopen(store.name, charts_for(store.chart_values()), _no_frame(store),
                      opening_span_s(store.history.span_s(None)), note)
