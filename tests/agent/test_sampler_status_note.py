"""A collector whose call succeeds may say in its status what does not work beside its readings
(the GPU collector's NVML Xid events): the state stays ok, the text is in ``error``."""

from __future__ import annotations

from collections.abc import Sequence

from rigmon.collectors.base import PolledCollector, status_note
from tests.agent.sampler_helpers import first_sampled_frame


class NotingCollector(PolledCollector):
    """Reads nothing, fine; says ``note`` beside it."""

    name = "noting"

    def __init__(self, note: str | None) -> None:
        self.note = note

    def collect(self) -> Sequence[object]:
        return []

    def status_note(self) -> str | None:
        return self.note


async def test_an_ok_collectors_note_is_in_its_status() -> None:
    status = (await first_sampled_frame(NotingCollector("NVML Xid events not received"))).collectors["noting"]
    assert (status.state, status.ok, status.error) == ("ok", True, "NVML Xid events not received")
    quiet = (await first_sampled_frame(NotingCollector(None))).collectors["noting"]
    assert (quiet.state, quiet.ok, quiet.error) == ("ok", True, None)


def test_a_collector_without_a_note_says_nothing() -> None:
    assert status_note(PolledCollector()) is None
