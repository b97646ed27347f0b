"""An AMD GPU's power history follows its PCI address, not its DRM card number: the
card numbers follow the drivers' probe order and may name another GPU after a reboot."""

from __future__ import annotations

import msgspec

from rigmon.cluster.chart import charts_for, frame_values
from rigmon.cluster.held_history import held_history
from rigmon.cluster.node_store import NodeStore
from rigmon.schema import Frame
from rigmon.summary import detail_values
from tests.tui.snapshot_apps.fake_agent import FakeClock
from tests.tui.snapshot_apps.record_frames import load_frames


def renumbered(frames: list[Frame], card: str) -> list[Frame]:
    """``frames`` as after a reboot that made their AMD GPU ``card``."""
    out = []
    for frame in frames:
        amds = tuple(msgspec.structs.replace(a, card=card) for a in frame.readings.amd_gpus)
        out.append(msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, amd_gpus=amds)))
    return out


def charted(frames: list[Frame]) -> list[str]:
    """Every series the node's charts ask for."""
    return [name for chart in charts_for(frame_values(frames[-1])) for name in chart.series]


def test_an_amd_gpus_power_history_goes_on_when_a_reboot_renumbers_its_card() -> None:
    frames = load_frames("strix-amd-gpu")
    half = len(frames) // 2
    before, after = frames[:half], renumbered(frames[half:], "card1")
    [gpu] = frames[0].readings.amd_gpus
    assert gpu.card == "card0" and gpu.pci_bus_id is not None
    assert {n for n in detail_values(before[-1].readings) if n.startswith("amd[")} == \
        {n for n in detail_values(after[-1].readings) if n.startswith("amd[")} == {f"amd[{gpu.pci_bus_id}].power_w"}
    store = NodeStore("http://n:1", "http://n:1", FakeClock())
    store.add_frames(before + after)
    # The chart of the GPU draws its whole hour, the frames before the reboot too, under its PCI address
    # as the agent's journal names it.
    name = f"amd_gpus[{gpu.pci_bus_id}].power_w"
    assert name in charted(after)
    held = held_history(store, frames[0].taken_at, frames[-1].taken_at, [name], "agent unreachable")
    assert held is not None
    drawn = held.history.series[name].max
    assert len(drawn) == len(frames)
    assert max(drawn) == max(a.power_w for f in frames for a in f.readings.amd_gpus if a.power_w is not None)


def test_an_agent_that_keyed_the_power_by_card_is_still_charted() -> None:
    # Summaries from an agent of the previous release name the series amd[card0].power_w.
    frames = load_frames("strix-amd-gpu")
    store = NodeStore("http://n:1", "http://n:1", FakeClock())
    store.add_frames(frames)
    history = store.history
    history.details = {("amd[card0].power_w" if k.startswith("amd[") else k): v for k, v in history.details.items()}
    name = f"amd_gpus[{frames[-1].readings.amd_gpus[0].pci_bus_id}].power_w"
    held = held_history(store, frames[0].taken_at, frames[-1].taken_at, [name], "why")
    assert held is not None and len(held.history.series[name].max) == len(frames)
