"""/metrics for network links that lose their carrier: what RigmonNetworkLinkDown and RigmonNetworkLinkFlapped read."""

from __future__ import annotations

import msgspec
import pytest

from rigmon.schema import Frame
from tests.agent.test_metrics import exposition
from tests.test_schema import sample_frame


def net_frame(**fields: object) -> Frame:
    """The sample frame with its one interface (eth0) changed by ``fields``."""
    frame = sample_frame()
    net = msgspec.structs.replace(frame.readings.net[0], **fields)
    return msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, net=(net,)))


def samples(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{")]


@pytest.mark.parametrize(("link_lost", "value"), [(True, "1.0"), (False, "0.0")])
def test_a_lost_link_is_a_series_of_its_interface(link_lost: bool, value: str) -> None:
    text = exposition(net_frame(kind="ethernet", carrier=False, link_lost=link_lost))
    assert samples(text, "rigmon_network_link_lost") == [
        f'rigmon_network_link_lost{{interface="eth0",node="node01"}} {value}']
    assert "# TYPE rigmon_network_link_lost gauge" in text


def test_an_older_agents_record_without_link_lost_is_no_series_and_the_scrape_still_answers() -> None:
    # link_lost is UNSET in a record built without it (an older agent's, a recording's): float(UNSET) failed the
    # whole scrape, every series of the node with it.
    frame = net_frame(kind="ethernet")
    assert frame.readings.net[0].link_lost is msgspec.UNSET
    text = exposition(frame)
    assert samples(text, "rigmon_network_link_lost") == []
    assert samples(text, "rigmon_network_carrier_changes_total") == [
        'rigmon_network_carrier_changes_total{interface="eth0",node="node01"} 1.0']


def test_the_kind_of_an_interface_is_a_label_of_its_info_series() -> None:
    # RigmonNetworkLinkFlapped keeps to the kinds the node rule watches: a veth or Wi-Fi coming and going is not it.
    text = exposition(net_frame(kind="thunderbolt-net", link_lost=False))
    assert samples(text, "rigmon_network_info") == [
        'rigmon_network_info{interface="eth0",kind="thunderbolt-net",node="node01"} 1.0']
    assert samples(exposition(net_frame(kind=None)), "rigmon_network_info") == [
        'rigmon_network_info{interface="eth0",kind="",node="node01"} 1.0']
    assert "kind=" not in "".join(samples(text, "rigmon_network_carrier_changes_total"))

