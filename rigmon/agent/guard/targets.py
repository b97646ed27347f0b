"""What the guard's steps set on each GPU: its application-clock pair, its power limit, checked at start.

The guard's worker thread (`rigmon.agent.guard.worker`) asks these; each asks NVML once per GPU and
keeps the answer in `rigmon.agent.guard.shared.GuardShared`, so engaging costs only the writes.
"""

from __future__ import annotations

import logging

from rigmon.agent.guard.actuation import CALL_ERRORS
from rigmon.agent.guard.policy import derive_app_clocks
from rigmon.agent.guard.shared import GuardShared
from rigmon.hw.nvml_control import ControlDenied, ControlUnsupported

log = logging.getLogger(__name__)


def pair_of(sh: GuardShared, index: int) -> tuple[int, int] | None:
    """The application-clock pair of step 1 for GPU ``index``: configured, or derived once from
    what it supports (``None``: none fits, NVML offers none, or NVML could not say; `no_pair_text`
    says which)."""
    if len(sh.config.app_clocks_mhz) == 2:
        return sh.config.app_clocks_mhz[0], sh.config.app_clocks_mhz[1]
    if index not in sh.app_clocks:
        if sh.control is None:
            return None
        try:
            supported = sh.control.supported_clocks(index)
            max_graphics_mhz = sh.control.read(index).max_clock_graphics_mhz
        except ControlUnsupported:
            supported, max_graphics_mhz = {}, None  # the GPU or driver lists no clocks: an answer
        except (ControlDenied, *CALL_ERRORS) as exc:
            # Asked again at the next step: a GPU off the bus at the start (or a hung driver)
            # must get its pair once it answers, not go uncapped for the rest of the run.
            sh.pair_errors[index] = str(exc)
            return None
        sh.pair_errors.pop(index, None)
        sh.app_clocks[index] = derive_app_clocks(supported, max_graphics_mhz, sh.config.derive_fraction)
    return sh.app_clocks[index]


def no_pair_text(sh: GuardShared, index: int) -> str:
    """Why GPU ``index`` has no pair (`pair_of` answered ``None``), so step 1 cannot cap it."""
    if sh.control is None:
        return "NVML is not available to say which application clocks it supports"
    if index in sh.app_clocks:
        return "NVML offers no application-clock pair for it (set app_clocks_mhz to one it supports)"
    return f"its application clocks could not be asked ({sh.pair_errors.get(index, 'no answer')})"


def limit_of(sh: GuardShared, index: int) -> float:
    """The power limit of the last step for GPU ``index``: the configured one, within the range
    NVML allows for that GPU (the driver refuses a limit outside it, which would leave no cap)."""
    if index not in sh.limit_ranges:
        found = None
        if sh.control is not None:
            try:
                now = sh.control.read(index)
            except (ControlDenied, *CALL_ERRORS):
                return sh.config.power_limit_w  # asked again at the next step
            found = (now.power_limit_min_mw, now.power_limit_max_mw)
        sh.limit_ranges[index] = found
    found = sh.limit_ranges[index]
    limit = sh.config.power_limit_w
    if found is not None and found[0] is not None:
        limit = max(limit, found[0] / 1000)
    if found is not None and found[1] is not None:
        limit = min(limit, found[1] / 1000)
    return limit


def check_fit(sh: GuardShared, count: int) -> None:
    """Say at start, not when the rail sags, which configured settings these GPUs refuse
    (``count``: GPUs NVML lists); once the probe found the guard may write."""
    control = sh.control
    assert control is not None
    problems: list[str] = []
    missing = [i for i in sh.config.gpus if i >= count]
    if missing:
        problems.append(f"gpus: {', '.join(map(str, missing))} not on this node (NVML lists {count})")
    if sh.config.throttle_gpus > count:
        # Every GPU present counts towards it: more than there are can never throttle at once.
        problems.append(f"throttle_gpus {sh.config.throttle_gpus}: this node has {count} GPUs, so hardware "
                        "slowdown never engages the guard here")
    for index in [i for i in sh.config.gpus or range(count) if i < count]:
        try:
            now = control.read(index)
            supported = control.supported_clocks(index) if len(sh.config.app_clocks_mhz) == 2 else {}
        except (ControlDenied, *CALL_ERRORS):
            continue
        if len(sh.config.app_clocks_mhz) == 2 and supported:
            mem, graphics = sh.config.app_clocks_mhz
            if graphics not in supported.get(mem, ()):
                problems.append(f"GPU {index}: app_clocks_mhz [{mem}, {graphics}] is no pair it supports "
                                f"([memory, graphics]; memory clocks {', '.join(map(str, sorted(supported)))})")
        elif len(sh.config.app_clocks_mhz) != 2 and index in sh.app_clocks and sh.app_clocks[index] is None:
            problems.append(f"GPU {index}: step 1 cannot cap its application clocks: {no_pair_text(sh, index)}")
        low, high = now.power_limit_min_mw, now.power_limit_max_mw
        if sh.config.power_limit_w > 0 and low is not None and sh.config.power_limit_w * 1000 < low:
            problems.append(f"GPU {index}: power_limit_w {sh.config.power_limit_w:g} is below its minimum "
                            f"{low / 1000:g} W: the step sets {low / 1000:g} W")
        if sh.config.power_limit_w > 0 and high is not None and sh.config.power_limit_w * 1000 > high:
            problems.append(f"GPU {index}: power_limit_w {sh.config.power_limit_w:g} is above its maximum "
                            f"{high / 1000:g} W: the step sets at most {high / 1000:g} W")
    if problems:
        message = f"guard: [guard] does not fit this node; those steps will fail: {'; '.join(problems)}"
        if all(p.startswith("throttle_gpus") for p in problems):
            message = f"guard: [guard] does not fit this node: {'; '.join(problems)}"
        log.warning("%s", message)
        sh.event("guard_failed", "warning", message, {"mode": sh.config.mode})
