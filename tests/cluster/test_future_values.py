"""A frame from an agent newer than this dashboard, whose readings carry an enum-like value this dashboard does
not know (an md health, a link state, a member role added later): decoded, not refused as a whole (which
showed the node out of touch with a schema error); the value is kept as text, and taken as not known by the
figures that colour and sort the node. The agent's own decoding stays strict."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.sanitise import decode_agent
from rigmon.schema import Frame, SchemaError, decode, encode, raid_unknown
from rigmon.summary import arrays_unknown, link_figures, storage_figures
from rigmon.tui.row_columns import figure_level
from rigmon.tui.widgets.storage_group import health_level, health_text
from tests.tui.snapshot_apps.fake_agent import FakeClock
from tests.tui.snapshot_apps.record_frames import load_frames

#: Two healthy RAID0 arrays; Thunderbolt links: a host, a retimer, a device degraded, a host, a device ok.
FRAME = load_frames("enclosure-link-10g-array-lagging")[-1]


def future_frame() -> bytes:
    """`FRAME` as a newer agent would send it: md126 ``reshaping``, its first member ``journal-ro``, the healthy
    Thunderbolt device ``retraining``, a GPU-less node's NVMe ``asleep``, and a hostile control character."""
    raid = FRAME.readings.raid
    first = replace(raid[0], members=(replace(raid[0].members[0], role="placeholder-role"), *raid[0].members[1:]))
    frame = replace(FRAME, readings=replace(
        FRAME.readings, raid=(replace(first, health="placeholder-health"), *raid[1:]),
        thunderbolt=tuple(replace(d, link_state="placeholder-link") if d.link_state == "ok" else d
                          for d in FRAME.readings.thunderbolt),
        nvme=(replace(FRAME.readings.nvme[0], link_state="placeholder-nvme"), *FRAME.readings.nvme[1:])))
    return (encode(frame).replace(b"placeholder-health", b"reshaping").replace(b"placeholder-role", b"journal-ro")
            .replace(b"placeholder-link", b"retraining").replace(b"placeholder-nvme", b"asleep\\u001b[2J"))


def test_the_agent_s_own_decoding_still_refuses_a_value_it_does_not_know() -> None:
    with pytest.raises(SchemaError, match="reshaping|Invalid enum value"):
        decode(Frame, future_frame())


def test_a_frame_with_values_from_the_future_is_decoded_with_them_as_text() -> None:
    frame = decode_agent(Frame, future_frame())
    readings = frame.readings
    assert readings.raid[0].health == "reshaping" and readings.raid[0].members[0].role == "journal-ro"
    assert [d.link_state for d in readings.thunderbolt] == ["unknown", "unknown", "degraded", "unknown", "retraining"]
    assert readings.nvme[0].link_state == "asleep\\x1b[2J"  # text from an agent: made visible, never raw
    # Everything else as sent.
    assert replace(frame, readings=FRAME.readings) == replace(FRAME, readings=FRAME.readings)
    assert readings.raid[1] == FRAME.readings.raid[1] and readings.nvme[1:] == FRAME.readings.nvme[1:]


def test_values_from_the_future_count_as_not_known() -> None:
    readings = decode_agent(Frame, future_frame()).readings
    reshaping = readings.raid[0]
    # An md health this dashboard does not know: neither healthy nor degraded; shown as it is.
    assert raid_unknown(reshaping) and arrays_unknown(readings) == 1
    assert storage_figures(readings).arrays_degraded == 0
    assert health_text(reshaping) == "reshaping" and health_level(reshaping) is None
    # A link state it does not know: not counted as a link down (nor as healthy).
    figures, before = link_figures(readings), link_figures(FRAME.readings)
    assert before.healthy is not None and before.total is not None
    assert (figures.healthy, figures.total, figures.slow) == (before.healthy - 1, before.total - 1, before.slow)


def test_the_node_is_not_out_of_touch_and_its_storage_figure_is_greyed() -> None:
    store = NodeStore("strix-1", "http://strix-1:9871", FakeClock())
    store.add_frames([decode_agent(Frame, future_frame())])
    view = store.view()
    assert view.state == "live" and view.summary is not None
    assert figure_level("storage", view.summary, view.arrays_unknown) == "missing"
    assert figure_level("links", view.summary) == "warn"  # the degraded link only: amber, not a link down


def test_only_readings_are_tolerated_and_other_faults_still_refuse_the_frame() -> None:
    # A collector state drives the dashboard's own logic: one it does not know still refuses the frame.
    unknown_state = encode(FRAME).replace(b'"state":"ok"', b'"state":"dozing"', 1)
    assert unknown_state != encode(FRAME)
    with pytest.raises(SchemaError, match="dozing"):
        decode_agent(Frame, unknown_state)
    # A value from the future beside a reading of the wrong type: refused, for that reading.
    broken = future_frame().replace(b'"seq":', b'"seq":"x","was_seq":', 1)
    with pytest.raises(SchemaError, match="seq"):
        decode_agent(Frame, broken)
