"""A node's incident timeline for the node screen: its trouble one step per line, each event merged
with the alarm it raised, the job's marks as the context of that trouble.

Pure (no Textual, no clock, no I/O); `rigmon.cluster.incident` tells why a node is in trouble now.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rigmon.cluster.chart import notable_event
from rigmon.cluster.rail_memory import Sag, after_sag
from rigmon.schema import RESOLVE_ENDINGS, Event

if TYPE_CHECKING:
    from rigmon.cluster.incident import Problem

Level = Literal["bad", "warn", "info"]

#: An alarm event and a hardware event of one subject at most this far apart are one step.
MERGE_S = 5.0


@dataclass(frozen=True, slots=True)
class Step:
    """One line of a node's incident timeline.

    Attributes:
        at: Unix seconds (the agent's clock).
        level: ``bad``, ``warn`` or ``info`` (a resolution, a job mark).
        text: what happened, with its cause where rigmon can see one.
        subject: what it is about.
        alarm: the alarm rule it raised or that fired on it, if any (``gpu_lost``).
        kind: the kind of the event it tells of, where one event (``gpu_process_exited``).
    """

    at: float
    level: Level
    text: str
    subject: str
    alarm: str = ""
    kind: str = ""


_ALARM_KINDS = {"alarm_firing": "firing", "alarm_resolved": "resolved"}
_QUIET_KINDS = {"alarm_pending", "alarm_acknowledged", "agent_started", "agent_stopped"}
#: Events of a job's processes on a GPU: what ran there, not the GPU's own trouble (no alarm's
#: twin, never one line with a GPU's step).
_JOB_KINDS = {"gpu_process_started", "gpu_process_exited", "gpu_process_released", "gpu_process_left"}


def _level(severity: str) -> Level:
    return "bad" if severity == "critical" else "warn" if severity == "warning" else "info"


def _alarm_text(event: Event, change: str) -> str:
    rule = str(event.data.get("rule", ""))
    return event.message.removeprefix(f"{rule} {change}: ")


def _what_ended(text: str) -> str:
    """A resolved alarm's message without its advice: what was wrong, and how it ended when it ended
    without a clear reading (`RESOLVE_ENDINGS`). ``array md127 reads at 67 % of the fastest array loaded
    beside it: a member's link below its speed, ...`` -> ``array md127 reads at 67 % of the fastest array
    loaded beside it``: what to check is for an alarm that fires, not for one over, and the step of its
    firing above says it in full. Cut at the first ``": "`` only after a few words (``path tbnet: key
    mismatch: ...`` keeps its name and what it was)."""
    ending = next((e for e in RESOLVE_ENDINGS.values() if e and text.endswith(e)), "")
    body = text.removesuffix(ending) if ending else text
    head, sep, _ = body.partition(": ")
    if sep and len(head.split()) >= _FEWEST_WORDS:
        body = head
    return body + ending


#: Words a message must say before its first ``": "`` for the rest to be taken for advice (`_what_ended`).
_FEWEST_WORDS = 4


def timeline(events: Sequence[Event], causes: Mapping[str, Sag] | None = None, limit: int = 12,
             now: Sequence[Problem] = (), now_at: float | None = None) -> tuple[Step, ...]:
    """The node's trouble, one step per line, oldest first (the newest ``limit`` steps, the job's marks
    among them only as the context of that trouble: `_with_context_marks`).

    Merged: an alarm firing (or set pending, for a rule with a hold) within `MERGE_S` of a hardware
    event on the same subject is that event's step (the Xid and the GPU lost name their alarm, not a second line); alarms of
    one subject firing together (rail warning and critical) are one step at the worse
    severity. Informational events are left out except alarm resolutions, job marks
    (``mark``) and a process's exit (or its leaving the GPU, unseen by the agent) that followed
    hardware trouble (``after_event``: its exit code is seldom seen, torchrun reaps its workers at
    once), shown plainly. A GPU loss names the rail sag before it.

    Args:
        events: the node's events, oldest first (Xids of several sources already merged).
        causes: the rail sag before each lost GPU, by subject (`RailMemory.causes`).
        limit: steps kept.
        now: the node's current problems; a lagging array among them ends the timeline
            (at ``now_at``), naming a link that retrained before it.
        now_at: time of the newest frame.
    """
    hardware = [e for e in events if e.kind not in _ALARM_KINDS and e.kind not in _QUIET_KINDS
                and e.kind not in _JOB_KINDS]
    jobs = [e for e in events if e.kind in _JOB_KINDS and notable_event(e)]
    # When each alarm began to match: a rule with a hold fires that long after the hardware event that
    # set it pending (an NVMe drive over its warning temperature: 10 s), and is still that event's step.
    pending_at = {str(e.data.get("alarm_id")): e.at for e in events if e.kind == "alarm_pending"}
    steps: list[Step] = []
    for event in events:
        if event.kind in _QUIET_KINDS:
            continue
        change = _ALARM_KINDS.get(event.kind)
        if change == "firing":
            rule = str(event.data.get("rule", ""))
            began = pending_at.get(str(event.data.get("alarm_id")), event.at)
            twin = next((h for h in hardware if h.subject == event.subject and h.severity != "info"
                         and (abs(h.at - event.at) <= MERGE_S or abs(h.at - began) <= MERGE_S)), None)
            if twin is None:
                # An event rule on a process's exit ("the job crashed") says the exit's own message.
                twin = next((j for j in jobs if j.subject == event.subject and abs(j.at - event.at) <= MERGE_S
                             and j.message in event.message), None)
            if twin is not None:
                continue  # shown as its hardware event's step
            text = _alarm_text(event, change)
            level = _level(str(event.data.get("severity", event.severity)))
            last = steps[-1] if steps else None
            if last is not None and last.subject == event.subject and last.alarm and abs(last.at - event.at) <= MERGE_S:
                order = {"bad": 0, "warn": 1, "info": 2}
                if order[level] < order[last.level]:
                    # Escalated (a rail warning and its critical): the worse one speaks.
                    steps[-1] = Step(last.at, level, text, event.subject, rule)
                elif level == last.level:
                    steps[-1] = Step(last.at, level, f"{last.text}; {_without_common_start(last.text, text)}",
                                     event.subject, f"{last.alarm}, {rule}")
                continue
            steps.append(Step(event.at, level, text, event.subject, rule))
        elif change == "resolved":
            rule = str(event.data.get("rule", ""))
            text = _alarm_text(event, change)
            if any(s.subject == event.subject and rule in s.alarm.split(", ") for s in steps):
                # Its firing is a step above, in full: what ended is enough here.
                text = _what_ended(text)
            steps.append(Step(event.at, "info", "resolved: " + text, event.subject, rule))
        elif event.kind == "mark":
            steps.append(Step(event.at, "info", event.message, event.subject, kind="mark"))
        elif event.kind in _JOB_KINDS:
            if notable_event(event):
                steps.append(Step(event.at, _level(event.severity), event.message, event.subject, kind=event.kind))
        elif event.severity != "info":
            alarm = ", ".join(dict.fromkeys(
                str(e.data.get("rule", "")) for e in events if e.kind == "alarm_firing" and e.subject == event.subject
                and (abs(e.at - event.at) <= MERGE_S
                     or abs(pending_at.get(str(e.data.get("alarm_id")), e.at) - event.at) <= MERGE_S)))
            text = event.message
            if event.kind == "gpu_lost":
                index = event.data.get("gpu_index")
                text = f"GPU {index} lost" if index is not None else event.message.split(":")[0]
                sag = (causes or {}).get(event.subject)
                if sag is not None:
                    text += " " + after_sag(sag, event.at)
                reason_text = event.data.get("reason")
                if isinstance(reason_text, str) and reason_text:
                    text += f" ({reason_text})"
                # The Xid 79 that announced this loss is the same step.
                steps = [s for s in steps if not (s.subject == event.subject and "Xid 79" in s.text
                                                  and s.kind not in _JOB_KINDS and abs(s.at - event.at) <= MERGE_S)]
            steps.append(Step(event.at, _level(event.severity), text, event.subject, alarm, kind=event.kind))
    if now_at is not None:
        slowed = [s for s in steps if s.subject.startswith(("link:", "nvme:")) and s.level != "info"]
        for problem in now:
            if problem.subject.startswith("md:") and " % of " in problem.text:
                text = f"{problem.text} now"
                if slowed:
                    text += f", {_slowed_by(slowed[-1])}"
                steps.append(Step(now_at, "warn", text, problem.subject))
    return _with_context_marks(_fold_repeats(_join_twins(steps)), limit)


#: The event kind and the alarm of a drive that reached its warning temperature and throttles.
_HOT_DRIVE = ("nvme_temp_over_max", "nvme_temp_over_warning")


def _slowed_by(step: Step) -> str:
    """What slowed an array, from the step of the link or drive before it: ``after link 0-1 slowed``,
    or ``after NVMe nvme1 reached its warning temperature`` for a drive that throttles (its link is fine)."""
    name = step.subject.split(":", 1)[1]
    if step.kind in _HOT_DRIVE or any(rule in _HOT_DRIVE for rule in step.alarm.split(", ")):
        return f"after NVMe {name} reached its warning temperature"
    return f"after link {name} slowed"


def _with_context_marks(steps: list[Step], limit: int) -> tuple[Step, ...]:
    """The newest ``limit`` steps of trouble, with the job's marks that tell where it stood: the last
    mark before each of those steps, and the newest after the last. A mark is context, never a step
    of its own: none without trouble (a job checkpointing every minute is no incident), and only in
    the room the trouble leaves, the newest first."""
    trouble = [i for i, step in enumerate(steps) if step.kind != "mark"]
    kept = set(trouble[-limit:])
    if not kept:
        return ()
    marks: list[int] = []
    last_mark: int | None = None
    for i, step in enumerate(steps):
        if step.kind == "mark":
            last_mark = i
            continue
        if i in kept and last_mark is not None:
            marks.append(last_mark)
        last_mark = None
    if last_mark is not None:
        marks.append(last_mark)
    room = limit - len(kept)
    kept.update(marks[len(marks) - room:] if room > 0 else ())
    return tuple(steps[i] for i in sorted(kept))


def _join_twins(steps: list[Step]) -> list[Step]:
    """Two hardware steps of one subject within a second (a link's speed change and its
    degraded state) become one line."""
    out: list[Step] = []
    for step in steps:
        last = out[-1] if out else None
        if (last is not None and last.subject == step.subject and step.level != "info" and last.level != "info"
                and abs(step.at - last.at) <= 1.0 and not step.text.startswith("resolved")
                and last.kind not in _JOB_KINDS and step.kind not in _JOB_KINDS):
            level: Level = "bad" if "bad" in (last.level, step.level) else "warn"
            out[-1] = Step(last.at, level, f"{last.text}; {_without_common_start(last.text, step.text)}",
                           last.subject, last.alarm or step.alarm, kind=last.kind)
            continue
        out.append(step)
    return out


def _without_common_start(first: str, second: str) -> str:
    """``second`` without the words it starts with in common with ``first`` (the device's
    name both events repeat), when that is more than a word or two."""
    words_a, words_b = first.split(" "), second.split(" ")
    n = 0
    while n < min(len(words_a), len(words_b)) - 1 and words_a[n] == words_b[n]:
        n += 1
    common = " ".join(words_b[:n])
    return " ".join(words_b[n:]) if n >= 2 and len(common) >= 8 else second


def _fold_repeats(steps: list[Step]) -> list[Step]:
    """A step that repeats on one subject (a corrected PCIe error every few seconds) is one
    step at its latest place, counting the times since the first: ``(×3 since 09:31:21)``."""
    out: list[Step] = []
    seen: dict[tuple[str, str], tuple[int, float]] = {}
    for step in steps:
        key = (step.subject, step.text)
        if key in seen and step.level != "info":
            count, first_at = seen[key]
            out = [s for s in out if (s.subject, s.text.split(" (×")[0]) != key]
            since = time.strftime("%H:%M:%S", time.gmtime(first_at))
            seen[key] = (count + 1, first_at)
            out.append(Step(step.at, step.level, f"{step.text} (×{count + 1} since {since})", step.subject,
                            step.alarm, step.kind))
            continue
        seen[key] = (1, step.at)
        out.append(step)
    return out
