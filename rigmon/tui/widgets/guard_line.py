"""GuardLine: the undervolt guard's state on the node screen (its cluster-row mark is `guard_mark`)."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.schema import GuardReading
from rigmon.summary import guard_mark, holding_text
from rigmon.tui.text import plain

__all__ = ["GuardLine", "guard_mark", "guard_text"]

STEP_TEXT = {"app_clocks": "application clocks", "locked_clocks": "locked clocks", "power_limit": "power limit"}


def guard_text(guard: GuardReading) -> str:
    """The line's words (strings from the agent are drawn as text by the caller)."""
    mode = guard.mode if guard.acting or guard.mode == "dry-run" else f"{guard.mode}, not acting"
    if guard.step == 0 and guard.settings and guard.left_behind and not guard.acting:
        # A guard that cannot act (dry-run, no permission) does not put a previous run's caps back.
        head = (f"guard {guard.state} ({mode}): caps a previous agent run left still in force on GPUs "
                f"{','.join(str(s.index) for s in guard.settings)}: reset them by hand (nvidia-smi -rac; -rgc; -pl)")
    elif guard.step == 0 and guard.settings:
        # Armed again, but the restore failed for these GPUs: their caps are still in force.
        head = (f"guard {guard.state} ({mode}): caps still in force on GPUs "
                f"{','.join(str(s.index) for s in guard.settings)}, the restore failed: "
                + _after_failed_restore(guard))
    elif guard.step == 0:
        head = f"guard {guard.state} ({mode})"
        if guard.state == "held":
            # Held before anything was capped: the hold applies to the caps it takes next.
            head += ": nothing capped; caps it takes on a sag stay until released"
        if guard.state == "released" and guard.released_until is not None:
            # An operator's release keeps the guard away for restore_after_s, sags or not: say until when.
            head += f": does not engage again before {_utc(guard.released_until)} UTC, whatever the rail does"
    else:
        step = STEP_TEXT.get(guard.step_name or "", guard.step_name or "?")
        # A guard that does not act (dry-run, no permission) set nothing: the GPUs run their own clocks.
        # Caps a previous run left behind are in force all the same.
        would = not guard.acting and not guard.left_behind
        head = f"guard {guard.state} ({mode}): {'would take ' if would else ''}step {guard.step}, {step}"
        if guard.gpus:
            head += f" on GPUs {','.join(map(str, guard.gpus))}"
        capped = guard.settings[0] if guard.settings else None
        if capped is not None and capped.app_clock_graphics_mhz is not None:
            head += f" at {capped.app_clock_mem_mhz}/{capped.app_clock_graphics_mhz} MHz"
        if capped is not None and capped.power_limit_w is not None and guard.step_name == "power_limit":
            # The cap this step set (the GPU's minimum when the configured one is below it).
            head += f", {capped.power_limit_w:g} W"
        if would:
            head += " (nothing changed)"
    if guard.step and guard.unread and guard.state != "held":
        head += f"; {_holding_text(guard)}"
    # Every action on the GPUs (restores and re-caps too); the ceiling limits only engages and steps,
    # so the count may pass it: not shown as a fraction of it.
    actions = guard.actions_last_hour
    parts = [head, (f"{actions} action{'' if actions == 1 else 's'} this hour "
                    f"(at most {guard.max_actions_per_hour} steps)")]
    if guard.trigger and guard.step:
        parts.append(f"because {guard.trigger}")
    if guard.reason and guard.reason != "dry-run":
        parts.append(guard.reason)
    if guard.left_behind:
        parts.append("settings left by a previous agent run")
    if guard.failures_total:
        parts.append(f"{guard.failures_total} failed")
    return " · ".join(parts)


def _after_failed_restore(guard: GuardReading) -> str:
    """What happens to the caps a failed restore left: retried on the GPUs on the bus (when the guard
    acts), not on those off it, reset by hand when the guard cannot act."""
    if not guard.acting:
        return "reset them by hand (nvidia-smi -rac; -rgc; -pl)"
    stuck = [s.index for s in guard.settings]
    on_bus = [i for i in stuck if i not in guard.off_bus]
    off_bus = [i for i in stuck if i in guard.off_bus]
    said = [f"retrying on GPUs {','.join(map(str, on_bus))}"] if on_bus else []
    if off_bus:
        said.append(f"GPUs {','.join(map(str, off_bus))} off the bus: not retried until back "
                    "(a reset or reboot gives them their own settings)")
    return "; ".join(said)


def _utc(at: float) -> str:
    """``20:31:05``: a time of day in UTC, as every time rigmon shows."""
    return time.strftime("%H:%M:%S", time.gmtime(at))


def _holding_text(guard: GuardReading) -> str:
    """``holding caps: rail not read since 20:31:05 UTC`` (`rigmon.summary.holding_text`)."""
    return holding_text(guard.unread, guard.unread_since)


class GuardLine(Widget):
    """One line saying what the guard does to this node's GPUs; nothing when the agent runs no guard."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"guard-line--armed", "guard-line--engaged", "guard-line--failing"}
    DEFAULT_CSS = """
    GuardLine {
        height: auto;
    }
    """

    guard: reactive[GuardReading | None] = reactive(None, layout=True)
    """The guard's state in the node's newest frame."""

    def on_mount(self) -> None:
        # Hidden until a frame carries a guard: a node without one shows no empty line.
        self.display = self.guard is not None

    def watch_guard(self, guard: GuardReading | None) -> None:
        self.display = guard is not None

    def render(self) -> RenderableType:
        guard = self.guard
        if guard is None:
            return ""
        kind = "failing" if (guard.reason and guard.mode == "enforce" and not guard.acting) or (
            guard.step == 0 and guard.settings) else ("engaged" if guard.step else "armed")
        style = self.get_component_rich_style(f"guard-line--{kind}", partial=True)
        line = Text(style=style)
        line.append_text(plain(guard_text(guard)))
        if guard.step:
            line.append("  (g hold, G release)")
        return line
