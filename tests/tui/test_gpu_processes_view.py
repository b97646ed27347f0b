"""The training-run view: processes under their GPUs, throttle reasons by name, folding at 80 columns, marks."""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace
from rich.text import Text
from textual.widgets import Static

from rigmon.clock import SystemClock
from rigmon.collectors.gpu_processes import GpuProcessCollector
from rigmon.hw.nvml import open_nvml_processes
from rigmon.hw.root import HostRoot
from rigmon.schema import Frame
from rigmon.sim.job import PASSWD, SimPidNamespace
from rigmon.sim.nvml import FakeGpuProcess, FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.sim.tree import write_tree
from rigmon.tui.format import MISSING
from rigmon.tui.widgets.event_list import EventList
from rigmon.tui.widgets.gpu_process_table import (
    NOT_VISIBLE,
    NOT_VISIBLE_HOST,
    OTHER_NAMESPACE_NOTE,
    GpuProcessTable,
)
from rigmon.tui.widgets.gpu_table import GpuTable, reason_parts, vram
from tests.tui.snapshot_apps.recorded import (
    MARK_SEQ,
    build,
    ddp_frames,
    open_node,
    settle,
)
from tests.tui.test_sources import text


def test_reason_names_and_levels() -> None:
    assert reason_parts(("hw_slowdown", "hw_power_brake_slowdown", "sw_power_cap")) == [
        ("HW slowdown", "bad"), ("HW power brake", "bad"), ("SW power cap", "warn")]
    assert reason_parts(()) == [("none", "")]
    assert reason_parts(None) == [("—", "")]
    assert vram(14 * 1024**3, 16 * 1024**3) == "14.0/16.0" and vram(None, None) == "—"


def test_a_reason_bit_rigmon_does_not_know_shows_the_mask_to_look_it_up() -> None:
    assert reason_parts(("sw_power_cap", "other"), "0x0000000000001004") == [
        ("SW power cap", "warn"), ("other 0x1004", "")]
    assert reason_parts(("other",), None) == [("other", "")]  # an older agent: no mask


async def test_processes_grouped_by_gpu_and_hardware_reasons_in_the_error_style() -> None:
    app, fleet, _ = build([("v100", ddp_frames(), 22)])
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        procs = app.screen.query_one(GpuProcessTable)
        assert [k.value for k in procs.rows] == ["nvidia:0:4242", "nvidia:1:4243", "nvidia:2:4244"]
        first = procs.get_row("nvidia:0:4242")
        assert [str(c) for c in first[:4]] == ["0", "4242", "alice", "13.9 GiB"]
        assert str(first[-1]) == "/opt/conda/bin/python3 -u train.py --config configs/llama-7b-ft.yaml"
        table = app.screen.query_one(GpuTable)
        throttle = table.get_cell(next(iter(table.rows)), "throttle")
        assert isinstance(throttle, Text) and throttle.plain == "HW slowdown, HW power brake"
        bad = table.get_component_rich_style("gpu-table--bad", partial=True)
        assert all(span.style == bad for span in throttle.spans)


async def test_80_columns_fold_throttle_reasons_and_shorten_commands_without_cutting() -> None:
    app, fleet, _ = build([("v100", ddp_frames(), 22)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        table = app.screen.query_one(GpuTable)
        assert table.folded == frozenset({"throttle"})
        assert "throttle" not in [c.value for c in table.columns]
        folded = text(app.screen.query_one("#gpu-folded", Static).content, 76)  # type: ignore[arg-type]
        assert "GPU 0       throttle HW slowdown, HW power brake" in folded
        procs = app.screen.query_one(GpuProcessTable)
        assert str(procs.get_row("nvidia:0:4242")[-1]) == "python3 train.py"
        assert procs.virtual_size.width <= procs.size.width  # nothing cut, no scrolling
        assert table.virtual_size.width <= table.size.width


async def test_mark_is_listed_as_a_mark_in_the_node_events() -> None:
    app, fleet, _ = build([("v100", ddp_frames(), MARK_SEQ + 2)])
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        events = app.screen.query_one(EventList)
        marks = [e for e in events.events if e.kind == "mark"]
        assert [m.message for m in marks] == ["epoch 3 checkpoint"]
        listed = text(events.render(), 116)
        line = next(line for line in listed.splitlines() if "epoch 3 checkpoint" in line)
        assert " mark " in line  # the severity column names it a mark


async def test_a_brief_peak_over_the_limit_is_plain_and_a_far_one_amber() -> None:
    from msgspec.structs import replace

    frames = ddp_frames()
    app, fleet, _ = build([("v100", frames, 22)])
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        table = app.screen.query_one(GpuTable)
        gpu = next(g for f in frames for g in f.readings.gpus if g.state != "lost")
        warn = table.get_component_rich_style("gpu-table--warn", partial=True)
        brief = table.nvidia_cells(replace(gpu, power_w=255.0, power_peak_w=336.0, power_limit_w=300.0))["peak"]
        far = table.nvidia_cells(replace(gpu, power_w=180.0, power_peak_w=480.0, power_limit_w=300.0))["peak"]
        assert isinstance(brief, Text) and isinstance(far, Text)
        assert brief.style != warn and far.style == warn


async def test_a_process_on_two_gpus_counts_once() -> None:
    # A worker holding GPU 0 and GPU 3 (a model split over two GPUs) is one process with a row
    # under each GPU. Before: the line above the table counted its rows, "4 on 4 GPUs".
    from msgspec.structs import replace

    frames = []
    for frame in ddp_frames():
        procs = frame.readings.gpu_processes
        extra = tuple(replace(p, gpu_index=3, gpu_uuid=None) for p in procs if p.pid == 4242)
        frames.append(replace(frame, readings=replace(frame.readings, gpu_processes=procs + extra)))
    app, fleet, _ = build([("v100", frames, 22)])
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        procs = app.screen.query_one(GpuProcessTable)
        assert [k.value for k in procs.rows] == ["nvidia:0:4242", "nvidia:1:4243", "nvidia:2:4244", "nvidia:3:4242"]
        head = str(app.screen.query_one("#gpu-processes-head", Static).content)
        assert "3 on 4 GPUs" in head, head


def container_agent_note(tmp_path: Path) -> str:
    """The status the gpu_processes collector gives when the agent's /proc is a container's PID
    namespace (simulated node, fake NVML listing host PID 4242)."""
    tree = write_tree(tmp_path, {"/proc/stat": "cpu  1 2 3 4\nbtime 1699990000\n", "/etc/passwd": PASSWD})
    SimPidNamespace(container=True, agent_pid=1).write(tree)
    machine = FakeNvmlMachine(v100_sxm2_gpus(1))
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
    with serving(tmp_path, machine):
        root = HostRoot(tmp_path)
        collector = GpuProcessCollector(open_nvml_processes(root, timeout_s=10.0), root, SystemClock())
        try:
            collector.collect()
            note = collector.status_note()
        finally:
            collector.close()
    assert note is not None
    return note


def in_a_container(note: str | None, other_pid_ns: bool | None = None) -> list[Frame]:
    """The DDP job's frames as an agent in a container's PID namespace sends them: the workers with what
    NVML gives (no user, no command), and the collector's status saying why (``note``; ``None``: an
    agent that does not say) and the readings' ``agent_other_pid_ns`` (``None``: an older agent's)."""
    frames = []
    for frame in ddp_frames():
        procs = tuple(replace(p, in_namespace=False, user=None, uid=None, command=None, cmdline=None, started_at=None,
                              agent_other_pid_ns=other_pid_ns)
                      for p in frame.readings.gpu_processes)
        collectors = dict(frame.collectors)
        if "gpu_processes" in collectors and note is not None:
            collectors["gpu_processes"] = replace(collectors["gpu_processes"], error=note)
        frames.append(replace(frame, readings=replace(frame.readings, gpu_processes=procs), collectors=collectors))
    return frames


async def test_an_agent_in_another_pid_namespace_is_said_once_not_in_every_row(tmp_path: Path) -> None:
    # Before: every worker's command cell said "(not in the agent's PID namespace)", as if each
    # process were elsewhere, while it is the agent that is: the heading says it once.
    note = container_agent_note(tmp_path)
    for size, note_of in (((200, 50), note), ((80, 24), note), ((120, 40), None)):
        app, fleet, _ = build([("v100", in_a_container(note_of), 22)])
        async with app.run_test(size=size) as pilot:
            await settle(app, fleet, pilot)
            await open_node(app, next(iter(fleet.agents)), pilot)
            procs = app.screen.query_one(GpuProcessTable)
            commands = [str(procs.get_row(key)[-1]) for key in procs.rows]
            head = app.screen.query_one("#gpu-processes-head", Static)
            drawn = [strip.text.rstrip() for strip in head.render_lines(head.region.reset_offset.shrink(head.styles.gutter))]
            said = "\n".join(drawn)
            if note_of is None:
                # An agent that does not say (an older one): each process is not visible, as before.
                assert commands == [NOT_VISIBLE] * 3, commands
                assert "PID namespace" not in said, said
                continue
            assert commands == [MISSING] * 3, commands
            assert " ".join(said.split()).count(OTHER_NAMESPACE_NOTE) == 1, said
            assert "3 on 3 GPUs" in said, said
            # Under the count (wrapped there at 80 columns, not cut).
            assert len(drawn) == (2 if size[0] >= 120 else 3) and all(line.startswith(" " * 12) for line in drawn[1:])
            assert procs.virtual_size.width <= procs.size.width


async def test_the_readings_say_the_agent_is_in_another_pid_namespace_whatever_its_status_words(tmp_path: Path) -> None:
    """The dashboard knew the case only by the words of the collector's status: an agent whose note said it
    otherwise (or another note in its place) had every row say "(not in the agent's PID namespace)" again.
    The readings' ``agent_other_pid_ns`` decides; the words count only where no reading says (older agents)."""
    for note, other_pid_ns, said_once in (("command not visible: agent's /proc is a container's", True, True),
                                          (None, True, True), (container_agent_note(tmp_path), False, False)):
        app, fleet, _ = build([("v100", in_a_container(note, other_pid_ns), 22)])
        async with app.run_test(size=(200, 50)) as pilot:
            await settle(app, fleet, pilot)
            await open_node(app, next(iter(fleet.agents)), pilot)
            procs = app.screen.query_one(GpuProcessTable)
            commands = [str(procs.get_row(key)[-1]) for key in procs.rows]
            head = app.screen.query_one("#gpu-processes-head", Static)
            said = " ".join(" ".join(strip.text for strip in head.render_lines(head.region.reset_offset)).split())
            # An agent in the host's namespace that cannot see a PID: hidepid, or the process just exited. The
            # cell said "(not in the agent's PID namespace)", sending the operator to --pid=host for nothing.
            assert commands == ([MISSING] if said_once else [NOT_VISIBLE_HOST]) * 3, commands
            assert (OTHER_NAMESPACE_NOTE in said) is said_once, said
            assert "PID namespace" not in NOT_VISIBLE_HOST + NOT_VISIBLE


async def test_the_processes_line_and_the_rows_are_of_the_same_frame() -> None:
    """At 200x50 the line said "58.6 GiB of GPU memory" over a single process row of 81.6 GiB: the line
    was drawn with a frame, the rows a refresh later, so a frame whose memory moved showed both frames."""
    from textual.coordinate import Coordinate

    from rigmon.tui import format as fmt
    from rigmon.tui.widgets.gpu_group import GpuGroup
    from rigmon.tui.widgets.gpu_process_table import process_key

    frames = ddp_frames()
    app, fleet, _ = build([("v100", frames, 22)])
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        group = app.screen.query_one(GpuGroup)
        assert group.frame is not None
        procs = tuple(replace(p, gpu_mem_bytes=(p.gpu_mem_bytes or 0) + 23 * 1024**3)
                      for p in group.frame.readings.gpu_processes)
        gpus = tuple(g if g.mem_used_bytes is None else replace(g, mem_used_bytes=g.mem_used_bytes - 1024**3)
                     for g in group.frame.readings.gpus)
        group.frame = replace(group.frame, readings=replace(group.frame.readings, gpu_processes=procs, gpus=gpus))
        group.redraw()
        # No refresh in between: the next screen drawn holds this frame, above and in the rows.
        held = sum(p.gpu_mem_bytes or 0 for p in procs)
        head = str(app.screen.query_one("#gpu-processes-head", Static).content)
        assert f"{fmt.size(held)} of GPU memory" in head, head
        table = app.screen.query_one(GpuProcessTable)
        assert [str(table.get_cell(process_key(p), "mem")) for p in procs] == [fmt.size(p.gpu_mem_bytes)
                                                                               for p in procs]
        # The GPUs' rows above too: each GPU's memory in use is of the same frame.
        gpu_table = app.screen.query_one(GpuTable)
        assert [str(gpu_table.get_cell_at(Coordinate(i, gpu_table.get_column_index("vram"))))
                for i in range(len(gpus))] == [vram(g.mem_used_bytes, g.mem_total_bytes) for g in gpus]


async def test_at_80_columns_a_long_command_and_user_wrap_in_their_cells_instead_of_running_off_the_box() -> None:
    # `python3 -m vllm.entrypoints.openai.api_server` by a long LDAP name: the table was 96 cells wide in a box
    # of 72 at 80 columns, the command cut at the box's edge with no way to scroll to it.
    from textual.geometry import Region

    command = "python3 -m vllm.entrypoints.openai.api_server"
    frames = []
    for frame in ddp_frames():
        procs = tuple(replace(p, user="christopher.montgomery", command=command)
                      for p in frame.readings.gpu_processes)
        frames.append(replace(frame, readings=replace(frame.readings, gpu_processes=procs)))
    app, fleet, _ = build([("v100", frames, 22)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        procs = app.screen.query_one(GpuProcessTable)
        await pilot.pause()
        assert procs.virtual_size.width <= procs.size.width, (procs.virtual_size, procs.size)
        lines = ["".join(s.text for s in strip).rstrip()
                 for strip in procs.render_lines(Region(0, 0, procs.size.width, procs.virtual_size.height))]
        # The first process's row: its command wrapped over three lines of its own column, the user whole.
        at = lines[0].index("command")
        assert " ".join(line[at:].strip() for line in lines[1:4]) == "python3 -m vllm.entrypoints.op enai.api_server"
        assert lines[1].split()[:3] == ["0", "4242", "christopher.montgomery"], lines


async def test_the_memory_total_says_how_many_processes_it_leaves_out() -> None:
    # A worker hung on a lost GPU keeps its row with no memory figure: the line said "41.7 GiB of GPU memory"
    # over four rows, as if the four held that together.
    frames = []
    for frame in ddp_frames():
        procs = tuple(replace(p, gpu_mem_bytes=None) if p.pid == 4244 else p for p in frame.readings.gpu_processes)
        frames.append(replace(frame, readings=replace(frame.readings, gpu_processes=procs)))
    app, fleet, _ = build([("v100", frames, 22)])
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        head = str(app.screen.query_one("#gpu-processes-head", Static).content)
        assert head.endswith("3 on 3 GPUs, 27.8 GiB of GPU memory (1 process's not known)"), head


@pytest.mark.parametrize(("collector", "box"), [("gpu_processes", "processes"), ("gpu", "GPUs")])
async def test_readings_of_a_hung_collector_are_said_to_be_as_last_read(collector: str, box: str) -> None:
    # NVML hung in the driver: the agent keeps the collector's last readings while the call hangs, and the node
    # screen showed them as current: "4 on 4 GPUs, 55.6 GiB" listing a job that ended since, the GPUs' last power,
    # clocks and state, with no word.
    from rigmon.schema import CollectorStatus

    hung = CollectorStatus(state="hung", ok=False, error="no answer for 12.0 s")
    frames = [replace(f, collectors={**f.collectors, collector: hung}) for f in ddp_frames()]
    app, fleet, _ = build([("v100", frames, 22)])
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        if box == "processes":
            shown = str(app.screen.query_one("#gpu-processes-head", Static).content)
        else:
            shown = text(app.screen.query_one("GpuGroup #body", Static).content, 196)  # type: ignore[arg-type]
        assert f"as last read: collector {collector} hung (no answer for 12.0 s)" in shown, shown
