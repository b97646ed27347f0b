"""``rigmon check``: run every collector once (twice, for rates) and the node rules, as a gate before a job."""

from __future__ import annotations

import threading
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from msgspec.structs import replace

from rigmon.agent.agent import FRAME_COLLECTOR_NAMES, build_collectors
from rigmon.agent.check_alarms import AgentAlarms, NoAgent, with_agent_alarms
from rigmon.agent.check_rail import (
    PortOfRunningAgent,
    rail_from_agent,
    running_agent_reads_port,
)
from rigmon.agent.guard.state_file import state_file_note
from rigmon.agent.sampler import ROUTES
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rule_config import rules_from_config
from rigmon.alarms.rules import Rule
from rigmon.clock import Clock
from rigmon.collectors.base import (
    Collector,
    CollectorError,
    CollectorStarting,
    EventDraft,
    NoData,
)
from rigmon.config import AgentConfig, default_state_dir
from rigmon.hw.nvml.watchdog import RunningStopwatch, wait_running
from rigmon.hw.nvml_control import open_nvml_control
from rigmon.hw.root import HostRoot
from rigmon.schema import (
    SCHEMA_VERSION,
    Alarm,
    CollectorStatus,
    Event,
    Frame,
    GpuProcessReading,
    PsuAdcCounters,
    PsuRailReading,
    Readings,
    Severity,
)

CheckStatus = Literal["ok", "warning", "critical"]
#: GPU memory in use with no process listed that makes a GPU count as busy (a process NVML
#: cannot name to this namespace, or a driver leak): an idle GPU holds a few MiB at most.
BUSY_MEMORY_BYTES = 1024**3
GIB = 1024**3
EXIT_CODES: dict[CheckStatus, int] = {"ok": 0, "warning": 1, "critical": 2}
#: Longest the check waits, after its passes, for the rail ADC's first window: the reader opens
#: the port, drops the partial first line and asks the device who it is, so a 1 s window comes a
#: second or two after the open, often after two passes a second apart.
RAIL_WAIT_S = 5.0
#: Pause between the passes of that wait.
RAIL_POLL_S = 0.5
#: Longest the check waits, after its passes, for collectors that are starting (a slow first
#: nvmlInit without persistence mode: seconds on a V100 box) to read: longer than NVML's own
#: budget for that init (`rigmon.hw.nvml.binding.INIT_TIMEOUT_S`, 60 s), after which the GPU
#: collectors call it hung, so a gate never passes GPUs it did not read.
STARTING_WAIT_S = 70.0
_SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What ``rigmon check`` found (``--json`` prints it).

    Attributes:
        status: ``critical`` if any critical finding, else ``warning`` if any warning, else ``ok``.
        exit_code: 2, 1 or 0 accordingly.
        collectors: each collector's health after the last pass.
        findings: alarms the rules raised, pending ones included (a one-shot check cannot
            wait out a rule's hold time), and the running agent's firing alarms (ids ``agent-...``).
        rules: the rules evaluated.
    """

    node: str
    root: str
    checked_at: float
    status: CheckStatus
    exit_code: int
    collectors: dict[str, CollectorStatus]
    findings: tuple[Alarm, ...]
    rules: tuple[str, ...] = ()
    events: tuple[Event, ...] = field(default_factory=tuple)
    guard: str | None = None
    """Whether the undervolt guard could act on this node (``None``: not checked)."""
    notes: tuple[str, ...] = ()
    """What the check did besides collecting (the rail read from the running agent, its alarms read or not)."""


def _joined(thread: threading.Thread, timeout_s: float) -> bool:
    """Join ``thread`` for up to ``timeout_s``; whether it has ended."""
    thread.join(timeout_s)
    return not thread.is_alive()


def _collect(collector: Collector, timeout_s: float) -> tuple[CollectorStatus, list[object]]:
    """Run one collection in a daemon thread, so a hung driver call cannot keep the process alive."""
    result: list[tuple[str, object]] = []

    def target() -> None:
        try:
            result.append(("ok", list(collector.collect())))
        except NoData as exc:
            result.append(("absent", str(exc) or "not present"))
        except CollectorStarting as exc:
            result.append(("pending", str(exc) or "starting"))
        except CollectorError as exc:
            result.append(("error", str(exc) or "failed"))
        except Exception as exc:  # noqa: BLE001 - every failure is a finding, none escapes
            result.append(("error", f"{type(exc).__name__}: {exc}"))

    t0 = time.monotonic()
    thread = threading.Thread(target=target, name=f"rigmon-check-{collector.name}", daemon=True)
    thread.start()
    # Counting only the time this process ran: a check stopped (^Z) or its VM paused through the
    # wait calls nothing hung.
    wait_running(partial(_joined, thread), timeout_s)
    duration_s = round(time.monotonic() - t0, 6)
    if not result:
        return CollectorStatus(state="hung", ok=False, error=f"no answer for {timeout_s:.1f} s"), []
    state, payload = result[0]
    if state == "ok":
        assert isinstance(payload, list)
        return CollectorStatus(state="ok", ok=True, duration_s=duration_s), payload
    return CollectorStatus(state=typing.cast(typing.Any, state), ok=state == "absent", error=str(payload),
                           duration_s=duration_s), []


def readings_from(records: Sequence[object]) -> Readings:
    """Route schema records into `Readings` by type, as the sampler does."""
    fields: dict[str, object] = {}
    for record in records:
        route = ROUTES.get(type(record))
        if route is None:
            continue
        name, many = route
        if many:
            fields[name] = typing.cast(tuple[object, ...], fields.get(name, ())) + (record,)
        else:
            fields[name] = record
    return replace(Readings(), **fields)


def run_check(
    config: AgentConfig,
    clock: Clock,
    collectors: dict[str, Collector] | None = None,
    rules: Sequence[Rule] | None = None,
    passes: int = 2,
    pause_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    guard_probe: Callable[[], GuardAccess] | None = None,
    agent_rail: Callable[[], PsuRailReading | str] | None = None,
    starting_wait_s: float = STARTING_WAIT_S,
    monotonic: Callable[[], float] = time.monotonic,
    agent_alarms: Callable[[], AgentAlarms | NoAgent | str] | None = None,
) -> CheckReport:
    """Collect ``passes`` times, ``pause_s`` apart, and evaluate the node rules on each frame.

    ``guard_probe`` says whether the undervolt guard could change GPU clocks here (all of its steps,
    application clocks only, or none, and why); by default NVML is asked when the collectors are the
    configured ones.
    ``agent_rail`` gives the rail as the running agent reads it (or why it cannot), asked when
    the ``psu`` collector cannot open the ADC's port because another process holds it, or at once
    when the collectors are the configured ones and the state directory records a running agent (the
    check then never opens the port: `PortOfRunningAgent`); by default the agent of ``config`` is
    asked (`rigmon.agent.check_rail`). Collectors still
    starting after the passes (``pending``: NVML's first init) get more passes for up to
    ``starting_wait_s`` seconds of the check's running time (from its first pass; ``monotonic``
    is the clock it is counted on: a check stopped with ^Z does not use it up, as it does not
    use up NVML's budget for that init), and a warning if they never read.
    ``agent_alarms`` gives the alarms of the running agent (`rigmon.agent.check_alarms.alarms_from_agent`),
    asked after the passes: its firing ones are findings too (`with_agent_alarms`); ``None``: not asked.

    Raises:
        RuleError: the configured rules are invalid.
        ValueError: an unknown collector is configured.
    """
    if collectors is None:
        collectors = build_collectors(config, HostRoot(config.agent.root), clock)
        if "psu" in collectors and running_agent_reads_port(config):
            # Never open the port of the agent running on this state directory, not even while its
            # reader waits to reopen it: the agent would miss the ADC for the whole check.
            collectors["psu"].close()
            collectors["psu"] = PortOfRunningAgent(config.agent.state_dir or str(default_state_dir()))
        if guard_probe is None:
            guard_probe = _nvml_guard_probe(config)
        if agent_rail is None:
            agent_rail = partial(rail_from_agent, config)
    if rules is None:
        rules = rules_from_config(config.alarms, FRAME_COLLECTOR_NAMES)  # checked even when disabled
    engine = AlarmEngine(rules, config.node_name, clock, id_prefix="check")
    pushed: list[object] = []
    lock = threading.Lock()

    def push(records: Sequence[object]) -> None:
        with lock:
            pushed.extend(records)

    for c in collectors.values():
        c.start(push)
    all_events: list[Event] = []
    statuses: dict[str, CollectorStatus] = {}
    # A peers file copied to every node lists this one too: it is skipped, not a failure.
    notes: list[str] = [config.own_peer_note] if config.own_peer_note is not None else []
    # An entry under another name whose address is this node's (its own agent's port) is skipped too.
    notes += getattr(collectors.get("peer_probes"), "own_address_notes", ())
    # Whether the last pass's rail is the running agent's: its counters are the agent's, since its start.
    rail_of_agent = [False]

    def one_pass(seq: int) -> Readings:
        records: list[object] = []
        for name, c in collectors.items():
            col_status, got = _collect(c, config.agent.collector_timeout_s)
            if agent_rail is not None and col_status.state == "error" and getattr(c, "port_busy", False):
                # The running agent holds the ADC's port: its reading is the rail's, not a failure.
                col_status, got = _rail_of_agent(col_status, agent_rail(), notes)
                rail_of_agent[0] = True
            statuses[name] = replace(col_status, sampled_at=clock.time())
            records.extend(got)
        with lock:
            records.extend(pushed)
            pushed.clear()
        events = [_event(d, len(all_events) + i, clock) for i, d in
                  enumerate(r for r in records if isinstance(r, EventDraft))]
        all_events.extend(events)
        got_readings = readings_from(records)
        frame = Frame(schema=SCHEMA_VERSION, node=config.node_name, run_id="check", seq=seq,
                      taken_at=clock.time(), agent_start=clock.time(), collectors=dict(statuses),
                      readings=got_readings, events=tuple(events))
        engine.evaluate(frame)
        return got_readings

    readings = Readings()
    rail_waited_s = 0.0
    # Running time, as NVML's init budget (`rigmon.hw.nvml.binding`): a check stopped (^Z) for
    # longer than the wait called GPUs whose init then returned at once still starting.
    ran = RunningStopwatch("check-starting", monotonic).start()
    waited_s = 0.0
    try:
        for n in range(passes):
            if n:
                sleep(pause_s)
            readings = one_pass(n + 1)
        seq = passes
        # A gate that never read the rail must not pass it: wait for the ADC's first window. Nor
        # GPUs whose NVML is still starting: they are not known yet, neither absent nor failing.
        waited_for = sorted(_starting(statuses))
        while ((_rail_unread(readings) and rail_waited_s < RAIL_WAIT_S)
               or (_starting(statuses) and _ran_s(ran) < starting_wait_s)):
            sleep(RAIL_POLL_S)
            rail_waited_s += RAIL_POLL_S
            seq += 1
            readings = one_pass(seq)
        waited_s = _ran_s(ran)
        started = [name for name in waited_for if statuses[name].state != "pending"]
        if started:
            notes.append(f"{', '.join(started)}: read after waiting {waited_s:.0f} s for "
                         "them to start (NVML's first init: without persistence mode, nvidia-smi -pm 1)")
    finally:
        ran.stop()
        for c in collectors.values():
            c.close()
    guard = None if guard_probe is None else guard_line(config, guard_probe())
    findings = (engine.active() + busy_gpus(readings, config.node_name, clock.time())
                + narrow_gpu_links(readings, config.node_name, clock.time()))
    if _rail_unread(readings):
        # Says what the agent's `psu_adc_silent` would, with the port and the time waited.
        findings = tuple(a for a in findings if a.rule != "psu_adc_silent") + (
            _rail_not_read(readings, config.node_name, clock.time(), (passes - 1) * pause_s + rail_waited_s,
                           None if rail_of_agent[0] else config.psu.primary),)
    findings += tuple(_not_started(name, st, config.node_name, clock.time(), waited_s)
                      for name, st in _starting(statuses).items())
    if agent_alarms is not None:
        findings, said = with_agent_alarms(findings, agent_alarms(), clock.time())
        notes.append(said)
    worst = max((_SEVERITIES.index(a.severity) for a in findings), default=0)
    status: CheckStatus = "critical" if worst == 2 else "warning" if worst == 1 else "ok"
    return CheckReport(node=config.node_name, root=config.agent.root, checked_at=clock.time(), status=status,
                       exit_code=EXIT_CODES[status], collectors=statuses, findings=findings,
                       rules=engine.rule_names, events=tuple(all_events), guard=guard, notes=tuple(notes))


def _rail_of_agent(status: CollectorStatus, got: PsuRailReading | str,
                   notes: list[str]) -> tuple[CollectorStatus, list[object]]:
    """The ``psu`` collector's pass when the running agent holds the port: the agent's reading, or
    the failure with why the agent could not be asked."""
    if isinstance(got, str):
        return replace(status, error=f"{status.error}; {got}"), []
    note = "psu: the running agent holds the rail ADC's port; the rail is the agent's newest reading"
    if note not in notes:
        notes.append(note)
    return replace(status, state="ok", ok=True, error=None), [got]


def _ran_s(stopwatch: RunningStopwatch) -> float:
    """The check's running time so far, looked at now: each poll's pause then counts on its own (two
    pauses between two of the stopwatch's own looks would count as one slice)."""
    stopwatch.look()
    return stopwatch.elapsed()


def _starting(statuses: dict[str, CollectorStatus]) -> dict[str, CollectorStatus]:
    """The collectors whose last pass said they are starting (not known yet)."""
    return {name: st for name, st in statuses.items() if st.state == "pending"}


def _not_started(name: str, status: CollectorStatus, node: str, now_at: float, waited_s: float) -> Alarm:
    return Alarm(id=f"check-starting-{name}", rule="collector_starting", rule_kind="check", severity="warning",
                 node=node, subject=f"collector:{name}", state="firing", started_at=now_at, updated_at=now_at,
                 fired_at=now_at, message=f"collector {name} still starting after {waited_s:.0f} s, not checked: "
                                          f"{status.error or 'starting'}")


def _rail_unread(readings: Readings) -> bool:
    """Whether a rail ADC is configured but no window of it has arrived: none yet (the reader does
    not call a port silent in its first seconds), or none for its stale limit (``stale``)."""
    rail = readings.psu_rail
    return rail is not None and (rail.stale or rail.volts is None)


#: Why lines of a rail ADC gave no reading, as its counters count them (`PsuAdcCounters`).
_DROPPED = (("nonsense_lines_total", "out of range: in mV or mA without [psu.scale]?"),
            ("malformed_lines_total", "malformed"), ("checksum_errors_total", "failing their checksum"),
            ("long_lines_total", "over-long"), ("ignored_lines_total", "without a channel [psu.channels] reads"))


def _rail_not_read(readings: Readings, node: str, now_at: float, waited_s: float, primary: str | None) -> Alarm:
    """The finding of a rail not read; ``primary`` is the configured channel when the check read the port
    itself, ``None`` when the reading is the running agent's (whose counters run since its start)."""
    rail = readings.psu_rail
    assert rail is not None
    sent, why = ("no reading", "") if primary is None else _rail_sent(rail.counters, primary)
    return Alarm(id="check-rail-1", rule="psu_rail_not_read", rule_kind="check", severity="warning", node=node,
                 subject="psu", state="firing", started_at=now_at, updated_at=now_at, fired_at=now_at,
                 message=f"the rail ADC on {rail.port} sent {sent} in {waited_s:.0f} s{why}: "
                         "the 12 V rail was not checked")


def _rail_sent(counters: PsuAdcCounters, primary: str) -> tuple[str, str]:
    """What a rail ADC that gave no reading sent (``no reading``, ``60 lines``), and why none was one.

    "sent no reading" of a device that sent a line every 100 ms, each dropped (a sketch printing mV
    read 12030 V), sent the operator to the wiring instead of the configuration.
    """
    lines = counters.lines_total  # the cut line after each open is counted apart, never here
    if lines <= 0:
        return "no reading", ""
    why = [f"{getattr(counters, key)} {what}" for key, what in _DROPPED if getattr(counters, key)]
    if counters.windows_total:
        why.append(f"{counters.windows_total} without samples of psu.primary = \"{primary}\"")
    return f"{lines} line{'s' if lines != 1 else ''}", f" but no reading ({'; '.join(why) or 'none read'})"


#: How much of its work the undervolt guard could do on a node: every step, only the first
#: (application clocks: ``nvidia-smi -acp UNRESTRICTED`` without root, later steps refused), or none.
GuardReach = Literal["every_step", "app_clocks_only", "none"]


@dataclass(frozen=True, slots=True)
class GuardAccess:
    """What NVML answered when asked whether the undervolt guard could change GPU settings here.

    Attributes:
        reach: how much of its work the guard could do.
        why: NVML's answer when it could not do all of it (``None`` for ``every_step``).
    """

    reach: GuardReach = "every_step"
    why: str | None = None


def _nvml_guard_probe(config: AgentConfig) -> Callable[[], GuardAccess]:
    def probe() -> GuardAccess:
        control = open_nvml_control(HostRoot(config.agent.root), config.guard.call_timeout_s)
        try:
            cannot = control.probe()
            if cannot is not None:
                return GuardAccess("none", cannot)
            limited = control.probe_limits()
            return GuardAccess() if limited is None else GuardAccess("app_clocks_only", limited)
        finally:
            control.close()

    return probe


def guard_line(config: AgentConfig, access: GuardAccess) -> str:
    """One line on the undervolt guard: configured how, whether it could act (``access``), and the caps
    its state file says are in force."""
    guard = config.guard
    setting: str = "off" if not guard.enabled else guard.mode
    left = state_file_note(config.agent.state_dir)
    if left is not None:
        setting += f"; {left}"
    if access.reach == "every_step":
        return f"{setting}; it could act on this node (NVML accepts clock changes)"
    if access.reach == "app_clocks_only":
        return (f"{setting}; it could cap application clocks on this node, but not lock clocks or set a power "
                f"limit (they need root): {access.why}")
    return f"{setting}; it could not act on this node: {access.why}"


def busy_gpus(readings: Readings, node: str, now_at: float) -> tuple[Alarm, ...]:
    """Warnings for GPUs already in use before the job starts: processes on them, or memory in use.

    A stale job (or a notebook kernel) holding a GPU makes the next run fail with out-of-memory or
    share the GPU unnoticed; a pre-run gate should say so.
    """
    found: list[Alarm] = []

    def finding(subject: str, message: str, value: int | None) -> None:
        found.append(Alarm(id=f"check-busy-{len(found) + 1}", rule="gpu_busy", rule_kind="check", severity="warning",
                           node=node, subject=subject, state="firing", message=message, started_at=now_at,
                           updated_at=now_at, fired_at=now_at, value=value))

    def who(procs: Sequence[GpuProcessReading]) -> str:
        names = [f"{p.command or 'pid'} (pid {p.pid}{f', {p.user}' if p.user else ''})" for p in procs[:3]]
        more = f" and {len(procs) - 3} more" if len(procs) > 3 else ""
        return ", ".join(names) + more

    def holding(procs: Sequence[GpuProcessReading]) -> str:
        return "1 process holds" if len(procs) == 1 else f"{len(procs)} processes hold"

    def used(procs: Sequence[GpuProcessReading]) -> int | None:
        sizes = [p.gpu_mem_bytes for p in procs if p.gpu_mem_bytes is not None]
        return sum(sizes) if sizes else None

    for gpu in readings.gpus:
        if gpu.state != "ok":
            continue
        procs = [p for p in readings.gpu_processes if p.vendor == "nvidia" and p.gpu_index == gpu.index]
        if procs:
            total = used(procs)
            memory = f"{total / GIB:.1f} GiB" if total is not None else "memory"
            finding(f"gpu:{gpu.index}", f"GPU {gpu.index} is busy: {holding(procs)} {memory}: {who(procs)}", total)
        elif gpu.mem_used_bytes is not None and gpu.mem_used_bytes >= BUSY_MEMORY_BYTES:
            finding(f"gpu:{gpu.index}", f"GPU {gpu.index} has {gpu.mem_used_bytes / GIB:.1f} GiB of memory in use "
                                        "and no process this node can see", gpu.mem_used_bytes)
    for amd in readings.amd_gpus:
        procs = [p for p in readings.gpu_processes if p.vendor == "amd" and p.pci_bus_id is not None
                 and p.pci_bus_id == amd.pci_bus_id]
        if procs:
            total = used(procs)
            memory = f"{total / GIB:.1f} GiB" if total is not None else "memory"
            # The subject by PCI address, as the GPU's process events name it: the card number may
            # name another GPU after a reboot. The message names the card too (/sys/class/drm/card1).
            finding(f"amd_gpu:{amd.pci_bus_id}", f"AMD GPU {amd.card} ({amd.pci_bus_id}) is busy: "
                                                 f"{holding(procs)} {memory}: {who(procs)}", total)
    return tuple(found)


def narrow_gpu_links(readings: Readings, node: str, now_at: float) -> tuple[Alarm, ...]:
    """Warnings for GPUs whose PCIe link trained narrower than it can (x8 of x16).

    Incident 4: a loosely seated SXM2 module (or a bad riser) trains its link narrow; the replay
    and CRC counters that rise under load are still quiet before a job. The width only: an idle
    GPU drops its link's generation to save power, not its width.
    """
    found: list[Alarm] = []
    for gpu in readings.gpus:
        if gpu.state != "ok" or gpu.pcie_width is None or gpu.pcie_width_max is None:
            continue
        if gpu.pcie_width < gpu.pcie_width_max:
            where = f" ({gpu.pci_bus_id})" if gpu.pci_bus_id else ""
            found.append(Alarm(id=f"check-pcie-{len(found) + 1}", rule="gpu_pcie_narrow", rule_kind="check",
                               severity="warning", node=node, subject=f"gpu:{gpu.index}", state="firing",
                               message=f"GPU {gpu.index}{where} PCIe link at x{gpu.pcie_width} of "
                                       f"x{gpu.pcie_width_max}: re-seat it (SXM2 torque, riser)",
                               started_at=now_at, updated_at=now_at, fired_at=now_at, value=gpu.pcie_width))
    return tuple(found)


def _event(draft: EventDraft, n: int, clock: Clock) -> Event:
    severity: Severity = typing.cast(Severity, draft.severity) if draft.severity in _SEVERITIES else "warning"
    return Event(id=f"check-{n + 1}", at=draft.at if draft.at is not None else clock.time(), kind=draft.kind,
                 severity=severity, subject=draft.subject, message=draft.message, data=dict(draft.data or {}))
