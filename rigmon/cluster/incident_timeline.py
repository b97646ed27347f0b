"""A node's incident timeline for the node screen: its trouble one step per line, each event merged
with the alarm it raised, the job's marks as the context of that trouble.

Pure (no Textual, no clock, no I/O); `rigmon.cluster.incident` tells why a node is in trouble now.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, TypeGuard

from rigmon.cluster.chart import notable_event
from rigmon.cluster.rail_memory import Sag, after_sag
from rigmon.schema import RESOLVE_ENDINGS, Event

if TYPE_CHECKING:
    from rigmon.cluster.incident import Problem
    from rigmon.schema import Frame

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
#: The undervolt guard capping GPUs (warnings), and what ends or keeps those caps (info: an operator's hold,
#: a restore): after a cap, the caps coming off is the incident's story (a GPU lost after a release).
_GUARD_CAP_KINDS = {"guard_engaged", "guard_step", "guard_extended"}
_GUARD_AFTER_KINDS = {"guard_held", "guard_restored"}


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
    return _advice_of(body)[0] + ending


#: Words a message must say before its first ``": "`` for the rest to be taken for advice (`_advice_of`).
_FEWEST_WORDS = 4


def _advice_of(text: str) -> tuple[str, str]:
    """``text`` as what happened and the advice after it (``""`` when none): split at its first ``": "``,
    only after a few words (``path tbnet: key mismatch: ...`` keeps its name and what it was)."""
    head, sep, advice = text.partition(": ")
    if sep and len(head.split()) >= _FEWEST_WORDS:
        return head, advice
    return text, ""


def timeline(events: Sequence[Event], causes: Mapping[str, Sag] | None = None, limit: int = 12,
             now: Sequence[Problem] = (), now_at: float | None = None,
             frame: Frame | None = None) -> tuple[Step, ...]:
    """The node's trouble, one step per line, oldest first (the newest ``limit`` steps, the job's marks
    among them only as the context of that trouble: `_with_context_marks`).

    Merged: an alarm firing (or set pending, for a rule with a hold) within `MERGE_S` of a hardware
    event on the same subject is that event's step (the Xid and the GPU lost name their alarm, not a
    second line); alarms of one subject firing together (rail warning and critical) are one step at the
    worse severity. Informational events are left out except alarm resolutions, job marks
    (``mark``) and a process's exit (or its leaving the GPU, unseen by the agent) that followed
    hardware trouble (``after_event``: its exit code is seldom seen, torchrun reaps its workers at
    once), shown plainly, and after the guard capped GPUs, its hold and restore (`_GUARD_AFTER_KINDS`). A GPU loss names the rail sag before it. Advice is said once (`_advice_once`).

    Args:
        events: the node's events, oldest first (Xids of several sources already merged).
        causes: the rail sag before each lost GPU, by subject (`RailMemory.causes`).
        limit: steps kept.
        now: the node's current problems; a lagging array among them ends the timeline
            (at ``now_at``), naming the drive of that array or the link that slowed before it
            (`_cause_of`).
        now_at: time of the newest frame.
        frame: the newest frame: which md arrays each NVMe drive is in (`_arrays_of`).
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
        elif event.kind in _GUARD_AFTER_KINDS:
            if any(s.kind in _GUARD_CAP_KINDS for s in steps):
                steps.append(Step(event.at, "info", _without_settings(event), event.subject, kind=event.kind))
        elif event.kind in _JOB_KINDS:
            if notable_event(event):
                steps.append(Step(event.at, _level(event.severity), event.message, event.subject, kind=event.kind))
        elif event.severity != "info":
            alarm = ", ".join(dict.fromkeys(
                str(e.data.get("rule", "")) for e in events if e.kind == "alarm_firing" and e.subject == event.subject
                and (abs(e.at - event.at) <= MERGE_S
                     or abs(pending_at.get(str(e.data.get("alarm_id")), e.at) - event.at) <= MERGE_S)))
            text = event.message
            if event.kind == _HOT_DRIVE[0]:
                text = _hot_drive_text(event)
            elif event.kind in _GUARD_CAP_KINDS:
                text = _without_settings(event)
            elif event.kind == "gpu_lost":
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
        feeds = {s.subject: _arrays_of(s.subject, events, frame) for s in slowed}
        for problem in now:
            if problem.subject.startswith("md:") and " % of " in problem.text:
                text = f"{problem.text} now"
                cause = _cause_of(problem.subject.split(":", 1)[1], slowed, feeds)
                if cause is not None:
                    text += f", {_slowed_by(cause)}"
                    # The array's alarm lists the causes to check; this step names the one seen: the
                    # alarm's step says what it found, without the list (4 lines at 80 columns).
                    steps = [replace(st, text=_what_ended(st.text)) if st.subject == problem.subject and st.alarm
                             and st.level != "info" else st for st in steps]
                steps.append(Step(now_at, "warn", text, problem.subject))
    return _advice_once(_with_context_marks(_fold_repeats(_join_twins(steps)), limit))


def _without_settings(event: Event) -> str:
    """A guard event's message without the settings it left each GPU with (``: gpu0 877/1005 MHz 300 W;
    gpu1 ...``, its ``data.after``): the guard's line and the event list say them; at 80 columns they took
    three lines of the step."""
    after = event.data.get("after")
    if not isinstance(after, str) or not after:
        return event.message
    return event.message.replace(f": {after}", "", 1)


def _hot_drive_text(event: Event) -> str:
    """A drive's step at its warning temperature in one line at 80 columns: ``NVMe nvme0 at 81.86 °C ≥
    warning limit 81.85 °C, in md127``, then its event's advice (``: it throttles its reads; check the
    enclosure's fan and airflow``, said once by `_advice_once`). The event's message also names the model and
    the critical limit (the storage box shows both): three lines a drive, and an enclosure of four drives
    pushed the array's step off the screen. The message as it is when its data lacks the temperature."""
    name = event.subject.split(":", 1)[1]
    temp, limit, arrays = (event.data.get(key) for key in ("temp_c", "temp_max_c", "md_arrays"))
    if _is_number(temp) and _is_number(limit):
        text = f"NVMe {name} at {_celsius(temp)} ≥ warning limit {_celsius(limit)}"
    elif _is_number(temp):
        text = f"NVMe {name} at {_celsius(temp)}, its temperature warning bit set"
    elif _is_number(limit):
        text = f"NVMe {name}, its temperature warning bit set (warning limit {_celsius(limit)})"
    else:
        return event.message
    if isinstance(arrays, str) and arrays.split():
        text += f", in {', '.join(arrays.split())}"
    advice = _advice_of(event.message)[1]
    return f"{text}: {advice}" if advice else text


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _celsius(value: float) -> str:
    # To the hundredth, as the kernel's Kelvin conversion gives a limit (81.85 °C, not 81.8).
    return f"{round(value, 2):g} °C"


def _advice_once(steps: Sequence[Step]) -> tuple[Step, ...]:
    """The steps with advice said once: a step whose advice (`_advice_of`) a step above gave leaves it
    out. The drives of one enclosure reaching their warning temperature say "check the enclosure's fan
    and airflow" on the first drive's step, the others' steps are one line each at 80 columns (with it,
    two to three lines each pushed the timeline's later steps off an 80x24 screen). A repeat count
    (``(×3 since 09:31:21)``) stays. Job marks and resolutions are left as they are."""
    said: set[str] = set()
    out: list[Step] = []
    for step in steps:
        body, times, count = step.text.partition(" (×")
        head, advice = _advice_of(body)
        if advice and step.level != "info":
            if advice in said:
                step = replace(step, text=head + times + count)
            said.add(advice)
        out.append(step)
    return tuple(out)


#: The event kind and the alarm of a drive that reached its warning temperature and throttles.
_HOT_DRIVE = ("nvme_temp_over_max", "nvme_temp_over_warning")


def _slowed_by(step: Step) -> str:
    """What slowed an array, from the step of the link or drive before it: ``after link 0-1 slowed``,
    ``after NVMe nvme1 reached its warning temperature`` for a drive that throttles (its link is fine), or
    ``after NVMe nvme1's PCIe link slowed`` for a drive's own link."""
    name = step.subject.split(":", 1)[1]
    if step.kind in _HOT_DRIVE or any(rule in _HOT_DRIVE for rule in step.alarm.split(", ")):
        return f"after NVMe {name} reached its warning temperature"
    if step.subject.startswith("nvme:"):
        # A drive's own PCIe link (trained below, lost): the drive is named as such, not as a "link nvme0".
        return f"after NVMe {name}'s PCIe link slowed"
    return f"after link {name} slowed"


def _cause_of(array: str, slowed: Sequence[Step], feeds: Mapping[str, frozenset[str] | None]) -> Step | None:
    """The step that slowed ``array`` (``md127``): the newest of a drive in it; else the newest of a link or
    drive nothing ties to an array (a Thunderbolt router's drives are not known); never one of a device
    known to feed only other arrays (a hot drive of md126 does not slow md127)."""
    own = [s for s in slowed if array in (feeds.get(s.subject) or ())]
    if own:
        return own[-1]
    untied = [s for s in slowed if feeds.get(s.subject) is None]
    return untied[-1] if untied else None


def _arrays_of(subject: str, events: Sequence[Event], frame: Frame | None) -> frozenset[str] | None:
    """The md arrays an NVMe drive (``nvme:nvme0``) is in: those its events name (``md_arrays``, the
    temperature events) and those the newest frame ties it to (`NvmeReading.md_arrays`, or one of its
    namespaces among an array's members, whole or a partition). ``None`` when nothing says: a link, a
    drive neither its events nor the frame know."""
    if not subject.startswith("nvme:"):
        return None
    known = False
    arrays: set[str] = set()
    for event in events:
        if event.subject == subject and "md_arrays" in event.data:
            known = True
            named = event.data["md_arrays"]  # "md127 md126", null for a drive in no array
            arrays.update(named.split() if isinstance(named, str) else ())
    name = subject.split(":", 1)[1]
    drive = next((d for d in frame.readings.nvme if d.name == name), None) if frame is not None else None
    if frame is not None and drive is not None:
        known = True
        arrays.update(drive.md_arrays)
        arrays.update(a.name for a in frame.readings.raid
                      if any(_on_namespace(m.name, drive.namespaces) for m in a.members))
    return frozenset(arrays) if known else None


def _on_namespace(member: str, namespaces: Sequence[str]) -> bool:
    """Whether an array member's block device (``nvme0n1``, ``nvme0n1p1``) is one of ``namespaces`` or a
    partition of one."""
    return any(member == ns or (member.startswith(f"{ns}p") and member[len(ns) + 1:].isdigit())
               for ns in namespaces)


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
