"""``rigmon check`` beside a running agent: the alarms that agent has firing, as the check's findings.

A check samples the node for a few seconds from scratch: it has no inventory (a GPU gone from the
PCI bus is invisible to a fresh NVML) and reads the kernel log from its newest record (an earlier
Xid 79 never reaches it). The agent of its state directory has watched the node all along: after
incident 1 it had ``gpu_lost``, ``gpu_xid_fatal`` and ``psu_rail_low_critical`` firing while the
check, judging the newest rail window alone, passed the node with a warning. So the check asks that
agent (``/v1/alarms``, with its read token and certificate, as for the rail) and reports what fires.

Only an agent recorded in the state directory (`rigmon.agent.state_lock.listening_agent`) is asked:
the configuration's address without such a record is, most often, nobody's; and the alarm state a
stopped agent saved (``alarm-state.json``) is not read, since nothing has watched the node since.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from msgspec.structs import replace

from rigmon.agent.check_rail import AGENT_TIMEOUT_S, agent_to_ask, ask_agent
from rigmon.agent.state_lock import LOCK_FILE, listening_agent
from rigmon.config import AgentConfig, default_state_dir
from rigmon.schema import Alarm, AlarmList

_SEVERITIES = ("info", "warning", "critical")
#: Prefix of the id of a finding taken from the agent (``agent-<its alarm id>``; the check's own are ``check-``).
AGENT_ID_PREFIX = "agent-"
#: An alarm that fired longer ago than this says its date, not only its time of day.
DAY_S = 86400.0


@dataclass(frozen=True)
class AgentAlarms:
    """What the running agent answered on ``/v1/alarms``.

    Attributes:
        url: the agent's base URL.
        firing: its firing alarms, acknowledged ones included.
        pending: how many of its alarms are pending (not past their rule's hold time).
        rules: how many rules it has in force (none: ``[alarms] enabled = false``, it watches for nothing).
    """

    url: str
    firing: tuple[Alarm, ...]
    pending: int = 0
    rules: int = 1


@dataclass(frozen=True)
class NoAgent:
    """No running agent recorded its address in the state directory: no alarms to ask for.

    Attributes:
        lock_file: the lock file the check read.
    """

    lock_file: str


def alarms_from_agent(config: AgentConfig, timeout_s: float = AGENT_TIMEOUT_S) -> AgentAlarms | NoAgent | str:
    """The alarms of the running agent recorded in ``config``'s state directory.

    Returns:
        its answer; `NoAgent` without a recorded agent; else why it could not be read (a sentence).
    """
    state_dir = config.agent.state_dir or str(default_state_dir())
    if listening_agent(state_dir) is None:
        return NoAgent(f"{state_dir}/{LOCK_FILE}")
    agent = agent_to_ask(config)
    got = ask_agent(agent, "/v1/alarms", AlarmList, "alarm list", config.node_name, timeout_s)
    if isinstance(got, str):
        return got
    firing = tuple(a for a in got.active if a.state == "firing")
    return AgentAlarms(agent.url, firing, sum(1 for a in got.active if a.state == "pending"), len(got.rules))


def _clock(at: float, now_at: float) -> str:
    """``06:26:49 UTC``, with the date when ``at`` is more than a day before ``now_at``."""
    when = datetime.fromtimestamp(at, UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC" if now_at - at > DAY_S else "%H:%M:%S UTC")


def as_finding(alarm: Alarm, now_at: float) -> Alarm:
    """The agent's firing ``alarm`` as a finding of the check: its id prefixed with `AGENT_ID_PREFIX`, its
    message saying it is the agent's, since when, and who acknowledged it (still a finding: an operator
    who knows of a lost GPU has not brought it back)."""
    since = alarm.fired_at if alarm.fired_at is not None else alarm.started_at
    message = f"agent alarm: {alarm.message}, since {_clock(since, now_at)}"
    if alarm.acknowledged_at is not None:
        by = f" by {alarm.acknowledged_by}" if alarm.acknowledged_by else ""
        message += f", acknowledged{by} at {_clock(alarm.acknowledged_at, now_at)}"
    return replace(alarm, id=f"{AGENT_ID_PREFIX}{alarm.id}", message=message)


def with_agent_alarms(own: Sequence[Alarm], got: AgentAlarms | NoAgent | str,
                      now_at: float) -> tuple[tuple[Alarm, ...], str]:
    """The check's findings with the agent's firing alarms added, and the note saying what was read.

    A rule on a subject found by both (a rail below its limit) is reported once: the check's own finding
    (its reading is the newest), unless the agent's is more severe.

    Args:
        own: the check's own findings.
        got: what `alarms_from_agent` returned.
        now_at: the check's time (Unix seconds), for the dates of old alarms.
    """
    if isinstance(got, NoAgent):
        return tuple(own), f"agent alarms: no running agent recorded in {got.lock_file}, none read"
    if isinstance(got, str):
        return tuple(own), f"agent alarms not read ({got}): the findings are the check's own"
    findings = list(own)
    for alarm in got.firing:
        same = [a for a in findings if (a.rule, a.subject) == (alarm.rule, alarm.subject)]
        if same and max(_SEVERITIES.index(a.severity) for a in same) >= _SEVERITIES.index(alarm.severity):
            continue
        findings = [a for a in findings if a not in same] + [as_finding(alarm, now_at)]
    firing = f"{len(got.firing)} alarm{'' if len(got.firing) == 1 else 's'} firing" if got.firing else "no alarm firing"
    pending = f", {got.pending} pending (not counted: not yet past a rule's hold time)" if got.pending else ""
    rules = "" if got.rules else " (it has no alarm rules in force: [alarms] enabled = false)"
    return tuple(findings), f"agent alarms: the running agent at {got.url} has {firing}{pending}{rules}"
