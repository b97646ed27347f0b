"""Pilot tests of every source on the dashboard, from recorded frames of real collectors on simulator trees."""

from __future__ import annotations

import io

from msgspec.structs import replace
from rich.console import Console, RenderableType
from textual.widgets import Static

from rigmon.schema import Frame, InfinibandPortReading, NvLinkReading
from rigmon.tui.app import RigmonApp
from rigmon.tui.widgets.event_list import EventList
from rigmon.tui.widgets.gpu_group import GpuGroup
from rigmon.tui.widgets.gpu_table import GpuTable
from rigmon.tui.widgets.link_group import LinkGroup
from rigmon.tui.widgets.node_row import NodeRow
from rigmon.tui.widgets.node_status import NodeStatus
from rigmon.tui.widgets.rail_group import RailGroup, short_port
from rigmon.tui.widgets.rdma_group import RdmaGroup
from rigmon.tui.widgets.source_group import SourceGroup
from rigmon.tui.widgets.storage_group import StorageGroup
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.record_frames import load_frames
from tests.tui.snapshot_apps.recorded import build, open_node, settle, v100_frames

SIZE = (120, 40)


def text(renderable: RenderableType, width: int = 120) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def body_text(group: SourceGroup) -> str:
    return text(group.query_one("#body", Static).content)  # type: ignore[arg-type]


def row_text(app: RigmonApp, name: str) -> str:
    row = next(r for r in app.screen.query(NodeRow) if r.view is not None and r.view.name == name)
    return text(row.render(), row.size.width)


async def test_sag_minimum_shows_to_the_millivolt_on_cluster_and_node_screens() -> None:
    app, fleet, _ = build([("v100", v100_frames(), 60)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        # The cluster row and the node screen's rail trend show the lowest rail minimum of the
        # last 60 s (the sag to 11.255 V that the critical alarm named), the node screen's window
        # line the newest frame's (see test_rail_worst).
        first = row_text(app, "v100").splitlines()[0]
        assert "11.255 V" in first and "3/4" in first
        await open_node(app, next(iter(fleet.agents)), pilot)
        rail = app.screen.query_one(RailGroup)
        lines = body_text(rail).splitlines()
        assert "11.255 V" in lines[0] and lines[0].split()[:3] == ["rail", "min", "60s"]
        assert "11.712 V" in lines[1]
        assert "min 11.384 V" in lines[2]
        bad = rail.style_of("bad")
        assert "sag" in body_text(rail) and bad.bold


async def test_lost_gpu_row_is_marked_and_rows_are_updated_in_place() -> None:
    frames = load_frames("v100-gpu-lost-rail-sag")
    app, fleet, _ = build([("v100", frames, 15)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        url = next(iter(fleet.agents))
        await open_node(app, url, pilot)
        table = app.screen.query_one(GpuTable)
        uuids = [g.uuid for g in frames[0].readings.gpus]
        assert [k.value for k in table.rows] == uuids
        before = {k.value: table.get_row(k) for k in table.rows}
        assert all(str(cells[2]) == "ok" for cells in before.values())
        # GPU 3 falls off the bus: its row stays, in the lost style; the others change in place.
        fleet.agents[url].publish(45)
        store = app.cluster.nodes[url]
        await wait_for(lambda: store.latest is not None and store.latest.seq == 60)
        app.refresh_screen()
        await pilot.pause()
        await pilot.pause()
        assert [k.value for k in table.rows] == uuids
        lost = table.get_row(uuids[3])
        assert str(lost[2]) == "LOST"
        assert lost[2].style == table.get_component_rich_style("gpu-table--lost", partial=True)  # type: ignore[union-attr]
        assert table.get_component_rich_style("gpu-table--lost", partial=True).bold
        assert str(table.get_row(uuids[0])[3]) != str(before[uuids[0]][3])
        group = app.screen.query_one(GpuGroup)
        assert "1 lost: GPU 3 (0000:1d:00.0)" in body_text(group)
        events = text(group.query_one("#gpu-events", Static).content)  # type: ignore[arg-type]
        assert "gpu_lost" in events and "xid" in events


async def test_degraded_link_and_lagging_array_stand_out() -> None:
    app, fleet, _ = build([("encl", "enclosure-link-10g-array-lagging", 45), ("model", "two-raid0-model-load", 30)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        rows = list(app.screen.query(NodeRow))
        assert [r.view.name for r in rows if r.view] == ["encl", "model"]
        assert "2/3" in row_text(app, "encl").splitlines()[0]
        assert "3/3" in row_text(app, "model").splitlines()[0]
        await open_node(app, rows[0].view.key, pilot)  # type: ignore[union-attr]
        links = body_text(app.screen.query_one(LinkGroup))
        degraded = next(line for line in links.splitlines() if line.lstrip().startswith("0-1 "))
        assert "2x10 = 20 Gb/s" in degraded and "degraded: 20 Gb/s below expected" in degraded
        storage = body_text(app.screen.query_one(StorageGroup))
        md127 = next(line for line in storage.splitlines() if "md127" in line)
        assert "67%" in md127 and "raid0" in md127
        assert "gen4 x4 of gen4 x4" in storage


async def test_degraded_array_members_and_absent_sources() -> None:
    app, fleet, _ = build([("raid", "raid1-member-failed-recovering", 25)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        storage = body_text(app.screen.query_one(StorageGroup))
        assert "degraded" in storage and "faulty" in storage
        gpus = app.screen.query_one(GpuGroup)
        assert body_text(gpus).splitlines()[0] == "not present"
        assert not gpus.query_one(GpuTable).display


async def test_amd_gpus_share_the_table() -> None:
    frames = load_frames("strix-amd-gpu")
    app, fleet, _ = build([("strix", frames, 15)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        assert "1/1" in row_text(app, "strix").splitlines()[0]
        await open_node(app, next(iter(fleet.agents)), pilot)
        table = app.screen.query_one(GpuTable)
        # Keyed by PCI address: the DRM card number may be another GPU's after a reboot.
        bus_id = frames[0].readings.amd_gpus[0].pci_bus_id
        assert [k.value for k in table.rows] == [f"amd:{bus_id}"]


async def test_an_amd_gpus_row_keeps_its_power_trend_when_a_reboot_renumbers_its_card() -> None:
    frames = load_frames("strix-amd-gpu")
    half = len(frames) // 2
    after = [replace(f, readings=replace(f.readings, amd_gpus=tuple(replace(a, card="card1")
                                                                     for a in f.readings.amd_gpus)))
             for f in frames[half:]]
    app, fleet, _ = build([("strix", frames[:half] + after, len(frames))])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        table = app.screen.query_one(GpuTable)
        [gpu] = table.amd_gpus
        assert gpu.card == "card1"
        # The trend is the GPU's since before the reboot, not card1's few frames since.
        [trend] = [v for k, v in table.power_trends.items() if k.startswith("amd[")]
        assert len(trend) == len(frames)
        assert table._amd_series(gpu) == f"amd[{gpu.pci_bus_id}].power_w"


async def test_an_amd_apus_gtt_shows_beside_its_vram_carve_out() -> None:
    # A Strix Halo box's job holds its memory in GTT: the VRAM column alone said 0.4 of 0.5 GiB.
    frames = load_frames("strix-amd-gpu")
    apu = [replace(f, readings=replace(f.readings, amd_gpus=tuple(
        replace(a, vram_total_bytes=512 * 1024**2, vram_used_bytes=400 * 1024**2, gtt_total_bytes=110 * 1024**3,
                gtt_used_bytes=60 * 1024**3) for a in f.readings.amd_gpus))) for f in frames]
    app, fleet, _ = build([("strix", apu, len(apu))])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        table = app.screen.query_one(GpuTable)
        [key] = list(table.rows)
        assert str(table.get_cell(key, "vram")) == "0.4/0.5 +60.0 GTT"


async def test_stalled_thunderbolt_net_is_marked() -> None:
    frames = load_frames("strix-usb4-thunderbolt-net")
    last = frames[-1]
    stalled = tuple(replace(n, stalled=True) if n.kind == "thunderbolt-net" else n for n in last.readings.net)
    frames = frames[:-1] + [replace(last, readings=replace(last.readings, net=stalled))]
    app, fleet, _ = build([("strix", frames, len(frames))])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        links = body_text(app.screen.query_one(LinkGroup))
        assert "STALLED" in next(line for line in links.splitlines() if "thunderbolt0" in line)


async def test_array_and_member_names_stay_whole_at_any_width() -> None:
    # 40 frames in, the mirror is recovering: the longest health text of the fixture.
    app, fleet, _ = build([("raid", "raid1-member-failed-recovering", 40)])
    async with app.run_test(size=(80, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        for width in (80, 100, 112, 120, 200):
            await pilot.resize_terminal(width, 40)
            await pilot.pause()
            await pilot.pause()
            group = app.screen.query_one(StorageGroup)
            lines = text(group.query_one("#body", Static).content, group.content_size.width).splitlines()  # type: ignore[arg-type]
            array = next(line for line in lines if line.lstrip().startswith("md127"))
            assert "recovering 7" not in array and "recovering" in array, (width, array)
            for member in ("└ nvme0n1[0]", "└ nvme2n1[1]"):
                assert any(member in line for line in lines), (width, lines)
            assert not any("…" in line for line in lines), (width, lines)


async def test_node_status_keeps_every_label_whole_at_80_columns() -> None:
    frames = [replace(f, run_id="0fd2bf965a2948b6e0a4c2ef98cc4f17") for f in load_frames("strix-amd-gpu")[:15]]
    app, fleet, _ = build([("strix", frames, 15)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        status = app.screen.query_one(NodeStatus)
        assert status.info is not None
        status.info = replace(status.info, run_id="0fd2bf965a2948b6e0a4c2ef98cc4f17")
        await pilot.pause()
        shown = text(status.render(), status.content_size.width)
        assert "…" not in shown
        for label in ("node", "agent", "state", "last data", "run", "seq", "restarts", "frames lost"):
            assert label in shown
        assert "0fd2bf965a2948b6e0a4c2ef98cc4f17 (rigmon" in shown
        # At 200 columns the same figures sit in two label/value pairs per line.
        await pilot.resize_terminal(200, 40)
        await pilot.pause()
        wide = text(status.render(), status.content_size.width).splitlines()
        assert wide[3].split()[:2] == ["restarts", "0"] and "frames lost" in wide[3]


async def test_node_screen_lists_an_xid_once_with_both_sources() -> None:
    app, fleet, _ = build([("v100", v100_frames(), 60)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        url = next(iter(fleet.agents))
        raw = [e for e in app.cluster.nodes[url].events if e.kind == "xid"]
        assert {e.data["source"] for e in raw} == {"nvml", "kmsg"}  # the store keeps both reports
        await open_node(app, url, pilot)
        listed = [e for e in app.screen.query_one(EventList).events if e.kind == "xid"]
        assert len(listed) == 1 and listed[0].message.endswith("(NVML and kernel log)")
        gpu_events = text(app.screen.query_one(GpuGroup).query_one("#gpu-events", Static).content)  # type: ignore[arg-type]
        assert gpu_events.count("Xid 79 on GPU 3") == 1 and "NVML and kernel log" in gpu_events


def test_short_port_keeps_the_part_of_a_by_id_name_that_tells_adapters_apart() -> None:
    assert short_port("/dev/serial/by-id/usb-Raspberry_Pi_Pico_E6614103E7452D2F-if00") == \
        "Raspberry_Pi_Pico_E6614103E7452D2F"
    assert short_port("/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A50285BI-if00-port0") == "FTDI_FT232R_USB_UART_A50285BI"
    assert short_port("/dev/serial/by-id/pci-1a86_USB_Serial-if00") == "pci-1a86_USB_Serial"
    assert short_port("/dev/ttyACM0") == "/dev/ttyACM0"


PICO_PORT = "/dev/serial/by-id/usb-Raspberry_Pi_Pico_E6614103E7452D2F-if00"


async def test_rail_facts_fit_80_columns_one_a_line_and_two_a_line_when_wide() -> None:
    frames = v100_frames()
    last = frames[-1]
    assert last.readings.psu_rail is not None
    rail = replace(last.readings.psu_rail, port=PICO_PORT, connected=False)
    frames[-1] = replace(last, readings=replace(last.readings, psu_rail=rail))
    app, fleet, _ = build([("v100", frames, 60)])
    async with app.run_test(size=(80, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        group = app.screen.query_one(RailGroup)
        width = group.content_size.width
        lines = text(group.query_one("#body", Static).content, width).splitlines()  # type: ignore[arg-type]
        labels = [line.split()[0] for line in lines if line.strip()]
        # One fact a line, each whole on its line: no value wrapped onto a line of its own.
        for label in ("window", "current", "channels", "flags", "ADC", "envelope", "lines", "dropped", "device",
                      "reconnects"):
            assert label in labels, (label, lines)
        window = next(line for line in lines if line.startswith("window"))
        assert window.split()[1:] == ["min", "11.384", "V", "mean", "11.712", "V", "max", "11.790", "V"]
        adc = next(line for line in lines if line.startswith("ADC"))
        assert adc.split()[1:] == ["Raspberry_Pi_Pico_E6614103E7452D2F", "rm1", "disconnected"]
        assert not any("…" in line for line in lines), lines
        # The path detail wraps under the figure, not back to the label column.
        path = next(i for i, line in enumerate(lines) if line.startswith("path"))
        assert lines[path + 1].startswith(" " * 12 + "vpsu-v two point")
        assert lines[path + 2].startswith(" " * 12), lines[path + 2]
        await pilot.resize_terminal(200, 40)
        await pilot.pause()
        await pilot.pause()
        width = group.content_size.width
        lines = text(group.query_one("#body", Static).content, width).splitlines()  # type: ignore[arg-type]
        adc = next(line for line in lines if line.startswith("ADC"))
        assert f"{PICO_PORT} rm1 disconnected" in adc and "envelope" in adc
        assert "current" in next(line for line in lines if line.startswith("window"))


async def test_collector_errors_are_shown_as_written_not_as_markup() -> None:
    from rigmon.schema import CollectorStatus
    from rigmon.tui.widgets.collector_health import CollectorHealth

    app, fleet, _ = build([("v100", v100_frames(), 60)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        health = app.screen.query_one(CollectorHealth)
        health.collectors = {"psu_hwmon": CollectorStatus(state="absent", ok=True, error="[psu.hwmon] disabled"),
                             "raid": CollectorStatus(state="error", ok=False, error="bad [/bold] line")}
        shown = text(health.render())
    assert "[psu.hwmon] disabled" in shown and "bad [/bold] line" in shown


async def test_rdma_ports_box_shows_a_slow_port_and_a_free_one() -> None:
    slow = InfinibandPortReading(
        name="mlx5_0/1", device="mlx5_0", port=1, link_layer="Ethernet", state="ACTIVE", state_id=4,
        phys_state="LinkUp", physical_state_id=5, rate_gbps=25.0, expected_gbps=100.0, expected_source="best_seen",
        link_state="degraded", degraded_reason="25 Gb/s below expected 100 Gb/s", errors_total=17, errors_per_s=2.0,
        link_downed_total=1, port_data_received_bytes_per_s=1.1e9, port_data_transmitted_bytes_per_s=1.0e9)
    free = InfinibandPortReading(name="mlx5_1/1", device="mlx5_1", port=1, link_layer="InfiniBand", state="DOWN",
                                 state_id=1, phys_state="Polling", physical_state_id=2, link_state="unused")
    frames = load_frames("strix-usb4-thunderbolt-net")
    frames = [replace(f, readings=replace(f.readings, infiniband=(slow, free))) for f in frames]
    app, fleet, _ = build([("strix", frames, len(frames))])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        lines = body_text(app.screen.query_one(RdmaGroup)).splitlines()
        row = next(line for line in lines if "mlx5_0/1" in line)
        assert "RoCE" in row and "25 Gb/s" in row and "17" in row
        assert "degraded: 25 Gb/s below expected" in row
        assert "DOWN (Polling), unused" in next(line for line in lines if "mlx5_1/1" in line)


async def test_nothing_is_drawn_right_of_the_boxes_at_80x24() -> None:
    """The node screen scrolls at 80x24; its scrollbar's thumb ends were eighth-cell blocks
    (``▁▂▅``) beside the boxes' borders, read as stray sparkline bars. Whole cells: blanks."""
    from textual.containers import VerticalScroll

    app, fleet, _ = build([("encl", "enclosure-link-10g-array-lagging", 45)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        body = app.screen.query_one("#node-body", VerticalScroll)
        assert body.max_scroll_y > 20  # it scrolls: the scrollbar is there
        seen = []
        for y in range(0, body.max_scroll_y + 1, 3):
            body.scroll_to(y=y, animate=False, immediate=True)
            await pilot.pause()
            lines = ["".join(s.text for s in strip) for strip in app.screen._compositor.render_strips()]
            # Rows 1 to 22: between the header and the footer; the boxes end at column 76.
            seen += [line[77:80] for line in lines[1:23]]
        assert set(seen) == {"   "}, sorted(set(seen))


async def test_absent_parts_are_listed_and_the_storage_figure_names_its_disks() -> None:
    """A node with disks but no md array nor NVMe, and NICs but no Thunderbolt bus: the boxes
    show, and the "not present" line still names md arrays, NVMe and Thunderbolt; the storage
    figure (the disks' total) names the disks it is of."""
    def plain_disks(frame):  # type: ignore[no-untyped-def]
        absent = {name: replace(frame.collectors[name], state="absent", error="gone") for name in ("raid", "nvme")}
        return replace(frame, collectors={**frame.collectors, **absent},
                       readings=replace(frame.readings, raid=(), nvme=()))

    frames = [plain_disks(f) for f in load_frames("raid1-member-failed-recovering")]
    disks = [d.name for d in frames[-1].readings.disks]
    assert disks and frames[-1].collectors["thunderbolt"].state == "absent" and frames[-1].readings.net
    app, fleet, _ = build([("box", frames, 25)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        note = text(app.screen.query_one("#not-present", Static).content)  # type: ignore[arg-type]
        assert note.strip() == "not present on this node: GPUs, PSU rail, RDMA ports, md arrays, NVMe, Thunderbolt"
        storage = body_text(app.screen.query_one(StorageGroup))
        assert storage.splitlines()[1].split() == ["of", "disks", *(f"{d}," for d in disks[:-1]), disks[-1]]


async def test_an_unplugged_adc_shows_its_collectors_error_on_the_rail_box() -> None:
    """The ADC unplugged: no rail reading while the psu collector errors. The rail box says so
    (with the collector's error) instead of the rail being "not present on this node"."""
    error = "/dev/ttyACM0: [Errno 2] could not open port /dev/ttyACM0; retrying"

    def unplugged(frame):  # type: ignore[no-untyped-def]
        psu = replace(frame.collectors["psu"], state="error", ok=False, error=error)
        return replace(frame, collectors={**frame.collectors, "psu": psu},
                       readings=replace(frame.readings, psu_rail=None, pmbus_psus=(), hwmon_volts=(),
                                        path_resistance=()))

    frames = v100_frames()
    frames = frames[:40] + [unplugged(f) for f in frames[40:60]]
    app, fleet, _ = build([("v100", frames, 60)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        rail = app.screen.query_one(RailGroup)
        assert rail.display
        assert "no reading, collector error: /dev/ttyACM0: [Errno 2] could not open port" in body_text(rail)
        note = text(app.screen.query_one("#not-present", Static).content)  # type: ignore[arg-type]
        assert "PSU rail" not in note


async def test_same_label_temperatures_of_two_chips_are_told_apart() -> None:
    """Two PMBus PSUs report "pmbus temp1" each: the host box names their hwmon devices."""
    from rigmon.schema import TemperatureReading
    from rigmon.tui.widgets.host_group import HostGroup

    temps = (TemperatureReading(sensor="hwmon3/temp1", label="pmbus temp1", temp_c=41.0),
             TemperatureReading(sensor="hwmon4/temp1", label="pmbus temp1", temp_c=58.0),
             TemperatureReading(sensor="thermal_zone0", label="x86_pkg_temp", temp_c=45.0))
    frames = [replace(f, readings=replace(f.readings, temperatures=temps))
              for f in load_frames("raid1-member-failed-recovering")]
    app, fleet, _ = build([("psus", frames, 25)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        lines = [" ".join(line.split()) for line in body_text(app.screen.query_one(HostGroup)).splitlines()]
        assert "pmbus temp1 (hwmon3) 41 °C" in lines and "pmbus temp1 (hwmon4) 58 °C" in lines
        assert "x86_pkg_temp 45 °C" in lines


async def test_an_agent_without_peers_configured_lists_no_peer_paths_as_missing() -> None:
    """`rigmon dash` on a plain machine: its agent runs the probe collector, which says absent
    (no [[peers]] configured). Peer paths are configuration, not hardware: not "not present"."""
    from rigmon.schema import CollectorStatus

    absent = CollectorStatus(state="absent", ok=True, error="no [[peers]] configured")
    frames = [replace(f, collectors={**f.collectors, "peer_probes": absent})
              for f in load_frames("raid1-member-failed-recovering")]
    app, fleet, _ = build([("plain", frames, 25)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        note = text(app.screen.query_one("#not-present", Static).content)  # type: ignore[arg-type]
        assert "not present on this node:" in note and "Peer paths" not in note


async def test_gpus_whose_collector_fails_are_not_read_not_absent() -> None:
    """NVML broke (or the driver did not load): no GPU readings while the gpu collector errors.
    The node has GPUs: the screen says they were not read, naming the collector, not that the
    node has none."""
    def nvml_broken(frame):  # type: ignore[no-untyped-def]
        gpu = replace(frame.collectors["gpu"], state="error", ok=False, error="NVML: driver/library mismatch")
        return replace(frame, collectors={**frame.collectors, "gpu": gpu},
                       readings=replace(frame.readings, gpus=(), gpu_processes=()))

    frames = v100_frames()
    frames = frames[:40] + [nvml_broken(f) for f in frames[40:60]]
    app, fleet, _ = build([("v100", frames, 60)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        note = text(app.screen.query_one("#not-present", Static).content)  # type: ignore[arg-type]
        assert "not read, collector failing (see Collectors): GPUs (gpu: error)" in note, note
        assert "not present on this node" not in note or "GPUs" not in note.split("\n")[0], note


async def test_gpus_whose_nvml_is_starting_are_not_read_yet_not_absent() -> None:
    """A slow first nvmlInit: the gpu collector is pending (starting) and there are no GPU readings
    yet. Not "not present" (the node has GPUs), nor failing: not read yet."""
    def nvml_starting(frame):  # type: ignore[no-untyped-def]
        gpu = replace(frame.collectors["gpu"], state="pending", ok=False,
                      error="NVML starting: nvmlInit has not returned for 4.0 s")
        return replace(frame, collectors={**frame.collectors, "gpu": gpu},
                       readings=replace(frame.readings, gpus=(), gpu_processes=()))

    frames = [nvml_starting(f) for f in v100_frames()[:60]]
    app, fleet, _ = build([("v100", frames, 60)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        note = text(app.screen.query_one("#not-present", Static).content)  # type: ignore[arg-type]
        assert "not read yet, collector starting (see Collectors): GPUs (gpu: pending)" in note, note
        assert "GPUs" not in note.split("not read yet")[0] and "collector failing" not in note, note


async def test_bus_errors_give_each_counters_rate_and_wrap_under_their_value_at_80_columns() -> None:
    # Before: "bus errors  GPU 2: NVLink replay 1661 (+4.0/s), CRC 4466, PCIe replay" with "183" wrapped
    # back under the label at 80 columns, and no rate for the CRC errors the cluster row's reason named.
    def seated_badly(frame: Frame) -> Frame:
        links = (NvLinkReading(link=2, active=True, replay_total=1661, recovery_total=0, crc_flit_total=4466,
                               crc_data_total=0, replay_per_s=4.0, crc_flit_per_s=12.0),)
        gpus = tuple(replace(g, nvlinks=links, pcie_replay_total=183, pcie_replay_per_s=0.5) if g.index == 2 else g
                     for g in frame.readings.gpus)
        return replace(frame, readings=replace(frame.readings, gpus=gpus))

    app, fleet, _ = build([("v100", [seated_badly(f) for f in v100_frames(20)], 20)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        group = app.screen.query_one(GpuGroup)
        body = text(group.query_one("#body", Static).content, group.content_size.width)  # type: ignore[arg-type]
        lines = body.splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("bus errors"))
        errors = " ".join(line.strip() for line in lines[first:first + 2])
        assert "NVLink replay 1661 (+4.0/s), CRC 4466 (+12.0/s), PCIe replay 183 (+0.5/s)" in errors
        assert lines[first + 1].startswith(" " * 12)  # wrapped under the value, not the label
