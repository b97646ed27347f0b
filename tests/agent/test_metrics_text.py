"""/metrics with text a collector let through that UTF-8 cannot encode: one series' label, not the scrape."""

from __future__ import annotations

import msgspec

from tests.agent.test_metrics import exposition
from tests.test_schema import sample_frame


def test_a_lone_surrogate_in_a_label_is_replaced_and_the_scrape_still_answers() -> None:
    # os.listdir gives undecodable bytes of a name as lone surrogates (surrogateescape): an interface named
    # by a broken driver must cost its label's character, not every series of the node.
    frame = sample_frame()
    net = frame.readings.net[0]
    bad = msgspec.structs.replace(net, name="eth\udcff0")
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, net=(bad,)))
    text = exposition(frame)
    assert 'interface="eth?0"' in text
    assert "rigmon_frame_seq" in text
