"""A collector that fails may still say what it reads (`CollectorError.records`: an unplugged rail ADC's
reading, ``connected`` false, with its counters): the frame carries those records, the state is ``error``."""

from __future__ import annotations

from collections.abc import Sequence

from rigmon.agent.collector_threads import Failed, call_collector
from rigmon.collectors.base import CollectorError, PolledCollector
from rigmon.collectors.psu_rail import RailState
from rigmon.config import PsuSection
from rigmon.schema import PsuRailReading
from tests.agent.sampler_helpers import first_sampled_frame


def gone_reading() -> PsuRailReading:
    """A rail ADC's reading after its port went away."""
    state = RailState(PsuSection(port="/dev/rigmon-psu0"))
    state.opened(0.0)
    state.closed("/dev/rigmon-psu0: Input/output error")
    return state.reading(1.0, reset=True)


class FailingCollector(PolledCollector):
    """Fails every call, with ``records`` or without."""

    name = "psu"

    def __init__(self, records: Sequence[object]) -> None:
        self.records = records

    def collect(self) -> Sequence[object]:
        raise CollectorError("psu.port /dev/rigmon-psu0: Input/output error; retrying", records=self.records)


def test_an_error_with_records_is_an_error_outcome_with_them() -> None:
    reading = gone_reading()
    state, payload = call_collector(FailingCollector([reading]))
    assert state == "error" and isinstance(payload, Failed)
    assert payload.records == [reading] and payload.error.startswith("psu.port")
    assert call_collector(FailingCollector([])) == (
        "error", "psu.port /dev/rigmon-psu0: Input/output error; retrying")


async def test_a_failing_collectors_records_are_in_the_frame_and_its_state_is_error() -> None:
    reading = gone_reading()
    assert not reading.connected and reading.stale and reading.volts is None
    frame = await first_sampled_frame(FailingCollector([reading]))
    status = frame.collectors["psu"]
    assert (status.state, status.ok) == ("error", False)
    assert status.error == "psu.port /dev/rigmon-psu0: Input/output error; retrying"
    assert frame.readings.psu_rail == reading
    assert (await first_sampled_frame(FailingCollector([]))).readings.psu_rail is None
