"""What the rules' selectors read from one frame, each read made once for all rules watching the same reading."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rigmon.alarms.record_fields import RecordChains, record_chains
from rigmon.alarms.selector import IdentityMemo, LevelMemo, Match, Selector
from rigmon.alarms.walk import WalkCarry
from rigmon.schema import EventValue


class FrameReads:
    """One frame's data and the selector reads made of it so far, by selector text.

    Rules that watch the same reading (warning and critical rail limits) share its matches,
    values and ``(subject, value)`` pairs; the identity and level memos are shared by every
    selector of the frame. Made for one frame and dropped with it.

    Args:
        data: frame data (`frame_data` or `frame_view`).
        carry: what the previous frame's reads found (`WalkCarry`, kept by the engine): the
            ``(subject, value)`` pairs read below the same tuples of frozen records as in the
            previous frame are the previous frame's list, the same object.
    """

    __slots__ = ("data", "memo", "levels", "carry", "_matches", "_values", "_pairs", "_chains")

    def __init__(self, data: Mapping[str, Any], carry: WalkCarry | None = None) -> None:
        self.data = data
        self.carry = carry
        self.memo: IdentityMemo = {}
        self.levels: LevelMemo = {}
        self._matches: dict[str, list[Match]] = {}
        self._values: dict[str, list[EventValue]] = {}
        self._pairs: dict[str, list[tuple[str, EventValue]]] = {}
        self._chains: dict[str, RecordChains] = {}

    def matches(self, selector: Selector) -> list[Match]:
        """``selector.select`` of the frame."""
        found = self._matches.get(selector.text)
        if found is None:
            found = self._matches[selector.text] = selector.select(self.data, self.memo)
        return found

    def values(self, selector: Selector) -> list[EventValue]:
        """``selector.values`` of the frame: the readings alone."""
        found = self._values.get(selector.text)
        if found is None:
            found = self._values[selector.text] = selector.values(self.data)
        return found

    def subject_values(self, selector: Selector) -> list[tuple[str, EventValue]]:
        """``selector.subject_values`` of the frame: ``(subject, value)`` pairs, without labels."""
        found = self._pairs.get(selector.text)
        if found is None:
            found = self._pairs[selector.text] = selector.subject_values(self.data, self.memo, self.levels,
                                                                                   self.carry)
        return found

    def records(self, selector: Selector) -> RecordChains:
        """`record_chains` of the frame: the records ``selector``'s matches sit in, by the matches' subjects
        (read when a message names their fields)."""
        found = self._chains.get(selector.text)
        if found is None:
            found = self._chains[selector.text] = record_chains(selector, self.data, self.memo)
        return found
