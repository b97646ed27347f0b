"""The export key: pressed again before the first export is written, two exports, neither lost; files private."""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.cells import cell_len

from rigmon.cluster import export
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.export import export_paths
from rigmon.cluster.replay import Replay
from rigmon.snapshot.bundle import NodePart
from rigmon.tui.app import RigmonApp
from rigmon.tui.critical_toast import toast_text_width
from rigmon.tui.operations import path_lines
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import START_AT
from tests.tui.snapshot_apps.fake_bundle import write_fake_bundle


def test_a_second_export_in_the_same_second_gets_a_name_of_its_own(tmp_path: Path) -> None:
    first = export_paths(tmp_path, START_AT)
    assert first.bundle.name == "rigmon-dash-20260101-000000.tar.gz"
    first.screenshot.write_text("<svg/>")  # the screenshot is written first, the bundle later
    second = export_paths(tmp_path, START_AT + 0.5)
    assert second.bundle.name == "rigmon-dash-20260101-000000-2.tar.gz"
    assert second.screenshot.name == "rigmon-dash-20260101-000000-2.svg"
    second.bundle.write_bytes(b"")
    assert export_paths(tmp_path, START_AT).bundle.name == "rigmon-dash-20260101-000000-3.tar.gz"


async def test_pressing_export_twice_writes_two_exports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the second press cancelled the first export's worker while it pulled the nodes (its
    # screenshot written, its bundle never), and two exports of one second had one name.
    pulled = asyncio.Event()
    pulls: list[int] = []

    async def pull_targets(targets: Sequence[NodeTarget], since_s: float = 3600.0,
                           note: object = None) -> list[NodePart]:
        pulls.append(len(targets))
        await pulled.wait()  # an agent that takes its time to answer
        return [NodePart(node="node01", source=targets[0].url, error="timed out")]

    monkeypatch.setattr(export, "pull_targets", pull_targets)
    out = tmp_path / "out"
    app = RigmonApp([NodeTarget("http://127.0.0.1:9")], refresh_s=3600, export_dir=out)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e", "e")
        await wait_for(lambda: len(pulls) == 2, timeout_s=10)
        pulled.set()
        await wait_for(lambda: not [w for w in app.workers if w.group == "export" and not w.is_finished],
                       timeout_s=30)
        exported = [n for n in app._notifications if n.title == "Exported"]
    assert len(exported) == 2
    assert len(list(out.glob("rigmon-dash-*.tar.gz"))) == 2 and len(list(out.glob("rigmon-dash-*.svg"))) == 2


async def test_exports_are_private_to_their_owner(tmp_path: Path) -> None:
    # Before: the directory 755 and both files 644 (the umask's), readable by every local user,
    # though a bundle holds host names, GPU processes' command lines and the configuration.
    out = tmp_path / "exports"
    app = RigmonApp([], replay=Replay.open(write_fake_bundle(tmp_path / "in.tar.gz")), refresh_s=3600,
                    export_dir=out)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        await wait_for(lambda: any(n.title in ("Exported", "Export failed") for n in app._notifications),
                       timeout_s=30)
    files = sorted(out.iterdir())
    assert [f.suffix for f in files] == [".svg", ".gz"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert [stat.S_IMODE(f.stat().st_mode) for f in files] == [0o600, 0o600]


async def test_a_full_disk_leaves_no_cut_screenshot_and_the_dashboard_lives(tmp_path: Path) -> None:
    out = tmp_path / "exports"
    app = RigmonApp([], replay=Replay.open(write_fake_bundle(tmp_path / "in.tar.gz")), refresh_s=3600,
                    export_dir=out)

    def save_screenshot(filename: str, path: str) -> str:
        # What Textual's save_screenshot does on a full disk: the file begun, then ENOSPC.
        (Path(path) / filename).write_text("<svg")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    app.save_screenshot = save_screenshot  # type: ignore[assignment,method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        await wait_for(lambda: any(n.title == "Export failed" for n in app._notifications), timeout_s=30)
        failed = next(n for n in app._notifications if n.title == "Export failed")
        assert "No space left on device" in failed.message
        await pilot.press("space", "right")  # the dashboard goes on
        assert app.is_running
    assert list(out.iterdir()) == []


def test_a_path_is_broken_after_its_separators_not_in_a_name() -> None:
    lines = path_lines("bundle /home/op/.local/state/rigmon/exports/rigmon-dash-20261128-092849.tar.gz", 40)
    assert lines == ["bundle /home/op/.local/state/rigmon/", "  exports/", "  rigmon-dash-20261128-092849.tar.gz"]
    assert path_lines("screenshot /tmp/a.svg", 40) == ["screenshot /tmp/a.svg"]
    # A part longer than a line is not split here (the toast folds it): it has a line of its own.
    assert path_lines("bundle /x/" + "n" * 50, 20) == ["bundle /x/", "  " + "n" * 50]


async def test_the_exported_toast_at_200_columns_keeps_each_file_name_on_one_line(tmp_path: Path) -> None:
    # Before: ``bundle /tmp/.../rigmon-dash-20261128-09`` / ``2849.tar.gz``, the toast (57 cells of text)
    # folding the one long line where it ran out.
    out = tmp_path / "state" / "rigmon" / "exports"
    app = RigmonApp([], replay=Replay.open(write_fake_bundle(tmp_path / "in.tar.gz")), refresh_s=3600,
                    export_dir=out)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("e")
        await wait_for(lambda: any(n.title == "Exported" for n in app._notifications), timeout_s=30)
        exported = next(n for n in app._notifications if n.title == "Exported")
        width = toast_text_width(app)
    assert width == 57
    lines = exported.message.splitlines()
    assert all(cell_len(line) <= width for line in lines), lines
    names = sorted(f.name for f in out.iterdir())
    assert len(names) == 2
    for name in names:
        assert any(line.endswith(name) for line in lines), (name, lines)
