"""The undervolt guard's decisions as pure functions over frames: trigger, steps, restore, rate ceiling.

Nothing here touches the GPUs or the clock: `observe` reduces a frame to what the guard looks
at, `decide` turns the guard's state and one observation into a new state and the actions to
take, and `plan_settings` says which clocks a step sets. `rigmon.agent.guard.worker` carries
the actions out through `rigmon.hw.nvml_control` (or only reports them, in dry-run).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import msgspec

from rigmon.config import GuardSection
from rigmon.schema import Alarm, Frame, GuardGpuSettings, GuardStepName
from rigmon.summary import holding_text

#: Seconds over which `GuardSection.max_actions_per_hour` counts actions.
HOUR_S = 3600.0
#: Throttle reasons that mean the board itself pulled the clocks down: the external power
#: brake (a sagging supply asserts it on some boards) and the generic HW slowdown.
HW_REASONS = frozenset({"hw_power_brake_slowdown", "hw_slowdown"})

DecisionKind = Literal["engage", "step", "extend", "extend_limited", "restore", "limited", "holding"]
#: What the guard reads that a frame may lack: the rail (an ADC that is stale, silent or
#: unplugged) and the GPUs' throttle reasons (a GPU collector that fails or hangs).
RAIL, GPU_READINGS = "rail", "GPU readings"


@dataclass(frozen=True, slots=True)
class Observation:
    """What one frame tells the guard.

    Attributes:
        at: the frame's time (Unix seconds).
        rail_min_volts: rail minimum of the frame's ADC reading; ``None`` when there is none
            (no ADC, stale readings).
        rail_window: identity of the newest window behind that reading (the device's window
            ``seq``, else its time): a reading repeated in later frames is not a new sag.
            ``None`` when the device gives neither; then only frames with new windows count.
        alarms_fired: names of trigger rules that started firing in this frame.
        alarms_active: trigger alarms (their ids) firing after this frame, as the alarm engine has
            them (those carried over an agent restart included): an alarm that ends without an
            ``alarm_resolved`` event (its rule gone with the engine that had it) ends here too.
        throttled_gpus: GPU indices reporting a hardware slowdown reason.
        gpus: indices of the GPUs present and not lost.
        unread: what the guard reads that this frame lacks (`RAIL` when the node has an ADC but
            no fresh reading of it, `GPU_READINGS` when the throttle trigger is on and the GPU
            collector failed): no trigger there is no sign of health.
    """

    at: float
    rail_min_volts: float | None = None
    rail_window: float | None = None
    alarms_fired: tuple[str, ...] = ()
    alarms_active: tuple[str, ...] = ()
    throttled_gpus: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()
    unread: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GuardState:
    """What the guard remembers between frames.

    ``step`` 0 is armed; 1.. counts the steps in force (see `steps_of`). ``sags`` are the
    times of rail sags still inside the counting window, ``actions`` the times of engage and
    step actions inside the last hour. ``alarms_firing`` are the trigger alarms (ids) firing now:
    while one fires, the guard does not restore; ``alarm_at`` is the last frame one fired in (the
    frame resolving the last one included): the restore counts ``restore_after_s`` from it. ``known_gpus`` are the GPUs the last frame that
    listed any had present: a sag's frame whose GPU collector failed lists none. ``gpus`` are the GPUs
    the steps in force were taken on: those present at the engage, and any that (re)appeared since.
    ``extends`` are the ``(GPU, time)`` of the extends inside the last hour (each GPU has the ceiling
    of ``max_actions_per_hour`` events to itself).
    """

    step: int = 0
    held: bool = False
    trigger: str | None = None
    engaged_at: float | None = None
    last_step_at: float | None = None
    last_trigger_at: float | None = None
    gpus: tuple[int, ...] = ()
    sags: tuple[float, ...] = ()
    actions: tuple[float, ...] = ()
    limited_reported: bool = False
    rail_window: float | None = None
    released_until: float | None = None
    read_at: float | None = None
    read_since: float | None = None
    unread: tuple[str, ...] = ()
    unread_reported: bool = False
    alarms_firing: tuple[str, ...] = ()
    alarm_at: float | None = None
    known_gpus: tuple[int, ...] = ()
    extends: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """One thing to do.

    ``engage`` takes step 1, ``step`` the next step (``step`` is the step number after it,
    ``step_name`` what it sets), ``extend`` takes steps 1 to ``step`` (those in force) on ``gpus``
    that (re)appeared while engaged, ``restore`` puts the original settings back, ``limited``
    says the ceiling on actions per hour stopped an engage or step. ``extend_limited`` is an extend
    of ``gpus`` back on the bus ``max_actions_per_hour`` times within the hour, whose event says that
    their further returns within it are capped ``quiet`` (an extend without an event). A ``restore`` with ``retry``
    puts back only ``gpus`` (those a failed restore left capped); any other restores every GPU
    the guard changed. ``holding`` says the caps stay in force because the guard cannot read
    what it watches (``unread_since``: when it last could, ``None``: not yet in this run).
    """

    kind: DecisionKind
    step: int
    step_name: GuardStepName | None
    trigger: str
    gpus: tuple[int, ...]
    retry: bool = False
    unread_since: float | None = None
    quiet: bool = False


def steps_of(config: GuardSection) -> tuple[GuardStepName, ...]:
    """The steps in order, as configured: application clocks always, then locked clocks and a power limit."""
    steps: list[GuardStepName] = ["app_clocks"]
    if config.locked_clocks:
        steps.append("locked_clocks")
    if config.power_limit_w > 0:
        steps.append("power_limit")
    return tuple(steps)


def observe(frame: Frame, config: GuardSection, active: Iterable[Alarm] = ()) -> Observation:
    """Reduce a frame to what the guard's triggers look at.

    Args:
        frame: the frame, with the events the alarms emitted judging it.
        config: the ``[guard]`` section.
        active: the alarms in force after the alarms judged ``frame`` (the agent's alarm engine:
            active ones and those carried over a restart).
    """
    rail = frame.readings.psu_rail
    rail_min: float | None = None
    window: float | None = None
    if rail is not None and not rail.stale and rail.volts is not None:
        # The window's sequence number tells a new window from a repeated one; ``windows`` alone
        # does not (a reading pushed at once and the next poll's may split the count).
        window = float(rail.seq) if rail.seq is not None else rail.last_window_at
        if window is not None or rail.windows > 0:
            rail_min = rail.volts.min_volts
    fired = tuple(
        str(e.data.get("rule")) for e in frame.events
        if e.kind == "alarm_firing" and e.data.get("rule") in config.alarm_rules and not e.data.get("restored")
    )
    # Whether a trigger alarm still fires is what the engine has in force, not a set the guard
    # keeps from the events: an alarm ended without one (its rule removed, its engine replaced)
    # would otherwise hold the caps for ever.
    firing = tuple(a.id for a in active if a.state == "firing" and a.rule in config.alarm_rules)
    gpus = tuple(g.index for g in frame.readings.gpus if g.state != "lost")
    throttled = tuple(
        g.index for g in frame.readings.gpus
        if g.state != "lost" and g.clock_reasons and HW_REASONS.intersection(g.clock_reasons)
    )
    return Observation(at=frame.taken_at, rail_min_volts=rail_min, rail_window=window, alarms_fired=fired,
                       alarms_active=firing, throttled_gpus=throttled, gpus=gpus, unread=_unread(frame, config, rail_min is not None))


def _unread(frame: Frame, config: GuardSection, rail_read: bool) -> tuple[str, ...]:
    """What the guard watches that ``frame`` did not read.

    The rail, on a node with an ADC (its collector is not ``absent``, or a reading came) that
    gave no fresh reading: stale, silent, its port gone, not read yet. The GPUs' throttle
    reasons, when they trigger (``throttle_gpus``), while the GPU collector fails, hangs or has
    not answered yet: a GPU that cannot be read reports no slowdown.
    """
    unread: list[str] = []
    psu = frame.collectors.get("psu")
    if not rail_read and (frame.readings.psu_rail is not None or (psu is not None and psu.state != "absent")):
        unread.append(RAIL)
    gpu = frame.collectors.get("gpu")
    if config.throttle_gpus and gpu is not None and gpu.state not in ("ok", "absent"):
        unread.append(GPU_READINGS)
    return tuple(unread)


def unread_text(unread: Sequence[str], since: float | None) -> str:
    """``holding caps: rail not read since 20:31:05 UTC`` (`rigmon.summary.holding_text`)."""
    return holding_text(unread, since)


def _reads(state: GuardState, obs: Observation) -> GuardState:
    """``state`` with what ``obs`` read: the times everything was read, what was not."""
    if obs.unread:
        return replace(state, read_since=None, unread=obs.unread)
    return replace(state, read_at=obs.at, read_since=obs.at if state.read_since is None else state.read_since,
                   unread=(), unread_reported=False)


def _trigger(state: GuardState, obs: Observation, config: GuardSection) -> tuple[tuple[float, ...], str | None]:
    """Sags still in the window (this frame's included) and what triggers now, if anything."""
    sags = tuple(t for t in state.sags if obs.at - t < config.rail_window_s)
    fresh = obs.rail_window is None or obs.rail_window != state.rail_window
    new_sag = fresh and obs.rail_min_volts is not None and obs.rail_min_volts < config.rail_below_volts
    if new_sag:
        sags += (obs.at,)
    reasons: list[str] = []
    if new_sag and len(sags) >= config.rail_count:
        assert obs.rail_min_volts is not None
        reasons.append(f"rail minimum {obs.rail_min_volts:.3f} V below {config.rail_below_volts:g} V "
                       f"({len(sags)}x in {config.rail_window_s:g} s)")
    if obs.alarms_fired:
        reasons.append(f"alarm {', '.join(obs.alarms_fired)} firing")
    if config.throttle_gpus and len(obs.throttled_gpus) >= config.throttle_gpus:
        reasons.append(f"hardware slowdown on GPUs {', '.join(map(str, obs.throttled_gpus))}")
    return sags, ("; ".join(reasons) or None)


def decide(state: GuardState, obs: Observation, config: GuardSection) -> tuple[GuardState, list[Decision]]:
    """Advance the guard by one observation.

    Engages (step 1) when a trigger fires while armed; takes the next step when a trigger
    fires again at least ``step_after_s`` after the last step; restores once no trigger
    fired for ``restore_after_s``, no trigger alarm fires any more, and everything it watches was read all that time (not while
    held): while the rail or the GPUs cannot be read the caps stay in force, reported once
    when the restore would be due (``holding``). Engage and step actions count against
    ``max_actions_per_hour``; at the ceiling the guard stays where it is and says so once
    (``limited``). Restoring never counts: going back to the GPU's own settings is safe.

    A GPU that (re)appears while the steps are in force (see `joining`) gets them too, first
    (``extend``): it takes no step the others have not, so it does not count against the ceiling of
    engage and step actions. A GPU going off the bus and back again and again (a bad riser, a board
    reset in a loop, the sag itself) is capped again every time: uncapped it would draw more from the
    rail that may be what throws it off. Only its events are limited: ``max_actions_per_hour`` an
    hour, each GPU on its own count, the last saying so (``extend_limited``); beyond, it is capped
    without one (``quiet``) until its count falls below.

    Args:
        state: the state after the previous observation.
        obs: this frame's observation.
        config: the ``[guard]`` section.

    Returns:
        The new state and the decisions, in order.
    """
    sags, trigger = _trigger(state, obs, config)
    alarmed = bool(state.alarms_firing)  # up to this frame (one that resolves the last alarm included)
    firing = obs.alarms_active
    actions = tuple(t for t in state.actions if obs.at - t < HOUR_S)
    extends = tuple((i, t) for i, t in state.extends if obs.at - t < HOUR_S)
    counts = Counter(i for i, _ in extends)
    joined = joining(state, obs, config)
    ceiling = config.max_actions_per_hour
    state = _reads(replace(state, sags=sags, actions=actions, alarms_firing=firing,
                           alarm_at=obs.at if alarmed or firing else state.alarm_at,
                           known_gpus=obs.gpus or state.known_gpus,
                           gpus=state.gpus + tuple(i for i in joined if i not in state.gpus), extends=extends,
                           rail_window=state.rail_window if obs.rail_window is None else obs.rail_window), obs)
    engaged_step = state.step
    state, decisions = _advance(state, obs, config, trigger, actions)
    if not joined or state.step == 0:
        return state, decisions  # nothing (re)appeared, or everything goes back this frame
    steps = steps_of(config)
    step_name = steps[min(engaged_step, len(steps)) - 1]
    why = state.trigger or "the guard is engaged"
    told = tuple(i for i in joined if counts[i] < ceiling - 1)
    last_told = tuple(i for i in joined if counts[i] == ceiling - 1)
    quiet = tuple(i for i in joined if counts[i] >= ceiling)
    extending: list[Decision] = []
    if told:
        extending.append(Decision("extend", engaged_step, step_name, why, told))
    if last_told:
        extending.append(Decision("extend_limited", engaged_step, step_name, why, last_told))
    if quiet:
        extending.append(Decision("extend", engaged_step, step_name, why, quiet, quiet=True))
    state = replace(state, extends=state.extends + tuple((i, obs.at) for i in joined))
    return state, [*extending, *decisions]


def joining(state: GuardState, obs: Observation, config: GuardSection) -> tuple[int, ...]:
    """GPUs that (re)appeared while steps are in force, to get them too: present in ``obs`` (and
    among the configured ``gpus``, when set), and either not among those the steps were taken on
    (lost or not read yet at the engage) or missing from the last frame that listed GPUs (off the
    bus and back without a reboot: a reset GPU runs with its own settings again)."""
    if state.step == 0 or not obs.gpus:
        return ()
    wanted = (i for i in obs.gpus if not config.gpus or i in config.gpus)
    return tuple(i for i in wanted if i not in state.gpus or (state.known_gpus and i not in state.known_gpus))


def restore_allowed(state: GuardState, at: float, config: GuardSection) -> bool:
    """Whether settings the guard put in force may go back at ``at``: no trigger for ``restore_after_s``,
    no trigger alarm firing nor resolved within it, and everything the guard watches read all that
    time. The first restore and the retries of one that failed wait alike."""
    quiet = state.last_trigger_at is None or at - state.last_trigger_at >= config.restore_after_s
    # A trigger alarm still firing (a rail held low, a latched under-voltage flag) is no sign of health:
    # the restore waits until it resolved ``restore_after_s`` ago.
    alarm_quiet = not state.alarms_firing and (state.alarm_at is None or at - state.alarm_at >= config.restore_after_s)
    return (quiet and alarm_quiet and state.read_since is not None
            and at - state.read_since >= config.restore_after_s)


def _advance(state: GuardState, obs: Observation, config: GuardSection, trigger: str | None,
             actions: tuple[float, ...]) -> tuple[GuardState, list[Decision]]:
    """`decide` after the observation is taken into ``state``: engage, step, hold or restore."""
    steps = steps_of(config)
    if trigger is not None:
        state = replace(state, last_trigger_at=obs.at)
        if state.step == 0 and state.released_until is not None and obs.at < state.released_until:
            # The operator released the guard: it stays away until the quiet time is over.
            return state, []
        wants_step = state.step == 0 or (
            state.step < len(steps) and state.last_step_at is not None
            and obs.at - state.last_step_at >= config.step_after_s
        )
        if wants_step:
            gpus = state.gpus if state.step else _targets(state.known_gpus, config)
            if len(actions) >= config.max_actions_per_hour:
                if state.limited_reported:
                    return state, []
                return replace(state, limited_reported=True), [
                    Decision("limited", state.step, steps[state.step - 1] if state.step else None, trigger, gpus)]
            step = state.step + 1
            kind: DecisionKind = "engage" if state.step == 0 else "step"
            state = replace(
                state, step=step, trigger=trigger if state.step == 0 else state.trigger,
                engaged_at=obs.at if state.step == 0 else state.engaged_at, last_step_at=obs.at,
                gpus=gpus, actions=actions + (obs.at,), limited_reported=False,
            )
            return state, [Decision(kind, step, steps[step - 1], trigger, gpus)]
        return state, []
    quiet = state.last_trigger_at is not None and obs.at - state.last_trigger_at >= config.restore_after_s
    if state.step > 0 and not state.held and quiet and state.unread and not state.unread_reported:
        # Due to restore, but blind: the guard does not take the silence for health (the rail
        # that sagged may still sag), and says so once.
        return replace(state, unread_reported=True), [
            Decision("holding", state.step, steps[state.step - 1] if state.step <= len(steps) else None,
                     unread_text(state.unread, state.read_at), state.gpus, unread_since=state.read_at)]
    # A trigger alarm fired once: it takes no further step, but holds the restore while it fires.
    if state.step > 0 and not state.held and restore_allowed(state, obs.at, config):
        assert state.last_trigger_at is not None and state.read_since is not None
        healthy = min(obs.at - state.last_trigger_at, obs.at - state.read_since,
                      obs.at - (state.alarm_at if state.alarm_at is not None else state.last_trigger_at))
        return release(state, obs.at, f"healthy for {healthy:g} s")
    return state, []


def release(state: GuardState, at: float, why: str, quiet_s: float = 0.0) -> tuple[GuardState, list[Decision]]:
    """Restore the original settings now (the operator's release, or healthy long enough).

    The sags counted so far are forgotten. With ``quiet_s`` (an operator's release) the guard
    does not engage again for that long, whatever triggers; then it is armed again.
    """
    until = at + quiet_s if quiet_s > 0 else None
    if state.step == 0:
        return replace(state, held=False, released_until=until or state.released_until), []
    decision = Decision("restore", 0, None, why, state.gpus)
    return GuardState(actions=state.actions, extends=state.extends,
                      last_trigger_at=state.last_trigger_at,
                      rail_window=state.rail_window, released_until=until, read_at=state.read_at,
                      read_since=state.read_since, unread=state.unread, alarms_firing=state.alarms_firing,
                      alarm_at=state.alarm_at, known_gpus=state.known_gpus), [decision]


def hold(state: GuardState) -> GuardState:
    """Keep the settings in force: no automatic restore until released."""
    return replace(state, held=True)


def _targets(present: tuple[int, ...], config: GuardSection) -> tuple[int, ...]:
    """The GPUs an engage caps: the configured ``gpus`` that are ``present`` (all of them when none
    is), else every ``present`` one.

    ``present`` is what the latest frame listing GPUs had: in the sag's own frame the GPU collector
    may have failed (NVML erroring in a brown-out), which lists no GPU and would cap none.
    """
    if config.gpus:
        return tuple(i for i in config.gpus if i in present) or config.gpus
    return present


def derive_app_clocks(supported: Mapping[int, Sequence[int]], max_graphics_mhz: int | None,
                      fraction: float) -> tuple[int, int] | None:
    """The application-clock pair of step 1 from the GPU's supported clocks.

    The highest memory clock (HBM2 runs at one: 877 MHz on a V100), and the largest graphics
    clock it supports at that memory clock that is at most ``fraction`` of the maximum
    graphics clock (0.66 x 1530 -> 1005 MHz on a V100).

    Args:
        supported: graphics clocks (MHz) by memory clock (MHz).
        max_graphics_mhz: the GPU's maximum graphics clock; ``None``: the largest supported.
        fraction: of the maximum.

    Returns:
        ``(memory_mhz, graphics_mhz)``, or ``None`` when nothing fits.
    """
    if not supported:
        return None
    mem = max(supported)
    graphics = sorted(supported[mem])
    if not graphics:
        return None
    top = max_graphics_mhz or graphics[-1]
    fitting = [g for g in graphics if g <= top * fraction]
    return (mem, fitting[-1]) if fitting else (mem, graphics[0])


def plan_settings(step_name: GuardStepName, current: GuardGpuSettings, app_clocks: tuple[int, int] | None,
                  power_limit_w: float) -> GuardGpuSettings:
    """The settings a step puts on one GPU, starting from what is in force.

    A step only ever lowers: a GPU the operator already runs at lower application clocks or a
    lower power limit than the guard's keeps them (a cap that raised them would add to the sag).

    Args:
        step_name: the step.
        current: the GPU's settings before this step (the previous steps' included).
        app_clocks: ``(memory, graphics)`` MHz of step 1 (configured or derived).
        power_limit_w: the power limit of the last step.
    """
    if step_name == "app_clocks":
        if app_clocks is None:
            return current
        if current.app_clock_graphics_mhz is not None and current.app_clock_graphics_mhz <= app_clocks[1] \
                and current.app_clock_mem_mhz is not None:
            return current
        return msgspec.structs.replace(current, app_clock_mem_mhz=app_clocks[0], app_clock_graphics_mhz=app_clocks[1])
    if step_name == "locked_clocks":
        clocks = [c for c in (app_clocks[1] if app_clocks else None, current.app_clock_graphics_mhz) if c is not None]
        return msgspec.structs.replace(current, locked_clock_max_mhz=min(clocks) if clocks else None)
    if current.power_limit_w is not None and current.power_limit_w <= power_limit_w:
        return current
    return msgspec.structs.replace(current, power_limit_w=power_limit_w)
