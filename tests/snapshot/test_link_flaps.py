"""A link that flapped between two frames (incident 5: "a snapshot taken between flaps looks healthy") is named
first in REPORT.md from its carrier counter, in a window of frames and in one of buckets."""

from __future__ import annotations

from rigmon.schema import SCHEMA_VERSION, History, HistorySeries
from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.link_flaps import link_flaps, link_flaps_text
from rigmon.snapshot.report import render_report

T0 = 1_780_000_000.0


def series(values: list[float], lows: list[float] | None = None, step_s: float = 1.0) -> HistorySeries:
    at = tuple(T0 + i * step_s for i in range(len(values)))
    return HistorySeries(at=at, min=tuple(lows or values), mean=tuple(values), max=tuple(values))


def history(tier: str = "frames", **named: HistorySeries) -> History:
    return History(schema=SCHEMA_VERSION, node="strix-a", from_at=T0, to_at=T0 + 600, tier=tier, step_s=1.0,
                   series={k.replace("__", "."): v for k, v in named.items()})


def test_a_carrier_counter_that_rose_between_frames_is_a_flap_and_one_that_stood_still_is_not() -> None:
    # Up in every frame; the kernel counted the cable's drop and return (1 -> 3) between two of them.
    flapped = series([1, 1, 1, 3, 3, 3])
    steady = series([2, 2, 2, 2, 2, 2])
    (flaps,) = link_flaps(history(**{"net[thunderbolt0]__carrier_changes_total": flapped,
                                     "net[eth0]__carrier_changes_total": steady}))
    assert (flaps.link, flaps.changes, flaps.first_at, flaps.last_at) == ("net[thunderbolt0]", 2, T0 + 3, T0 + 3)


def test_buckets_count_the_rise_inside_each_and_from_one_to_the_next_and_a_reset_is_no_flap() -> None:
    # 60 s buckets (min, max): 5..5, 5..7 (a flap inside), 8..8 (one more between), then 0 (re-created), 0..2.
    counter = series([5, 7, 8, 0, 2], lows=[5, 5, 8, 0, 0], step_s=60.0)
    (flaps,) = link_flaps(history("60s", **{"net[thunderbolt0]__carrier_changes_total": counter}))
    assert (flaps.changes, flaps.first_at, flaps.last_at) == (5, T0 + 60, T0 + 240)


def test_an_interface_created_again_between_frames_is_a_flap() -> None:
    # A thunderbolt-net cable unplugged for 2 s takes thunderbolt0 along and brings a new one: its carrier count is
    # what the old one's was (1), only its byte counters, started again, fell.
    carrier = series([1, 1, 1, 1, 1])
    received = series([5e9, 6e9, 7e9, 2e4, 9e8])
    (flaps,) = link_flaps(history(**{"net[thunderbolt0]__carrier_changes_total": carrier,
                                     "net[thunderbolt0]__rx_bytes_total": received,
                                     "net[eth0]__rx_bytes_total": series([1e6, 2e6, 3e6, 4e6, 5e6])}))
    assert (flaps.link, flaps.recreated, flaps.changes, flaps.first_at) == ("net[thunderbolt0]", 1, 0, T0 + 3)
    assert link_flaps_text(flaps) == ("net[thunderbolt0]: went away and came back once (a new interface: its counters "
                                      "started again) by 2026-05-28 20:26:43 UTC")


def test_an_interface_created_again_within_a_bucket_is_one_flap() -> None:
    # 60 s buckets (min, max) of the received bytes: the reset falls inside the second (its min is the new
    # interface's first bytes, its max the old one's last), and the third is the new one's alone. Compared with the
    # bucket before's maximum, the third counted a second fall.
    received = series([2e9, 3e9, 8e8], lows=[1e9, 5e3, 6e4], step_s=60.0)
    (flaps,) = link_flaps(history("60s", **{"net[thunderbolt0]__rx_bytes_total": received}))
    assert (flaps.recreated, flaps.first_at) == (1, T0 + 60)
    # A series begun at 0 (the interface new when the agent started) whose reset came a bucket later: held against
    # the first bucket's smallest value, the reset is not seen.
    received = series([5e10, 8e10, 1.5e10], lows=[0.0, 3e8, 1.5e10], step_s=60.0)
    (flaps,) = link_flaps(history("60s", **{"net[thunderbolt0]__rx_bytes_total": received}))
    assert (flaps.recreated, flaps.first_at) == (1, T0 + 60)


def test_the_report_names_the_flap_before_the_nodes_table() -> None:
    part = NodePart(node="strix-a", source="http://strix-a:9871", from_at=T0, to_at=T0 + 600,
                    history=history(**{"net[thunderbolt0]__carrier_changes_total": series([1, 1, 3, 3])}))
    report = render_report([part], 600, T0 + 700)
    head = report.split("| node |")[0]
    assert "## Link flaps" in head
    assert "- **strix-a** net[thunderbolt0]: carrier changed 2 times (down and up once) by 2026-" in head, head
    # A steady counter says nothing.
    quiet = NodePart(node="strix-b", source="x", history=history(**{"net[eth0]__carrier_changes_total": series([2, 2])}))
    assert "## Link flaps" not in render_report([quiet], 600, T0 + 700)
