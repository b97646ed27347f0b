"""The GPU box's empty event list names every kind of event that box lists."""

from __future__ import annotations

from textual.widgets import Static

from rigmon.tui.widgets.gpu_group import GPU_EVENT_KINDS, GpuGroup
from tests.tui.snapshot_apps.record_frames import load_frames
from tests.tui.snapshot_apps.recorded import build, open_node, settle
from tests.tui.test_sources import text

#: The words of the empty list that stand for each listed kind.
WORDS = {"xid": "Xid", "gpu_lost": "lost-GPU", "gpu_off_bus": "lost-GPU", "pcie_aer": "PCIe AER",
         "gpu_process_exited": "exit", "gpu_process_left": "leave"}


async def test_the_empty_gpu_event_list_names_every_kind_it_would_list() -> None:
    assert set(WORDS) == GPU_EVENT_KINDS  # a kind listed there is named here
    # Before frame 20's Xid the V100 node has no GPU event.
    app, fleet, _ = build([("v100", load_frames("v100-gpu-lost-rail-sag")[:15], 15)])
    async with app.run_test(size=(80, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        group = app.screen.query_one(GpuGroup)
        empty = text(group.query_one("#gpu-events", Static).content, group.content_size.width)  # type: ignore[arg-type]
        assert empty.startswith("no ") and len(empty.splitlines()) == 1, empty
        for kind, word in WORDS.items():
            assert word in empty, (kind, empty)
