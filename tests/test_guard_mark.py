"""The cluster row's guard mark says what the undervolt guard does: engaged, held, released, dry-run, stuck caps."""

from __future__ import annotations

import random
import time

import pytest
from msgspec.structs import replace

from rigmon.schema import GuardGpuSettings, GuardReading
from rigmon.summary import guard_mark, summarize
from tests.tui.snapshot_apps.fake_agent import make_frame

CAPS = (GuardGpuSettings(0, 877, 1005, None, 300.0),)


@pytest.mark.parametrize(("guard", "mark"), [
    (None, ""),
    (GuardReading("enforce", True, "armed", 0), ""),
    (GuardReading("dry-run", False, "armed", 0, reason="dry-run"), ""),
    (GuardReading("enforce", True, "engaged", 1, "app_clocks", settings=CAPS), "G1"),
    (GuardReading("enforce", True, "held", 2, "locked_clocks", settings=CAPS), "G2h"),
    # Enforce without permission: it cannot act.
    (GuardReading("enforce", False, "engaged", 1, "app_clocks", reason="cannot act: no permission"), "g1"),
    # Dry-run: it would cap, and changed nothing.
    (GuardReading("dry-run", False, "engaged", 1, "app_clocks", reason="dry-run"), "dry1"),
    (GuardReading("dry-run", False, "held", 2, "locked_clocks", reason="dry-run"), "dry2h"),
    # Held before it engaged: the caps it takes next stay until released.
    (GuardReading("enforce", True, "held", 0), "G0h"),
    (GuardReading("dry-run", False, "held", 0, reason="dry-run"), "dry0h"),
    # Released by an operator: it will not engage (protect the run) until released_until.
    (GuardReading("enforce", True, "released", 0, released_until=time.time() + 600), "Goff"),
    (GuardReading("dry-run", False, "released", 0, reason="dry-run", released_until=time.time() + 600), "dryoff"),
    # Holding its caps because it cannot read the rail (or the GPUs' throttle reasons): the restore waits.
    (GuardReading("enforce", True, "engaged", 1, "app_clocks", settings=CAPS, unread=("rail",)), "G1?"),
    (GuardReading("dry-run", False, "engaged", 2, "locked_clocks", reason="dry-run", unread=("GPU readings",)),
     "dry2?"),
    # An operator's hold holds whatever the guard reads.
    (GuardReading("enforce", True, "held", 1, "app_clocks", settings=CAPS, unread=("rail",)), "G1h"),
    # Armed, nothing in force: nothing held, whatever it cannot read.
    (GuardReading("enforce", True, "armed", 0, unread=("rail",)), ""),
    # A restore that failed: caps still in force outweigh the release.
    (GuardReading("enforce", True, "released", 0, settings=CAPS), "G!"),
    (GuardReading("enforce", True, "armed", 0, settings=CAPS), "G!"),
])
def test_marks(guard: GuardReading | None, mark: str) -> None:
    assert guard_mark(guard) == mark


def test_a_released_guard_reaches_the_summary() -> None:
    frame = make_frame("node01", "r1", 5, random.Random(1))
    released = GuardReading("enforce", True, "released", 0, released_until=frame.taken_at + 600)
    summary = summarize(replace(frame, readings=replace(frame.readings, guard=released)))
    assert summary.guard_mark == "Goff"
