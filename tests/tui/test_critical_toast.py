"""Critical alarms arriving close together make one toast, of a width that fits the terminal; at 80x24 one line."""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.widgets import Footer, Static
from textual.widgets._toast import Toast  # not exported by textual.widgets

from rigmon.cluster.alarm_board import AlarmRow
from rigmon.schema import AlarmList
from rigmon.tui.critical_toast import LISTED_AT_MOST, CriticalToast, compact, fit, toast_line, toast_text
from rigmon.tui.text import notify
from rigmon.tui.widgets.node_row import NodeRow
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent, make_alarm
from tests.tui.snapshot_apps.hostile import screen_lines
from tests.tui.test_app import dashboard

GPU_LOST = AlarmRow("http://node02", "node02", "node",
                    make_alarm("node02", 1, "gpu_lost", "critical", "gpu:3", "GPU 3 is lost (fell off the bus)"))
XID = AlarmRow("http://node02", "node02", "node",
               make_alarm("node02", 2, "gpu_xid_fatal", "critical", "gpu:3",
                          "Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus."))
RAIL = AlarmRow("http://node02", "node02", "node",
                make_alarm("node02", 3, "psu_rail_low_critical", "critical", "psu",
                           "12 V rail minimum 11.24 V is below 11.5 V: GPUs fall off the bus here"))
UNREACHABLE = AlarmRow("http://node05", "node05", "cluster",
                       make_alarm("node05", 1, "node_unreachable", "critical", "node:node05",
                                  "node node05 unreachable: [bold]cannot connect[/]"))


def test_one_alarm_keeps_its_rule_and_whole_message() -> None:
    title, message = toast_text([GPU_LOST], 36)
    assert title == "CRITICAL gpu_lost"
    assert message == "node02 gpu:3: GPU 3 is lost (fell off the bus)"


def test_several_alarms_are_one_line_each_cut_to_the_width() -> None:
    title, message = toast_text([GPU_LOST, XID, RAIL], 36)
    assert title == "CRITICAL: 3 new alarms"
    lines = message.splitlines()
    assert lines[0] == "node02 GPU 3 is lost (fell off the …"
    assert [line.split()[0] for line in lines] == ["node02"] * 3
    assert all(cell_len(line) <= 36 for line in lines)


def test_a_cluster_alarm_names_its_node_once() -> None:
    # Before: "node05 node node05 unreachable: …" in a list cut at 36 cells at 80 columns, and
    # "node05 node:node05: node node05 unreachable: …" alone: the name three times.
    _, message = toast_text([GPU_LOST, UNREACHABLE], 36)
    assert message.splitlines()[1] == "node05 unreachable: [bold]cannot co…"
    assert toast_text([UNREACHABLE], 36)[1] == "node05 unreachable: [bold]cannot connect[/]"


def test_more_alarms_than_listed_are_counted() -> None:
    rows = [GPU_LOST, XID, RAIL, UNREACHABLE, GPU_LOST, XID]
    _, message = toast_text(rows, 50)
    lines = message.splitlines()
    assert len(lines) == LISTED_AT_MOST + 1
    assert lines[-1] == f"and {len(rows) - LISTED_AT_MOST} more: press a"


def test_fit_cuts_by_cells() -> None:
    assert fit("short", 10) == "short"
    assert fit("GPU 3 ⚠ lost", 8) == "GPU 3 ⚠…"
    assert cell_len(fit("⚠⚠⚠⚠⚠⚠", 5)) <= 5


class ToastApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.bells = 0
        self.toast = CriticalToast()

    def compose(self) -> ComposeResult:
        yield Static("alarms")

    def bell(self) -> None:
        self.bells += 1


def shown(app: App[None]) -> list[tuple[str, str]]:
    return [(n.title, n.message) for n in app._notifications]


async def test_alarms_arriving_while_the_toast_is_up_join_it() -> None:
    app = ToastApp()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        app.toast.announce(app, [XID])
        await pilot.pause()
        assert shown(app) == [("CRITICAL gpu_xid_fatal", f"node02 gpu:3: {XID.alarm.message}")]
        # Seconds later the GPU's own alarm and the rail's come in, from later polls.
        app.toast.announce(app, [GPU_LOST])
        app.toast.announce(app, [RAIL, UNREACHABLE])
        await pilot.pause()
        assert len(shown(app)) == 1
        title, message = shown(app)[0]
        assert title == "CRITICAL: 4 new alarms"
        assert [line.split(" ", 1)[1][:12] for line in message.splitlines()] == [
            "Xid 79 on GP", "GPU 3 is los", "12 V rail mi", "unreachable:"]
        # At 120 columns the toast is under half the screen wide and a line per alarm high (smaller
        # terminals: one line, see below).
        await pilot.pause()
        toasts = list(app.screen.query(Toast))
        assert len(toasts) == 1
        assert toasts[0].outer_size.width <= 60
        assert toasts[0].content_size.height == 1 + 4
        assert app.bells == 3
        # Once the toast is gone (timed out or clicked away), the next alarm has its own.
        app.clear_notifications()
        app.toast.announce(app, [GPU_LOST])
        await pilot.pause()
        assert [title for title, _ in shown(app)] == ["CRITICAL gpu_lost"]


async def test_alarm_text_is_not_markup() -> None:
    app = ToastApp()
    async with app.run_test(size=(80, 24)) as pilot:
        app.toast.announce(app, [UNREACHABLE])
        await pilot.pause()
        assert "[bold]cannot connect[/]" in shown(app)[0][1]
        assert not next(iter(app._notifications)).markup


def test_a_compact_toast_is_one_line_naming_the_nodes_and_the_first_alarm() -> None:
    assert toast_line([GPU_LOST], 75) == "CRITICAL node02 gpu:3: GPU 3 is lost (fell off the bus)"
    line = toast_line([RAIL, XID, UNREACHABLE], 75)
    assert line.startswith("CRITICAL 3 new alarms on node02, node05, press a: node02 12 V rail minimum")
    assert cell_len(line) == 75 and line.endswith("…")
    assert compact(80, 24) and compact(200, 30) and compact(100, 50) and not compact(120, 40)


def test_a_compact_toast_too_long_for_its_subject_key_leaves_the_key_for_the_reading() -> None:
    # Before: "CRITICAL node01 temp:coretemp-isa-0000/Package id 0: coretemp Package id 0 a…" at 80 columns, the
    # temperature and its limit cut: the message names the sensor already.
    hot = AlarmRow("http://node01", "node01", "node",
                   make_alarm("node01", 4, "host_temp_critical", "critical", "temp:coretemp-isa-0000/Package id 0",
                              "coretemp Package id 0 at 100 °C, at or over its critical limit 100 °C "
                              "(/sys/class/hwmon/hwmon0/temp1_input): the hardware throttles hard"))
    line = toast_line([hot], 76)
    assert line.startswith("CRITICAL node01: coretemp Package id 0 at 100 °C, at or over its critical")
    assert "temp:" not in line and cell_len(line) == 76
    # Where it fits whole, the subject stays (above), and a cluster rule's node is said once.
    assert toast_line([UNREACHABLE], 30) == "CRITICAL node05 unreachable: …"


async def test_at_80x24_a_critical_toast_leaves_every_node_row_in_sight() -> None:
    agents = [FakeAgent(f"node{i:02}", frames=3) for i in range(1, 9)]
    alarming = agents[:3]
    for agent in alarming:
        agent.alarms = AlarmList(node=agent.node, active=(), recent=())
    app, _ = dashboard(*agents)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        stores = [app.cluster.nodes[a.url] for a in agents]
        await wait_for(lambda: all(s.latest is not None for s in stores)
                       and all(app.cluster.nodes[a.url].alarm_list is not None for a in alarming))
        app.refresh_screen()
        await pilot.pause()
        # An incident: three nodes' GPUs fall off the bus, a critical alarm each (two on the first).
        for agent in alarming:
            agent.alarms = AlarmList(node=agent.node, active=(
                make_alarm(agent.node, 1, "gpu_lost", "critical", "gpu:3", "GPU 3 is lost (fell off the bus)"),
                make_alarm(agent.node, 2, "psu_rail_low_critical", "critical", "psu",
                           "12 V rail minimum 11.24 V is below 11.5 V: GPUs fall off the bus here")), recent=())
            app.followers.alarm_wake[agent.url].set()
        await wait_for(lambda: all(len(app.cluster.nodes[a.url].alarm_list.active) == 2  # type: ignore[union-attr]
                                   for a in alarming))
        app.refresh_screen()
        await pilot.pause()
        toasts = list(app.screen.query(Toast))
        assert len(toasts) == 1
        message = next(iter(app._notifications)).message
        assert message.startswith("CRITICAL 6 new alarms on node01, node02, node03, press a: node01 ")
        # Every row the list shows stays in sight: the toast lies above the footer, one line high, on a line of its own.
        nodes = app.screen.query_one("#nodes")
        rows = [r for r in app.screen.query(NodeRow) if r.region.overlaps(nodes.region)]
        assert len(rows) >= 6
        toast = toasts[0].region
        assert not [r.view.name for r in rows if r.view is not None and r.region.overlaps(toast)]
        assert toast.height == 1
        # The terminal made large: the toast still up is the usual one, a line per alarm (and back).
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        assert [(n.title, len(n.message.splitlines())) for n in app._notifications] == [
            ("CRITICAL: 6 new alarms", LISTED_AT_MOST + 1)]
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert [n.title for n in app._notifications] == [""]


async def test_at_80x24_a_later_toast_leaves_the_critical_strip_on_the_line_above_the_footer() -> None:
    """A theme's toast (t) or an export's (e) came under the critical strip, taking the line next to the footer,
    and pushed the strip up over the node list: the strip keeps its line, the later toast stands above it, on
    lines of its own too."""
    agents = [FakeAgent(f"node{i:02}", frames=3) for i in range(1, 9)]
    app, _ = dashboard(*agents)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_for(lambda: all(app.cluster.nodes[a.url].latest is not None for a in agents))
        app.refresh_screen()
        await pilot.pause()
        app.critical_toast.announce(app, [GPU_LOST, XID])
        await pilot.pause()
        # As the export says it (the theme's toast, 2 s, may be gone before a slow machine draws it).
        notify(app, "screenshot /tmp/x.svg; pulling the nodes...", title="Exporting", timeout=30)
        for _ in range(3):
            await pilot.pause()
        toasts = sorted(app.screen.query(Toast), key=lambda t: t.region.y)
        assert [str(t.render()).split()[0] for t in toasts] == ["Exporting", "CRITICAL"]
        critical = toasts[-1].region
        assert critical.height == 1 and critical.bottom == 23
        assert [n.title for n in app._notifications] == ["Exporting", ""]
        assert app.screen.query_one(Footer).region.y == 23
        nodes = app.screen.query_one("#nodes").region
        assert not [t for t in toasts if t.region.overlaps(nodes)], (nodes, [t.region for t in toasts])
        # A further critical alarm grows the strip while the later toast is up: the strip replaced left an
        # empty holder, a blank line between the two that pushed the later toast over the node list.
        app.critical_toast.announce(app, [RAIL])
        for _ in range(3):
            await pilot.pause()
        lines, _ = screen_lines(app)
        assert [line[:12] for line in lines[20:23]] == ["▌ Exporting ", "▌ screenshot", "▌ CRITICAL 3"], lines[18:]
        nodes = app.screen.query_one("#nodes").region
        assert not [t for t in app.screen.query(Toast) if t.region.overlaps(nodes)]


async def test_at_80x24_the_critical_strip_leaves_the_key_line_and_every_row_in_sight() -> None:
    # Before: the strip lay over the footer for its 15 s, and the operator lost the key hints exactly when a
    # critical alarm came. Now the node list is a line shorter while the strip is up, and whole again after.
    agents = [FakeAgent(f"node{i:02}", frames=3) for i in range(1, 30)]
    app, _ = dashboard(*agents)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_for(lambda: all(app.cluster.nodes[a.url].latest is not None for a in agents))
        app.refresh_screen()
        await pilot.pause()
        nodes = app.screen.query_one("#nodes")
        before = nodes.region
        app.critical_toast.announce(app, [GPU_LOST])
        for _ in range(3):
            await pilot.pause()
        (toast,) = app.screen.query(Toast)
        lines, _ = screen_lines(app)
        assert lines[23].lstrip().startswith("⏎ Open node") and "q Quit" in lines[23], lines[23]
        assert lines[22].startswith("▌ CRITICAL node02 gpu:3: GPU 3 is lost"), lines[22]
        assert toast.region.y == 22 and not toast.region.overlaps(nodes.region)
        assert nodes.region.height == before.height - 1
        # Clicked away (or its time up): the line is the list's again at the next redraw.
        app.clear_notifications()
        app.refresh_screen()
        for _ in range(3):
            await pilot.pause()
        assert nodes.region == before
        # A toast whose time is up gives its line back without waiting for a redraw.
        notify(app, "theme rigmon-light", timeout=1.0)
        await wait_for(lambda: nodes.region.height == before.height - 1)
        await wait_for(lambda: nodes.region == before)
