"""Text that is not UTF-8 in a frame (a directory entry's name in other bytes): mended once,
before any reader sees the frame, so /v1/latest, streams and the journal keep working."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rigmon.agent.frame_json import frame_json, valid_text
from rigmon.agent.journal import JournalWriter
from rigmon.agent.journal.reader import JournalReader
from rigmon.agent.metrics import FrameCollector, make_registry
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


async def sampled_frames(root: Path, count: int, name: str = "raid",
                         metrics: FrameCollector | None = None) -> list[Frame]:
    """``count`` frames of the collector ``name`` reading ``root`` through a real sampler (and
    ``metrics`` fed as the agent wires /metrics)."""
    config = AgentConfig(agent=AgentSection(node="n1", root=str(root)))
    collector = REGISTRY[name](CollectorContext(root=HostRoot(root), clock=SystemClock(), config=config))
    sampler = Sampler("n1", "run1", {name: collector}, 0.05, 2.0, SystemClock())
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    if metrics is not None:
        sampler.add_listener(metrics.observe)
    task = asyncio.create_task(sampler.run())
    try:
        for _ in range(400):
            if len(frames) >= count:
                break
            await asyncio.sleep(0.01)
    finally:
        sampler.stop()
        await task
        collector.close()
    return frames


async def test_an_array_named_in_other_bytes_reaches_every_reader_as_text(odd_tree: Path, tmp_path: Path) -> None:
    frames = await sampled_frames(odd_tree, 3)
    assert len(frames) >= 3
    # The raid collector names it with the bad byte as the text \xf6 (rigmon.hw.names.text_name).
    assert [a.md_name for a in frames[-1].readings.raid] == ["mirr\\xf6r"]
    assert all(b'"md_name":"mirr\\\\xf6r"' in frame_json(f) for f in frames)
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


def test_text_mended_in_every_frame_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    # Collectors name devices as text (rigmon.hw.names); text any other reading still holds in
    # other bytes is mended in every frame, and said once while the frames hold the same.
    caplog.set_level(logging.WARNING, logger="rigmon.agent.frame_json")
    for seq in (1, 2, 3):
        valid_text(Frame(schema=1, node="n-log-once", run_id="r\udcf6", seq=seq, taken_at=1.0, agent_start=1.0,
                         collectors={}, readings=Readings()))
    assert len([r for r in caplog.records if "not UTF-8" in r.getMessage()]) == 1


@pytest.fixture
def odd_rdma_tree(tmp_path: Path) -> Path:
    """An RDMA device and one of its driver counters named in bytes that are not UTF-8: directory
    entries, which become /metrics label values (``device``, ``counter``)."""
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    (port / "counters").mkdir(parents=True)
    (port / "hw_counters").mkdir()
    (port / "state").write_text("4: ACTIVE\n")
    (port / "rate").write_text("100 Gb/sec (4X EDR)\n")
    (port / "counters" / "symbol_error").write_text("0\n")
    with open(os.path.join(os.fsencode(port / "hw_counters"), b"out_of_b\xfcffer"), "w") as fh:
        fh.write("3\n")
    os.rename(os.fsencode(tmp_path / "sys/class/infiniband/mlx5_0"),
              os.fsencode(tmp_path / "sys/class/infiniband") + b"/mlx5_\xe90")
    return tmp_path


async def test_metrics_of_a_node_with_a_name_in_other_bytes_are_served(
        odd_rdma_tree: Path, caplog: pytest.LogCaptureFixture) -> None:
    # prometheus_client cannot encode a lone surrogate in a label: one such name would fail the whole
    # node's /metrics (read as RigmonAgentDown). The collector names the device and the counter as
    # text (the bad byte as \xNN), so the frame holds nothing to mend and nothing is logged.
    from prometheus_client import generate_latest

    frames: list[Frame] = []
    metrics = FrameCollector(lambda: frames[-1] if frames else None)
    caplog.set_level(logging.WARNING, logger="rigmon.agent.frame_json")
    frames.extend(await sampled_frames(odd_rdma_tree, 4, "infiniband", metrics))
    text = generate_latest(make_registry(metrics)).decode()
    # The exposition format escapes a label's backslash: mlx5_\xe90 is written mlx5_\\xe90.
    assert 'rigmon_infiniband_hw_value_total{counter="out_of_b\\\\xfcffer",device="mlx5_\\\\xe90"' in text
    promtool = shutil.which("promtool")
    if promtool is not None:
        out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
    mended = [r for r in caplog.records if "not UTF-8" in r.getMessage()]
    assert len(frames) >= 4 and not mended


async def test_interfaces_differing_only_in_bad_bytes_stay_two_series(tmp_path: Path) -> None:
    # Mended to U+FFFD, eth\xf6 and eth\xfc were one name in the frame, one journal series and a
    # duplicate /metrics sample (promtool refuses it); the host collector names them as text apart.
    from prometheus_client import generate_latest

    from tests.collectors.test_host_net import _odd_nics

    _odd_nics(tmp_path, {b"eth\xf6": (1000, b"10000"), b"eth\xfc": (2000, b"25000")})
    frames: list[Frame] = []
    metrics = FrameCollector(lambda: frames[-1] if frames else None)
    frames.extend(await sampled_frames(tmp_path, 2, "host", metrics))
    assert [(n.name, n.speed_mbps) for n in frames[-1].readings.net] == [("eth\\xf6", 10000), ("eth\\xfc", 25000)]
    assert all(b'"name":"eth\\\\xf6"' in frame_json(f) for f in frames)
    text = generate_latest(make_registry(metrics)).decode()
    # The exposition format escapes a label's backslash: eth\xf6 is written eth\\xf6.
    assert 'rigmon_network_rx_bytes_total{interface="eth\\\\xf6",node="n1"} 1000.0' in text
    assert 'rigmon_network_rx_bytes_total{interface="eth\\\\xfc",node="n1"} 2000.0' in text
    promtool = shutil.which("promtool")
    if promtool is not None:
        out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
