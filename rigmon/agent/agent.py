"""Agent: wires collectors, sampler, buffer and HTTP API for one node."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rigmon import __version__
from rigmon.agent.alarm_state import AlarmStateKeeper, state_file_path
from rigmon.agent.alarming import AlarmService
from rigmon.agent.api import ApiState, build_app
from rigmon.agent.request_guard import ASGIApp
from rigmon.agent.buffer import FrameBuffer
from rigmon.agent.guard.api import guard_routes
from rigmon.agent.guard.state_file import report_left_behind_when_disabled
from rigmon.agent.journal import JournalWriter, journal_path
from rigmon.agent.metrics import FrameCollector
from rigmon.agent.rail_path import GpuPowerPathCollector
from rigmon.agent.ratelimit import RateLimiter
from rigmon.agent.sampler import Sampler
from rigmon.agent.state_lock import Listening, StateLock
from rigmon.agent.to_the_end import to_the_end
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rule_config import rules_from_config
from rigmon.alarms.rules import Rule
from rigmon.clock import Clock, SystemClock
from rigmon.collectors import REGISTRY
from rigmon.collectors.base import Collector, CollectorContext
from rigmon.config import AgentConfig, ConfigKeyError, local_url
from rigmon.hw.root import HostRoot
from rigmon.notify.dispatch import Notifiers
from rigmon.notify.senders import Sender
from rigmon.path_resistance import PathStateHolder
from rigmon.redact import redact
from rigmon.schema import SCHEMA_VERSION, Event, Frame, Info, NodeCapture, Severity
from rigmon.typed import to_data

if TYPE_CHECKING:
    from rigmon.agent.guard.service import GuardService

log = logging.getLogger(__name__)


#: Every collector name a frame can carry: the registry's and the agent's own (derived from frames,
#: the guard's state, the journal's health); a state rule's ``collector`` must be one of them.
FRAME_COLLECTOR_NAMES: tuple[str, ...] = (*REGISTRY, "rail_path", "guard", "journal", "notify")


def check_collector_names(config: AgentConfig) -> None:
    """Refuse a ``[collectors.X]`` section that names no collector of the registry.

    Raises:
        ConfigKeyError: naming the first such key and the known collectors.
    """
    unknown = sorted(set(config.collectors) - set(REGISTRY))
    if unknown:
        raise ConfigKeyError(f"collectors.{unknown[0]}: unknown collector (known: {', '.join(REGISTRY)})")


def check_guard_rules(config: AgentConfig, rules: Sequence[Rule]) -> None:
    """Refuse a ``[guard] alarm_rules`` name that no rule in force has: that trigger would never fire.

    Raises:
        ConfigKeyError: naming the key and the first such name.
    """
    names = {rule.name for rule in rules}
    unknown = [name for name in config.guard.alarm_rules if name not in names]
    if unknown:
        raise ConfigKeyError(f"guard.alarm_rules: no alarm rule named {unknown[0]!r} is in force, so it could "
                             "never engage the guard (see [alarms] disable and rules_file)")


def build_collectors(config: AgentConfig, root: HostRoot, clock: Clock,
                     probe_key: bytes | None = None) -> dict[str, Collector]:
    """Instantiate every enabled collector of the registry.

    Raises:
        ConfigKeyError: ``[collectors.X]`` names no collector of the registry.
    """
    check_collector_names(config)
    ctx = CollectorContext(root=root, clock=clock, config=config, probe_key=probe_key)
    return {name: factory(ctx) for name, factory in REGISTRY.items() if config.collector(name).enabled}


def probe_key(config: AgentConfig, token: str | None) -> bytes | None:
    """The latency probes' key: from ``[probes] key_file``, else derived from the read token;
    ``None`` when no ``[[peers]]`` are configured (but this node itself, which is not probed).

    Raises:
        StartupError: the key file is unreadable, or readable by other users.
        ValueError: peers are configured but there is neither a key file nor a token.
    """
    if not config.probed_peers:
        return None
    # Here, not at the top: without peers (the default) the agent needs none of the probes' code.
    from rigmon.probes.wire import derive_key

    if config.probes.key_file:
        # Deferred: rigmon.agent.server imports this module.
        from rigmon.agent.server import read_token_file

        return derive_key(read_token_file(config.probes.key_file, "probes.key_file", bearer=False))
    if token is None:
        raise ValueError("peers: latency probes need a key shared by the cluster: set [probes] key_file, "
                         "or [agent] token_file (the key is derived from the read token)")
    return derive_key(token)


class Agent:
    """One node's agent: sampling into a ring buffer and the journal, served over HTTP.

    Args:
        config: the agent configuration.
        token: bearer token required by the API, or ``None``.
        clock: wall/monotonic time (the simulator passes its accelerated clock).
        collectors: collectors to use instead of the registry's (tests).
        control_token: token of the control scope (acknowledging alarms), or ``None``
            for a read-only API.
        rules: alarm rules to use instead of the configured ones (tests, benchmarks).
        senders: notification senders to use instead of the configured kinds' (tests).

    Raises:
        RuleError: the configured alarm rules are invalid.
    """

    def __init__(
        self,
        config: AgentConfig,
        token: str | None = None,
        clock: Clock | None = None,
        collectors: dict[str, Collector] | None = None,
        control_token: str | None = None,
        rules: tuple[Rule, ...] | None = None,
        senders: list[Sender] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.root = HostRoot(config.agent.root)
        self.run_id = uuid.uuid4().hex[:16]
        if collectors is None:
            collectors = build_collectors(config, self.root, self.clock, probe_key(config, token))
            if "psu" in collectors:
                # Derived from the frame, not from hardware: the rail against the GPUs' power.
                collectors["rail_path"] = GpuPowerPathCollector(lambda: self.buffer.latest if self.buffer else None)
        # The undervolt guard (off by default): its state rides in every frame as a collector's.
        self.guard: GuardService | None = None
        if config.guard.enabled:
            # Here, not at the top: the guard (off by default) and NVML control (pynvml) only where it is on.
            from rigmon.agent.guard.collector import GuardCollector
            from rigmon.agent.guard.service import GuardService
            from rigmon.hw.nvml_control import open_nvml_control

            self.guard = GuardService(
                config.guard, open_nvml_control(self.root, config.guard.call_timeout_s),
                lambda *event: self.sampler.emit_event(*event), self.clock, config.agent.state_dir, config.node_name,
                # Asked after the alarms judged each frame: a trigger alarm holds the restore while it is in force.
                # Looked up each time: a rules reload replaces the engine.
                active_alarms=lambda: self.alarms.engine.in_force(),
            )
            collectors = {**collectors, "guard": GuardCollector(self.guard)}
        intervals = {
            name: config.collector(name).interval_s or config.agent.interval_s for name in collectors
        }
        self.sampler = Sampler(
            node=config.node_name,
            run_id=self.run_id,
            collectors=collectors,
            interval_s=config.agent.interval_s,
            timeout_s=config.agent.collector_timeout_s,
            clock=self.clock,
            intervals=intervals,
        )
        if rules is None:
            rules = rules_from_config(config.alarms, FRAME_COLLECTOR_NAMES)  # checked even when disabled
        if config.guard.enabled and config.alarms.enabled:
            check_guard_rules(config, rules)
        self.notifiers = Notifiers(config.notify, senders)
        if self.notifiers.workers:
            # A receiver that fails (a dead webhook, a revoked ntfy topic) shows in every frame,
            # on the dashboard and in /metrics, rather than only in the agent's log.
            self.sampler.add_status("notify", self.notifiers.status)
        self.alarms = AlarmService(
            AlarmEngine(rules, config.node_name, self.clock, id_prefix=self.run_id, recent_limit=config.alarms.recent,
                        intervals=intervals),
            self.sampler.emit_event,
            self.notifiers,
            control=control_token is not None,
        )
        self.sampler.add_judge(self.alarms.on_frame)
        if self.guard is not None:
            # After the alarms: an alarm that starts firing in a frame triggers the guard in that frame.
            self.sampler.add_judge(self.guard.on_frame)
        self.buffer: FrameBuffer | None = None
        self.metrics: FrameCollector | None = None
        self.token = token
        self.control_token = control_token
        self._task: asyncio.Task[None] | None = None
        self._collectors = collectors
        # Trends, first-seen speeds and acknowledged alarms outlive a restart (a file of
        # their own next to the journal, see rigmon/agent/alarm_state.py).
        self.alarm_state: AlarmStateKeeper | None = None
        self._state_task: asyncio.Task[None] | None = None
        if config.agent.state_dir and config.alarms.persist:
            self.alarm_state = AlarmStateKeeper(
                state_file_path(config.agent.state_dir), self.alarms.engine,
                {name: c for name, c in collectors.items() if isinstance(c, PathStateHolder)},
                config.node_name, self.run_id, self.clock, self.sampler.emit_event,
            )
            self.alarms.hooks.append(self.alarm_state.note_transition)
        self._state_lock: StateLock | None = None
        self.journal: JournalWriter | None = None
        if config.agent.state_dir and config.journal.enabled:
            self.journal = JournalWriter(
                config.agent.state_dir, self.clock, config.journal, self.run_id, self.sampler.node,
                self.sampler.agent_start, info_json=json.dumps(to_data(self.info())),
                config_json=json.dumps(self.redacted_config()),
            )
            journal = self.journal
            self.sampler.add_listener(journal.submit)
            self.sampler.add_status("journal", lambda: journal.status)

    def redacted_config(self) -> dict[str, object]:
        """The configuration as TOML keys, secrets replaced (for snapshots)."""
        data = redact(to_data(self.config))
        assert isinstance(data, dict)
        return data

    def capture(self) -> NodeCapture:
        """The node's part of a bug-report snapshot (blocking reads: call from a thread)."""
        # Here, not at the top: only a snapshot needs it.
        from rigmon.agent.capture import capture_node

        cap = capture_node(self.root, self._collectors)
        return NodeCapture(
            schema=SCHEMA_VERSION,
            node=self.sampler.node,
            taken_at=self.clock.time(),
            info=self.info(),
            config=self.redacted_config(),
            latest=self.buffer.latest if self.buffer is not None else None,
            files=cap.files,
            errors=tuple(cap.errors),
        )

    def info(self) -> Info:
        """Identity and capabilities, as served on /v1/info."""
        return Info(
            schema=SCHEMA_VERSION,
            node=self.sampler.node,
            run_id=self.run_id,
            agent_version=__version__,
            agent_start=self.sampler.agent_start,
            interval_s=self.config.agent.interval_s,
            collectors=self.sampler.collector_names,
            kernel=self.root.read_attr("/proc/sys/kernel/osrelease") or platform.release(),
            buffer_frames=self.config.agent.buffer_frames,
            alarm_rules=self.alarms.engine.rule_names,
        )

    def app(self) -> ASGIApp:
        """The HTTP application; call from the event loop the agent runs on."""
        if self.buffer is None:
            buffer = FrameBuffer(self.config.agent.buffer_frames)
            self.buffer = buffer
            self.sampler.add_listener(buffer.append)
            self.metrics = FrameCollector(lambda: buffer.latest, intervals=self.alarms.engine.intervals)
            self.sampler.add_listener(self.metrics.observe)
        journal = self.journal
        state = ApiState(
            buffer=self.buffer,
            info=self.info,
            token=self.token,
            max_streams=self.config.agent.max_streams,
            max_request_bytes=self.config.agent.max_request_bytes,
            metrics=self.metrics,
            alarms=self.alarms,
            control_token=self.control_token,
            journal_path=journal_path(self.config.agent.state_dir) if self.journal is not None else None,
            journal_status=(lambda: journal.status) if journal is not None else None,
            interval_s=self.config.agent.interval_s,
            now=self.clock.time,
            capture=self.capture,
            rate_limiter=RateLimiter(self.config.agent.rate_limit_per_s, self.config.agent.rate_limit_burst),
            mark=self.mark,
            extra_routes=guard_routes(self.guard, self.control_token, self.token),
        )
        return build_app(state)

    def lock_state_dir(self) -> None:
        """Take the state directory's lock (`StateLock`) if this agent keeps state and has not yet.

        Raises:
            StateDirInUse: another agent holds it.
            StateDirUnusable: it cannot be made or written in (a file there, no permission).
        """
        # The guard keeps the GPUs' original settings there (``guard-state.json``) even when the
        # journal and the alarm state are off: two agents must not restore each other's.
        guard_keeps = self.guard is not None and bool(self.config.agent.state_dir)
        if self._state_lock is None and (self.journal is not None or self.alarm_state is not None or guard_keeps):
            self._state_lock = StateLock(self.config.agent.state_dir)

    def record_listening(self, bound: str) -> None:
        """Record in the state directory's lock file that this agent serves on ``bound`` (``HOST:PORT``
        as bound), with its token file and certificate, for ``rigmon check`` (`state_lock.listening_agent`)."""
        if self._state_lock is not None:
            a = self.config.agent
            # Absolute: the check runs from another directory than the agent was started in.
            files = [os.path.abspath(f) if f else "" for f in (a.token_file, a.tls_cert_file)]
            self._state_lock.record_listening(Listening(local_url(bound, bool(a.tls_cert_file)), *files))

    def mark(self, text: str, by: str | None = None) -> Event:
        """Put a mark from the job (``epoch 3 checkpoint``) on the node's timeline: an event of kind ``mark``.

        It travels in the next frame like any event, so the journal, /v1/history, snapshots and
        /metrics carry it. ``text`` is checked by the API (length, no control characters).
        """
        data: dict[str, str | int | float | bool | None] = {"text": text}
        if by is not None:
            data["by"] = by
        event = self.sampler.emit_event("mark", "info", f"node:{self.sampler.node}", text, data)
        log.info("mark: %s", text)
        return event

    def start(self) -> asyncio.Task[None]:
        """Start sampling on the running event loop.

        Raises:
            StateDirInUse: another agent holds the state directory (nothing was started).
            StateDirUnusable: the state directory cannot be made or written in (nothing was started).
        """
        # Before the journal opens: a second agent must not report the first's run as unclean.
        self.lock_state_dir()
        if self.buffer is None:
            self.app()
        self.notifiers.start()
        if self.journal is not None:
            loop = asyncio.get_running_loop()

            def sink(kind: str, severity: Severity, subject: str, message: str,
                     data: dict[str, str | int | float | bool | None]) -> None:
                # Called from the journal's thread; events belong to the loop's sampler.
                if not loop.is_closed():
                    loop.call_soon_threadsafe(self.sampler.emit_event, kind, severity, subject, message, data)

            self.journal.start(sink)
        if self.alarm_state is not None and self._state_task is None:
            # Before the first frame, so it is evaluated with the restored trends and alarms.
            self.alarm_state.bind_loop(asyncio.get_running_loop())
            self.alarm_state.restore()
            self._state_task = asyncio.get_running_loop().create_task(
                self.alarm_state.run(self.config.alarms.save_interval_s), name=f"alarm-state-{self.sampler.node}")
        if self.guard is not None:
            self.guard.start()
        else:
            report_left_behind_when_disabled(self.config.agent.state_dir, self.sampler.emit_event)
        self._task = asyncio.get_running_loop().create_task(self.sampler.run(), name=f"sampler-{self.sampler.node}")
        return self._task

    async def stop(self) -> None:
        """Stop sampling and release collectors.

        Runs to its end when the caller cancels it meanwhile (a second Ctrl-C, a timeout around
        the stop): the guard's settings are put back, the alarm state saved, the journal closed
        (its thread joined) and the state directory's lock released; then the cancellation is
        raised again. A journal writer left in a write stuck in the kernel (see
        `JournalWriter.close`) keeps the lock held until it ends, or until the process exits.

        Raises:
            CancelledError: the caller cancelled the stop (once it has run to its end).
        """
        await to_the_end(self._stop())

    async def _one_more_frame(self) -> None:
        """Wait for the sampler's next frame (a few intervals at most): the events the guard's restore
        at the stop emitted go out with it (journal, notifiers, ``/v1/events``), not queued for none."""
        if self._task is None or self._task.done():
            return
        published: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def listener(_frame: Frame) -> None:
            if not published.done():
                published.set_result(None)

        self.sampler.add_listener(listener)
        await asyncio.wait({published}, timeout=2 * self.config.agent.interval_s + 1.0)

    async def _stop(self) -> None:
        """The steps of `stop`, in order; awaited to its end by `stop`.

        Raises:
            CancelledError: this task itself was cancelled while it waited for the sampler or the
                state task (the event loop's end), raised once the rest has run.
        """
        cancelled = False
        if self.guard is not None:
            # First, while frames still flow: put back the GPU settings the guard changed.
            restored = await asyncio.to_thread(self.guard.close)
            try:
                if restored:
                    await self._one_more_frame()
            except asyncio.CancelledError:
                cancelled = True
        self.sampler.stop()
        if self._task is not None:
            try:
                # Not asyncio.wait_for: on Python 3.11 it swallows a cancel of the stop that comes as the task ends.
                async with asyncio.timeout(5):
                    await self._task
            except TimeoutError:
                self._task.cancel()
            except asyncio.CancelledError:
                # The sampler task's own end (cancelled by its owner) is no cancellation of the stop.
                cancelled = _cancelling()
        if self.alarm_state is not None and self._state_task is not None:
            self._state_task.cancel()
            try:
                await self._state_task
            except asyncio.CancelledError:
                cancelled = _cancelling() or cancelled  # else its own end: cancelled just above
            self._state_task = None
            # After the sampler: the last frame's trends and alarms are in the snapshot.
            await asyncio.to_thread(self.alarm_state.save, self.alarm_state.snapshot())
        # Joining the notifier threads blocks; do it off the event loop.
        await asyncio.get_running_loop().run_in_executor(None, self.notifiers.close)
        journal_ended = True
        if self.journal is not None:
            # After the sampler: its last frames are queued; closing writes them and the clean stop.
            # No frame follows to carry the events emitted since the last one (the journal's own
            # among them, once handed to the loop: the sleep lets those calls run); the clean stop's
            # record does, and the writer keeps its own from here on.
            self.journal.hold_events()
            await asyncio.sleep(0)
            journal_ended = await asyncio.to_thread(self.journal.close, None, self.sampler.take_events())
        if self._state_lock is not None:
            release, self._state_lock = self._state_lock.release, None
            if self.journal is None:
                release()
            else:
                if not journal_ended:
                    log.error("state directory %s stays locked until the journal's writer ends (or this process "
                              "exits): another agent must not take it while that writer may still write there",
                              self.config.agent.state_dir)
                # Released once the writer thread has ended, by that thread as its last act when it
                # outlived `close`. Not sooner: an orphaned writer begins no write after its call
                # returns (decided under the writer's lock), but that call, stuck in the kernel,
                # still writes when it returns; a writer that took the store first still closes it
                # (a checkpoint). At its end nothing of the journal writes below the directory.
                self.journal.when_ended(release)
        if cancelled:
            raise asyncio.CancelledError


def _cancelling() -> bool:
    """Whether the running task has been asked to cancel (not only an awaited task ended cancelled)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
