"""Node alarms in the agent: rules evaluated on every frame, transitions as events and notifications."""

from __future__ import annotations

import logging
from collections.abc import Callable

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.lifecycle import Transition
from rigmon.notify.dispatch import Notifiers
from rigmon.notify.payload import Notification
from rigmon.schema import Alarm, AlarmList, Event, EventValue, Frame, Severity

log = logging.getLogger(__name__)

EmitFn = Callable[[str, Severity, str, str, dict[str, EventValue] | None], Event]
TransitionHook = Callable[[Transition], None]


class AlarmService:
    """Runs the node rules on the agent's frames.

    A frame listener of the sampler: the sampler publishes a frame as soon as a collector
    pushes a reading, so a pushed sag is evaluated when it arrives. Every transition
    becomes an event in the stream (``alarm_pending``, ``alarm_firing``, ``alarm_resolved``,
    ``alarm_acknowledged``, ``alarm_repeated``: an event alarm counted a further event, with
    its ``count``) and firing/resolved ones go to the notifiers, whose queues never block. An alarm carried over from before an agent restart that fresh readings
    confirm is announced as firing again (same id) but not notified again: it was already.

    Args:
        engine: the rule engine.
        emit: the sampler's ``emit_event``.
        notifiers: where firing and resolved alarms are sent.
        control: whether acknowledgements are possible (a control token exists).
    """

    def __init__(self, engine: AlarmEngine, emit: EmitFn, notifiers: Notifiers | None = None,
                 control: bool = False) -> None:
        self.engine = engine
        self.emit = emit
        self.notifiers = notifiers
        self.control = control
        self.hooks: list[TransitionHook] = []

    def on_frame(self, frame: Frame) -> None:
        """Evaluate the rules against a new frame."""
        self._publish(self.engine.evaluate(frame))

    def acknowledge(self, alarm_id: str, by: str) -> Alarm:
        """Acknowledge an alarm and return it as it is now.

        Raises:
            UnknownAlarm: no such alarm.
            AlreadyResolved: nothing left to acknowledge.
        """
        transitions = self.engine.acknowledge(alarm_id, by)
        self._publish(transitions)
        alarm = self.engine.book.get(alarm_id)
        assert alarm is not None
        return alarm

    def alarm_list(self) -> AlarmList:
        """The ``/v1/alarms`` answer."""
        return self.engine.alarm_list(control=self.control)

    def _publish(self, transitions: list[Transition]) -> None:
        for t in transitions:
            a = t.alarm
            severity: Severity = a.severity if t.change == "firing" else "info"
            if t.change == "resolved" and a.fired_at is None:
                how = "no longer reported" if a.resolve_reason == "unreported" else "cleared"
                text = f"{a.rule} on {a.subject} {how} before its hold time"
            elif t.restored and t.change == "firing":
                text = f"{a.rule} still firing after the agent restarted: {a.message}"
            else:
                text = f"{a.rule} {t.change}: {a.message}"
            data: dict[str, EventValue] = {
                "alarm_id": a.id, "rule": a.rule, "severity": a.severity, "state": a.state, "value": a.value,
            }
            if t.restored:
                data["restored"] = True
            if t.change == "resolved" and a.resolve_reason is not None:
                data["reason"] = a.resolve_reason
            if t.change == "repeated":
                data["count"] = a.count
            self.emit(f"alarm_{t.change}", severity, a.subject, text, data)
            if self.notifiers is not None:
                if t.change == "firing" and not t.restored:
                    self.notifiers.submit(Notification("firing", a))
                elif t.change == "resolved" and a.fired_at is not None:
                    self.notifiers.submit(Notification("resolved", a))
            for hook in self.hooks:
                try:
                    hook(t)
                except Exception:  # noqa: BLE001 - an observer must not break alarming
                    log.exception("alarm transition hook failed")
