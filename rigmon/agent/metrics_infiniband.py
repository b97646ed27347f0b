"""``rigmon_infiniband_saturated``: which RDMA error counters stand at their maximum, per port and counter.

Not ``..._counter_saturated``: promtool refuses a gauge whose name holds a type (``counter``).

The node rule ``rdma_counter_saturated`` fires on the collector's event; Prometheus needs a series to
mirror it (`RigmonRdmaCounterSaturated`). A PortCounters error counter stops at its width's maximum
(`rigmon.collectors.infiniband_saturation`) and counts no more until cleared, so its ``_total`` and
``rigmon_infiniband_errors_total`` stand still while the errors go on: ``increase()`` reads 0.
"""

from __future__ import annotations

from collections.abc import Iterator

from rigmon.collectors.infiniband_saturation import COUNTER_MAX, COUNTERS
from rigmon.schema import InfinibandPortReading

NAME = "rigmon_infiniband_saturated"
HELP = ("1 while the port's error counter (label counter: the file in counters/) stands at its maximum "
        "(16 bits for symbol_error, 8 for link_downed): it counts no more errors until cleared (perfquery -R); "
        "no series while the counter is unread")


def saturated_counters(port: InfinibandPortReading) -> Iterator[tuple[str, bool]]:
    """Each error counter of ``port`` that was read, by its file name, and whether it stands at its maximum."""
    for counter, top in COUNTER_MAX.items():
        value = getattr(port, COUNTERS[counter][0])
        if isinstance(value, int):
            yield counter, value >= top
