"""Wire records of the undervolt guard: what it would do or did to the GPUs' clocks (issue 20)."""

from __future__ import annotations

from typing import Literal

from rigmon.schema.record import Record

GuardModeName = Literal["dry-run", "enforce"]
GuardStateName = Literal["armed", "engaged", "held", "released"]
GuardStepName = Literal["app_clocks", "locked_clocks", "power_limit"]


class GuardGpuSettings(Record, frozen=True):
    """One GPU's clock and power settings as the guard found, planned or set them.

    ``None`` means unknown or not set: an application-clock pair the driver did not report,
    no locked clocks, a power limit left alone.
    """

    index: int
    app_clock_mem_mhz: int | None = None
    app_clock_graphics_mhz: int | None = None
    locked_clock_max_mhz: int | None = None
    power_limit_w: float | None = None


class GuardReading(Record, frozen=True):
    """The guard's state in one frame.

    ``mode`` is what is configured; ``acting`` whether it really changes the GPUs (false in
    dry-run and when it has no permission, ``reason`` says why). ``step`` is 0 when armed,
    else how many steps are in force (``step_name`` the last one). ``settings`` are the
    GPUs' settings it put in place (or would have, in dry-run), ``original`` what they were
    before and will be restored to. ``released`` means an operator released it: it does not
    engage again until ``released_until`` (Unix seconds). ``left_behind`` is true when a previous agent run left
    settings in place that this run found in its state file. ``unread`` names what the guard
    watches and cannot read now (``rail``, ``GPU readings``): while engaged it holds the caps
    in force, and ``unread_since`` is when it last read everything (``None``: not in this run).
    ``off_bus`` lists GPUs with settings in force that are not on the bus: a failed restore is
    not retried on them until they are back. ``actions_last_hour`` counts the actions it took on the
    GPUs within the last hour (in dry-run, would have): each engage, step and restore once, each GPU
    capped again on its return once; ``max_actions_per_hour`` limits only the engages and steps.
    """

    mode: GuardModeName
    acting: bool
    state: GuardStateName
    step: int
    step_name: GuardStepName | None = None
    reason: str | None = None
    trigger: str | None = None
    engaged_at: float | None = None
    last_action_at: float | None = None
    gpus: tuple[int, ...] = ()
    actions_last_hour: int = 0
    max_actions_per_hour: int = 0
    settings: tuple[GuardGpuSettings, ...] = ()
    original: tuple[GuardGpuSettings, ...] = ()
    left_behind: bool = False
    failures_total: int = 0
    released_until: float | None = None
    unread: tuple[str, ...] = ()
    unread_since: float | None = None
    off_bus: tuple[int, ...] = ()
