"""The node screen's Links box keeps every figure whole at any width (an 80-column terminal cut
a 100 GbE NIC's tx rate to "3.63 GB…" and the drops header to "dro…")."""

from __future__ import annotations

from msgspec.structs import replace
from textual.widgets import Static

from rigmon.schema import Frame
from rigmon.tui import format as fmt
from rigmon.tui.widgets.link_group import LinkGroup
from tests.tui.snapshot_apps.record_frames import load_frames
from tests.tui.snapshot_apps.recorded import build, open_node, settle
from tests.tui.test_sources import text


def busy_roce_and_stalled_tbnet() -> list[Frame]:
    """tp-cluster's node03: a 100 GbE NIC moving GB/s beside a stalled thunderbolt-net."""
    frames = load_frames("strix-usb4-thunderbolt-net")
    last = frames[-1]
    nics = []
    for nic in last.readings.net:
        if nic.kind == "thunderbolt-net":
            nics.append(replace(nic, stalled=True, rx_bytes_per_s=0.0, tx_bytes_per_s=0.0))
        else:
            nics.append(replace(nic, name="enp1s0f0np0", speed_mbps=100_000, rx_bytes_per_s=3.74e9,
                                tx_bytes_per_s=3.63e9, rx_dropped_total=12_345, tx_errors_total=67_890))
    return frames[:-1] + [replace(last, readings=replace(last.readings, net=tuple(nics)))]


async def test_every_nic_figure_and_header_is_whole_from_80_to_200_columns() -> None:
    frames = busy_roce_and_stalled_tbnet()
    app, fleet, _ = build([("node03", frames, len(frames))])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        for width in (80, 100, 120, 200):
            await pilot.resize_terminal(width, 24)
            await pilot.pause()
            await pilot.pause()
            group = app.screen.query_one(LinkGroup)
            shown = text(group.query_one("#body", Static).content, group.content_size.width)  # type: ignore[arg-type]
            lines = shown.splitlines()
            nic = next(line for line in lines if "enp1s0f0np0" in line)
            for figure in ("100 Gb/s", fmt.rate(3.74e9), fmt.rate(3.63e9), "67890", "12345"):
                assert figure in nic, (width, nic)
            header = next(line for line in lines if "interface" in line)
            assert "errors" in header and "drops" in header, (width, header)
            assert "…" not in shown, (width, shown)
            stalled = lines.index(next(line for line in lines if "thunderbolt0" in line))
            assert "STALLED" in " ".join(lines[stalled:stalled + 2]), (width, shown)
