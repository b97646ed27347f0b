"""Critical alarms arriving close together make one toast, of a width that fits an 80-column terminal."""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.widgets import Static
from textual.widgets._toast import Toast  # not exported by textual.widgets

from rigmon.cluster.alarm_board import AlarmRow
from rigmon.tui.critical_toast import LISTED_AT_MOST, CriticalToast, fit, toast_text
from tests.tui.snapshot_apps.fake_agent import make_alarm

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
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
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
        # At 80 columns the toast is under half the screen wide and a line per alarm high.
        await pilot.pause()
        toasts = list(app.screen.query(Toast))
        assert len(toasts) == 1
        assert toasts[0].outer_size.width <= 40
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
