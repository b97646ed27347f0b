"""The notice a replay opens with says how the bundle stops: cut short (it ends early) or damaged."""

from __future__ import annotations

from pathlib import Path

from rigmon.cluster.replay import Replay
from rigmon.tui.app import RigmonApp
from tests.tui.snapshot_apps.fake_bundle import write_fake_bundle

SIZE = (120, 40)


def flipped(tmp_path: Path) -> Path:
    """The fake bundle with one bit flipped in its last node's files: its gzip CRC check fails."""
    data = bytearray(write_fake_bundle(tmp_path / "good.tar.gz").read_bytes())
    data[data.rindex(b"node03-run1") + 2] ^= 0x01
    path = tmp_path / "flipped.tar.gz"
    path.write_bytes(bytes(data))
    return path


def cut(tmp_path: Path) -> Path:
    """The fake bundle with its last quarter gone (an interrupted download)."""
    raw = write_fake_bundle(tmp_path / "good.tar.gz").read_bytes()
    path = tmp_path / "cut.tar.gz"
    path.write_bytes(raw[:len(raw) * 3 // 4])
    return path


async def notices(path: Path) -> list[tuple[str, str]]:
    app = RigmonApp([], replay=Replay.open(path), refresh_s=3600)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        return [(n.title, n.message) for n in app._notifications]


async def test_a_damaged_bundle_is_not_titled_cut_short(tmp_path: Path) -> None:
    said = [(title, message) for title, message in await notices(flipped(tmp_path)) if "replaying" in message]
    assert len(said) == 1
    title, message = said[0]
    assert message.startswith("the bundle is damaged after ")
    assert title == "Bundle damaged"


async def test_a_bundle_cut_short_is_titled_so(tmp_path: Path) -> None:
    said = [(title, message) for title, message in await notices(cut(tmp_path)) if "replaying" in message]
    assert len(said) == 1
    title, message = said[0]
    assert message.startswith("the bundle is cut short after ")
    assert title == "Bundle cut short"
