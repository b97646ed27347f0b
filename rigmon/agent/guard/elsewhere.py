"""Settings another tool changed on GPUs the guard capped: confirmed with NVML, taken up, reported.

`confirm_changes` runs on the guard's worker thread (`rigmon.agent.guard.worker`) when a frame
shows a capped GPU with other settings than the guard set (`rigmon.agent.guard.service`):
``nvidia-smi -rac`` or ``-pl`` by hand, a job's prologue, a driver reload.
"""

from __future__ import annotations

import logging

from msgspec.structs import replace

from rigmon.agent.guard.actuation import CALL_ERRORS, adopt, describe, set_elsewhere
from rigmon.agent.guard.shared import GuardShared
from rigmon.agent.guard.state_store import GuardStateStore
from rigmon.hw.nvml_control import ControlDenied

log = logging.getLogger(__name__)


def confirm_changes(shared: GuardShared, store: GuardStateStore, indices: tuple[int, ...]) -> None:
    """Ask NVML whether GPUs whose frames showed other settings than the guard set really run
    with others (a frame may be a poll from before the guard's write, filed late); take up what
    did change, so readings show it and a restore leaves it, and say so (``changed_elsewhere``).

    Runs on the guard's worker thread (NVML reads).

    Args:
        shared: the guard's state, read and changed under its lock.
        store: where the settings the guard has in force are kept.
        indices: the GPUs whose frame readings differ from what the guard set.
    """
    sh = shared
    if sh.control is None:
        return
    notes: list[str] = []
    for index in indices:
        with sh.lock:
            known = sh.in_force.get(index) if index in sh.changed else None
        if known is None:
            continue
        try:
            now = sh.control.read(index)
        except (ControlDenied, *CALL_ERRORS):
            continue  # a lost GPU, a hung driver: nothing is known to have changed
        app, limit = set_elsewhere(now, known)
        if not (app or limit):
            continue
        real = known
        if app:
            real = replace(real, app_clock_mem_mhz=now.app_clock_mem_mhz,
                           app_clock_graphics_mhz=now.app_clock_graphics_mhz)
        if limit:
            assert now.power_limit_mw is not None
            real = replace(real, power_limit_w=now.power_limit_mw / 1000)
        with sh.lock:
            if sh.in_force.get(index) != known:
                continue  # restored or stepped meanwhile
            sh.in_force[index] = real
            if index in sh.original:
                sh.original[index] = adopt(sh.original[index], known, real)
        notes.append(f"{describe([known])} set, {describe([real])} in force")
    if not notes:
        return
    store.save()  # what a restore now writes, in case the agent is killed
    message = (f"guard: GPU settings differ from what the guard set (another tool, a driver reload): "
               f"{'; '.join(notes)}; the next trigger takes the next step, and restoring leaves them "
               "as they are now")
    log.warning("%s", message)
    sh.event("guard_failed", "warning", message, {"mode": sh.config.mode, "changed_elsewhere": True})
