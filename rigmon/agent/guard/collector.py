"""The guard's collector: its state in every frame."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rigmon.collectors.base import NoData, PolledCollector

if TYPE_CHECKING:
    from rigmon.agent.guard.service import GuardService


class GuardCollector(PolledCollector):
    """Puts the guard's state into every frame (``readings.guard``)."""

    name = "guard"

    def __init__(self, service: GuardService) -> None:
        self._service = service

    def collect(self) -> Sequence[object]:
        if not self._service.config.enabled:
            raise NoData("guard disabled")
        return [self._service.reading()]
