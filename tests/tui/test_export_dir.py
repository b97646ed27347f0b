"""The export key writes into the user's data directory by default, never the current directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.cluster.config import default_export_dir
from rigmon.cluster.replay import Replay
from rigmon.tui.app import RigmonApp
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_bundle import write_fake_bundle


def test_default_export_dir_is_the_users_data_dir() -> None:
    assert default_export_dir({"XDG_DATA_HOME": "/d"}) == Path("/d/rigmon/exports")
    assert default_export_dir({"HOME": "/home/op"}) == Path("/home/op/.local/share/rigmon/exports")


async def test_export_without_export_dir_goes_to_the_data_dir(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: RigmonApp fell back to Path.cwd(), so the quick start's export landed in the checkout.
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    bundle = write_fake_bundle(tmp_path / "in.tar.gz")
    app = RigmonApp([], replay=Replay.open(str(bundle)), refresh_s=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        await wait_for(lambda: any(n.title in ("Exported", "Export failed") for n in app._notifications),
                       timeout_s=30)
    out = tmp_path / "data" / "rigmon" / "exports"
    assert len(list(out.glob("rigmon-dash-*.tar.gz"))) == 1 and len(list(out.glob("rigmon-dash-*.svg"))) == 1
    assert list(cwd.iterdir()) == []
