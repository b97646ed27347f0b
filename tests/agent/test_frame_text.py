"""Text that is not UTF-8 in a frame (a directory entry's name in other bytes): mended once,
before any reader sees the frame, so /v1/latest, streams and the journal keep working."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from rigmon.agent.frame_json import frame_json, valid_text
from rigmon.agent.journal import JournalWriter
from rigmon.agent.journal.reader import JournalReader
from rigmon.agent.sampler import Sampler
from rigmon.clock import SystemClock
from rigmon.collectors import REGISTRY
from rigmon.collectors.base import CollectorContext
from rigmon.config import AgentConfig, AgentSection, JournalSection
from rigmon.hw.root import HostRoot
from rigmon.schema import Frame, Readings
from rigmon.sim.rig import SimRig, get_scenario


@pytest.fixture
def odd_tree(tmp_path: Path) -> Path:
    """A node whose md array was named in bytes that are not UTF-8 (``mdadm --create /dev/md/<name>``
    takes any bytes): its ``/dev/md`` link is the only place the name is, and a directory entry."""
    rig = SimRig(get_scenario("md-degraded"), 1, tmp_path / "rig")
    rig.step(5.0)
    rig.close()
    root = rig.nodes[0].tree.root
    md = os.fsencode(root / "dev" / "md")
    os.rename(os.path.join(md, b"mirror"), os.path.join(md, b"mirr\xf6r"))  # Latin-1 for "mirrör"
    return root


async def sampled_frames(root: Path, count: int) -> list[Frame]:
    config = AgentConfig(agent=AgentSection(node="n1", root=str(root)))
    raid = REGISTRY["raid"](CollectorContext(root=HostRoot(root), clock=SystemClock(), config=config))
    sampler = Sampler("n1", "run1", {"raid": raid}, 0.05, 2.0, SystemClock())
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        for _ in range(400):
            if len(frames) >= count:
                break
            await asyncio.sleep(0.01)
    finally:
        sampler.stop()
        await task
        raid.close()
    return frames


async def test_an_array_named_in_other_bytes_reaches_every_reader_as_text(odd_tree: Path, tmp_path: Path) -> None:
    frames = await sampled_frames(odd_tree, 3)
    assert len(frames) >= 3
    assert [a.md_name for a in frames[-1].readings.raid] == ["mirr\ufffdr"]  # the bad byte is U+FFFD
    assert all(b"mirr\xef\xbf\xbdr" in frame_json(f) for f in frames)
    writer = JournalWriter(tmp_path / "state", SystemClock(), JournalSection(commit_interval_s=0.01), "run1", "n1",
                           frames[0].taken_at)
    writer.start(lambda *args: None)
    for frame in frames:
        writer.submit(frame)
    writer.close()
    assert writer.frames_not_written == 0 and writer.frames_written == len(frames)
    with JournalReader(tmp_path / "state") as reader:
        assert reader.count_frames(frames[0].taken_at - 1, frames[-1].taken_at + 1) == len(frames)


def test_a_frame_that_encodes_is_returned_as_it_is_and_one_that_does_not_is_mended() -> None:
    good = Frame(schema=1, node="n1", run_id="r", seq=1, taken_at=1.0, agent_start=1.0, collectors={},
                 readings=Readings())
    assert valid_text(good) is good
    bad = Frame(schema=1, node="n\udcff1", run_id="r\ud800", seq=2, taken_at=1.0, agent_start=1.0, collectors={},
                readings=Readings())
    mended = valid_text(bad)
    assert (mended.node, mended.run_id) == ("n\ufffd1", "r\ufffd\ufffd\ufffd")
    assert frame_json(mended)
