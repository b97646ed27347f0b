"""Colours mean trouble: which figures are amber or red, as pure functions of the readings."""

from __future__ import annotations

from msgspec.structs import replace
from typing import Any

import pytest

from rigmon.summary import power_level
from rigmon.schema import NvmeReading
from rigmon.tui.widgets.storage_group import nvme_link_level


def nvme(**fields: Any) -> NvmeReading:
    base: dict[str, Any] = dict(name="nvme0", model=None, serial=None, firmware=None, state="live", transport="pcie",
                                address=None, namespaces=(), link_speed_gts=8.0, link_width=4, max_link_speed_gts=16.0,
                                max_link_width=4, link_gen=3, max_link_gen=4, link_lost=False, temp_c=None,
                                temp_max_c=None, temp_crit_c=None)
    return NvmeReading(**{**base, **fields})


@pytest.mark.parametrize(("fields", "level"), [
    # A Gen4 drive behind a Gen3 port trains at Gen3: the collector says ok, so it is not amber.
    ({"link_state": "ok", "port_max_link_speed_gts": 8.0}, None),
    ({"link_state": "degraded", "link_degraded_reason": "gen3 below gen4"}, "warn"),
    ({"link_state": "lost", "link_lost": True}, "bad"),
    ({"link_state": "unknown"}, "warn"),  # an older agent: judged by the drive's own maximum
    ({"link_state": "unknown", "link_gen": 4}, None),
])
def test_nvme_links_are_coloured_by_the_collectors_verdict(fields: dict[str, Any], level: str | None) -> None:
    assert nvme_link_level(nvme(**fields)) == level


@pytest.mark.parametrize(("power_w", "peak_w", "limit_w", "level"), [
    (255.0, 336.0, 300.0, None),   # a healthy V100's peak between polls above its limit: normal
    (180.0, 310.0, 200.0, "warn"),  # peaks far over a lowered limit: the limit does not hold (incident 1)
    (323.0, 323.0, 300.0, None),   # an instantaneous V100 reading a few percent over: still normal
    (345.0, 350.0, 300.0, "warn"),  # the reading itself well above the limit: the limit does not hold
    (None, None, 300.0, None),
    (250.0, 400.0, None, None),
])
def test_a_brief_peak_over_the_limit_is_not_amber(power_w: float | None, peak_w: float | None,
                                                  limit_w: float | None, level: str | None) -> None:
    assert power_level(power_w, peak_w, limit_w) == level


def test_cluster_figures_colour_the_worst_of_the_last_minute() -> None:
    from rigmon.summary import NodeSummary
    from rigmon.tui.row_columns import figure_level

    base = NodeSummary(node="n", seq=1, taken_at=1.0, rail_min_volts=11.9, links_healthy=1, links_total=1,
                       link_gbps=40.0, gpu_peak_limit_w=300.0)
    # The newest frame is fine; the sag of the last minute decides the rail's colour.
    assert figure_level("rail", base) is None
    assert figure_level("rail", replace(base, rail_worst_volts=11.26)) == "bad"
    assert figure_level("rail", replace(base, rail_worst_volts=11.62)) == "warn"
    # A link healthy now that was not within the minute flapped.
    assert figure_level("links", replace(base, links_unhealthy_worst=0)) is None
    assert figure_level("links", replace(base, links_unhealthy_worst=1)) == "warn"
    assert figure_level("links", replace(base, links_healthy=0)) == "bad"
    # V100 peaks just over the limit are plain, peaks far over it amber.
    assert figure_level("power", replace(base, gpu_peak_worst_w=336.0)) is None
    assert figure_level("power", replace(base, gpu_peak_worst_w=480.0)) == "warn"
