"""The alarms and links screens of a replayed node whose recording ends before the others' (a bundle that does
not date its pulls): once the cursor is past its last frame by three of its intervals, its alarms read as of
that frame and its link-matrix rows as ended, not as current (`rigmon.cluster.recording_end`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from msgspec.structs import replace
from textual.pilot import Pilot

from rigmon.cluster.alarm_board import board_view
from rigmon.cluster.recording_end import recording_ends
from rigmon.cluster.replay import Replay
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Frame, PeerPathReading
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.alarms import AlarmsScreen
from rigmon.tui.screens.links import LinkScreen
from rigmon.tui.widgets.alarm_detail import AlarmDetail
from rigmon.tui.widgets.alarm_table import AlarmTable
from rigmon.tui.widgets.link_table import LinkTable
from tests.tui.snapshot_apps.fake_agent import START_AT
from tests.tui.snapshot_apps.fake_bundle import (
    SILENT_AFTER,
    alarm_event,
    node_frames,
    write_fake_bundle,
)
from tests.tui.snapshot_apps.hostile import screen_lines
from tests.tui.test_recording_end import seek

NODES = ("node01", "node02", "node03")
NODE03 = "replay:node03"
#: node03's fan alarm fires in this frame and is still firing at its last.
FAN_FIRES = 50


def probed(frame: Frame) -> Frame:
    """``frame`` with its node's management-network round trips to the other two nodes."""
    paths = tuple(PeerPathReading(name=f"{peer}/mgmt", peer=peer, path="mgmt", address=f"10.1.0.{i + 1}",
                                  state="ok", window_s=5.0, sent=50, received=50, loss_pct=0.0, rtt_p50_us=210.0,
                                  rtt_p99_us=340.0, last_reply_age_s=0.1, link_gbps=2.5)
                  for i, peer in enumerate(NODES) if peer != frame.node)
    return replace(frame, readings=replace(frame.readings, peer_paths=paths))


def frames_of(node: str) -> list[Frame]:
    """The fixture's frames (`node_frames`: node03's end 30 s before the others'), every node probing
    its peers, and node03 with a warning firing from frame `FAN_FIRES` to its last."""
    frames = [probed(f) for f in node_frames(node)]
    if node == "node03":
        fan = alarm_event(node, FAN_FIRES, 1, "alarm_firing", "fan_stopped", "warning", "fan:cpu",
                          "CPU fan at 0 rpm")
        frames = [replace(f, events=f.events + (fan,)) if f.seq == FAN_FIRES else f for f in frames]
    return frames


def open_replay(tmp_path: Path) -> Replay:
    return Replay.open(write_fake_bundle(tmp_path / "ended.tar.gz", frames_of))


def test_an_ended_node_s_alarms_are_as_of_its_last_frame_and_the_node_stays_live(tmp_path: Path) -> None:
    replay = open_replay(tmp_path)
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    replay.seek(cluster, START_AT + SILENT_AFTER + 20)
    ended = recording_ends(replay, cluster)
    assert ended == {NODE03: START_AT + SILENT_AFTER}
    board = board_view(cluster, replay.notes, ended)
    (fan,) = [r for r in board.active if r.key == NODE03]
    assert (fan.as_of, fan.as_of_why) == (START_AT + SILENT_AFTER, "recording ended")
    assert all(r.as_of is None for r in board.active if r.key != NODE03)
    assert board.firing_as_of == 1
    # The node is live as before, and its alarms are the same rows, only dated.
    assert cluster.nodes[NODE03].state() == "live"
    assert board_view(cluster, replay.notes).active == tuple(dataclasses.replace(r, as_of=None, as_of_why="")
                                                             for r in board.active)


async def test_the_alarms_screen_dates_an_ended_node_s_alarm_and_draws_it_faint(tmp_path: Path) -> None:
    # Before, node03's fan alarm read as current to the end of the replay: not faint, no "as of",
    # not counted "as last heard", while its row and node screen said "recording ended 00:01:30".
    app = RigmonApp([], replay=open_replay(tmp_path), refresh_s=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("space")
        await pilot.press("a")
        await seek(app, pilot, START_AT + SILENT_AFTER + 2)
        assert isinstance(app.screen, AlarmsScreen)
        table = app.screen.query_one("#active-alarms", AlarmTable)
        (row,) = [r for r in table.alarms if r.key == NODE03]
        assert row.as_of is None  # within three of its intervals of its last frame: current
        await seek(app, pilot, START_AT + SILENT_AFTER + 20)
        (row,) = [r for r in table.alarms if r.key == NODE03]
        assert (row.as_of, row.as_of_why) == (START_AT + SILENT_AFTER, "recording ended")
        # Faint, as a stale node's alarm is drawn.
        message = table.get_cell(row.row_key, "message")
        assert message.plain == "CPU fan at 0 rpm"
        assert any(span.style == table._style("old") for span in message.spans)
        text = "\n".join(screen_lines(app)[0])
        assert "2 firing rows: 1 critical, 1 warning (1 as last heard)" in text
        # The panel under the tables (at 80 columns) says why, for the alarm under the cursor.
        table.move_cursor(row=table.get_row_index(row.row_key))
        await pilot.pause()
        detail = app.screen.query_one(AlarmDetail)
        assert detail.display and detail.row == row
        assert "firing as last heard 01-01 00:01:30 UTC (recording ended)" in "\n".join(screen_lines(app)[0])
        assert app.cluster.nodes[NODE03].state() == "live"


async def open_links(app: RigmonApp, pilot: Pilot[None], at: float) -> LinkTable:
    """Pause the replay, seek to ``at`` and open the links screen: its table."""
    await pilot.press("space")
    await seek(app, pilot, at)
    await pilot.press("l")
    await pilot.pause()
    assert isinstance(app.screen, LinkScreen)
    return app.screen.query_one(LinkTable)


async def test_the_link_matrix_marks_an_ended_node_s_rows_and_mutes_their_figures(tmp_path: Path) -> None:
    # Before, node03's rows read as live ("node03", coloured as ok) after its recording ended.
    app = RigmonApp([], replay=open_replay(tmp_path), refresh_s=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        table = await open_links(app, pilot, START_AT + SILENT_AFTER + 2)
        labels = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert labels == ["node01", "node02", "node03"]
        await seek(app, pilot, START_AT + SILENT_AFTER + 20)
        labels = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert labels == ["node01", "node02", "node03 ended 00:01:30"]
        lines = screen_lines(app)[0]
        legend = " ".join(line.strip() for line in lines[1:4])
        assert "· ended HH:MM:SS: the node's recording ends there" in legend, legend
        # Short enough that the loss figures still fit at 80 columns.
        (row03,) = [line for line in lines if "node03 ended 00:01:30" in line]
        assert row03.split() == ["node03", "ended", "00:01:30", "2.5G", "340", "µs", "0%", "340", "µs", "0%", "·"]
        cells = table.get_row_at(2)
        stale = table._style("stale")
        assert cells[1].style == stale and all(c.style == stale for c in cells[3:] if c.plain.strip() != "·")
        assert all(c.style != stale for c in table.get_row_at(0)[3:])
        # Sought back before its end, it is live again.
        await seek(app, pilot, START_AT + 60)
        assert str(table.get_row_at(2)[1]) == "node03"
        assert "recording ends there" not in " ".join(screen_lines(app)[0])


async def test_the_link_matrix_titles_an_ended_node_s_column_as_its_row(tmp_path: Path) -> None:
    # Before, node03's column kept its plain title after its recording ended, under which its peers' figures
    # to it read as current; only its own row said "ended".
    app = RigmonApp([], replay=open_replay(tmp_path), refresh_s=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        table = await open_links(app, pilot, START_AT + SILENT_AFTER + 20)
        stale = table._style("stale")

        def titles() -> list[tuple[str, bool]]:
            return [(c.label.plain, c.label.style == stale) for c in table.columns.values()][3:]

        # At 80 columns the time would cost the loss figures: it is on node03's row.
        assert titles() == [("node01", False), ("node02", False), ("node03 ended", True)]
        lines = screen_lines(app)[0]
        (row03,) = [line for line in lines if "node03 ended 00:01:30" in line]
        assert row03.split() == ["node03", "ended", "00:01:30", "2.5G", "340", "µs", "0%", "340", "µs", "0%", "·"]
        assert [line.split() for line in lines if "link" in line.split()] == [
            ["path", "node", "link", "node01", "node02", "node03", "ended"]]
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        await pilot.pause()
        assert titles()[-1] == ("node03 ended 00:01:30", True)
        # Sought back before its end, it is a peer like the others again.
        await seek(app, pilot, START_AT + 60)
        assert titles() == [("node01", False), ("node02", False), ("node03", False)]
