"""What each notifier sends: rigmon's JSON webhook payload, ntfy, Slack, Discord, command environment.

Pure functions of a `Notification`; the wire format of the generic webhook is versioned
(``version``) and additive, like the agent's API.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Literal

import msgspec

from rigmon.alarms.message_values import reading_text
from rigmon.lazy_re import lazy_compile
from rigmon.schema import RESOLVE_ENDINGS, RESOLVE_REASONS, Alarm
from rigmon.typed import to_data

PAYLOAD_VERSION = 1
DISCORD_MAX_CHARS = 2000

NotifyStatus = Literal["firing", "resolved"]

_NTFY_PRIORITY = {"critical": "5", "warning": "4", "info": "3"}
_NTFY_TAGS = {"critical": "rotating_light", "warning": "warning", "info": "information_source"}
_EMOJI = {"critical": ":rotating_light:", "warning": ":warning:", "info": ":information_source:"}


class Notification(msgspec.Struct, frozen=True, gc=False):
    """An alarm that fired or resolved, on its way to a notifier.

    Attributes:
        status: ``firing`` or ``resolved``.
        alarm: the alarm record after the transition.
        suppressed: notifications this notifier dropped (rate limit, full queue) since
            the last one it sent.
    """

    status: NotifyStatus
    alarm: Alarm
    suppressed: int = 0


#: Where an alarm resolved without a fresh clear reading stands now, by `Alarm.resolve_reason`
#: (tests/notify/test_resolve_reasons.py drives the real lifecycle through each reason).
_NOT_FRESH = {
    "unreported": "no longer reported",
    "unreported_after_restart": "not reported since the agent restarted",
    "cleared_after_restart": "clear after the agent restarted",
    "rule_removed": "its rule is no longer in force (after the agent restarted)",
    "superseded": "superseded by another alarm of its rule and subject (after the agent restarted)",
    "restarted_without": "its agent restarted without it",
}

def resolve_reason(a: Alarm) -> tuple[str | None, str]:
    """Why a resolved alarm ended (one of `RESOLVE_REASONS`, ``None`` when nothing says), and its
    message without the lifecycle's ending for that reason (`RESOLVE_ENDINGS`): the worst it was.

    The alarm's ``resolve_reason`` decides. Records of agents before it (or of a newer agent, with
    a reason this one does not know) have only their message: an ending the lifecycle puts there
    stands for its reason.
    """
    reason = a.resolve_reason
    if reason in RESOLVE_REASONS:
        ending = RESOLVE_ENDINGS.get(reason, "")
        return reason, a.message[: -len(ending)] if ending and a.message.endswith(ending) else a.message
    for reason, ending in RESOLVE_ENDINGS.items():
        if a.message.endswith(ending):
            return reason, a.message[: -len(ending)]
    return None, a.message


def resolution(a: Alarm) -> tuple[bool, str, str]:
    """How a resolved alarm stands now, for the text of its notification.

    Returns:
        Whether ``value_now`` is a fresh reading taken when it cleared; a short phrase
        for where it is now ("now 11.920 V", "no longer reported (last 11.40 V)"); and the
        alarm's message without the lifecycle's ending (the worst it was).
    """
    reason, message = resolve_reason(a)
    phrase = _NOT_FRESH.get(reason or "")
    if phrase is not None:
        if reason == "unreported" and a.value_now is not None and not isinstance(a.value_now, bool):
            # The last reading while it was still reported: it may still have been bad.
            phrase += f" (last {reading_text(a, a.value_now)})"
        return False, phrase, message
    if reason in ("acknowledged", "quiet") or a.rule_kind == "event" or a.value_now is None:
        # An event alarm has no reading: it ends by acknowledgement or by a quiet spell.
        if reason == "acknowledged" or (reason is None and a.acknowledged_by):
            phrase = f"acknowledged by {a.acknowledged_by or 'the operator'}"
        elif reason == "quiet" or a.rule_kind == "event":
            phrase = "no new event"
        else:
            phrase = "clear"
            if a.acknowledged_by:
                phrase += f" (acknowledged by {a.acknowledged_by})"
        # Of several events, the message says how many since when, and the latest
        # (`rigmon.alarms.lifecycle.repeated_message`).
        return False, phrase, message
    now = a.value_now
    if a.rule_kind == "staleness":
        return True, "reporting again", message
    if isinstance(now, bool):
        return True, "clear", message
    if a.rule_kind == "counter":
        return True, f"now +{now} in its window", message
    return True, f"now {reading_text(a, now)}", message


def summary(n: Notification) -> str:
    """One line for humans: ``[CRITICAL] v100-a psu: 12 V rail minimum 11.42 V is below 11.5 V``.

    A resolution says where the reading is now, then what the alarm was (its worst):
    ``[RESOLVED] v100-a psu: now 11.920 V; was: 12 V rail minimum 11.255 V is below 11.5 V``.
    """
    a = n.alarm
    if n.status == "resolved":
        _, now, was = resolution(a)
        text = f"[RESOLVED] {a.node} {a.subject}: {now}; was: {was}"
    else:
        text = f"[{a.severity.upper()}] {a.node} {a.subject}: {a.message}"
    if n.suppressed:
        text += f" (+{n.suppressed} suppressed)"
    return text


def value_now(n: Notification) -> object:
    """The alarm's reading now: at firing, or a fresh one at resolution (``None`` when the
    resolution has no fresh reading: no longer reported, decided over a restart, an event)."""
    if n.status == "resolved" and not resolution(n.alarm)[0]:
        return None
    return n.alarm.value_now


def webhook_payload(n: Notification) -> dict[str, Any]:
    """rigmon's generic JSON webhook body (see the README for every key)."""
    a = n.alarm
    return {
        "version": PAYLOAD_VERSION,
        "source": "rigmon",
        "status": n.status,
        "node": a.node,
        "severity": a.severity,
        "rule": a.rule,
        "subject": a.subject,
        "text": summary(n),
        "alarm": to_data(a),
        "suppressed": n.suppressed,
        "value_now": value_now(n),
    }


_AT_MENTION = lazy_compile(r"@(?=\w)")


def slack_escape(text: str) -> str:
    """Text for a Slack message: ``&``, ``<`` and ``>`` escaped as Slack asks, so a device or
    subject name cannot form a mention (``<!channel>``, ``<@U123>``) or a link; and a zero-width
    space after ``@`` so Mattermost and Rocket.Chat, which take the same payload, do not read
    ``@channel`` or ``@all`` as a mention."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _AT_MENTION.sub("@\u200b", text)


def slack_payload(n: Notification) -> dict[str, Any]:
    """A Slack incoming-webhook body (also what Mattermost and Rocket.Chat accept)."""
    emoji = ":white_check_mark:" if n.status == "resolved" else _EMOJI[n.alarm.severity]
    return {"text": f"{emoji} {slack_escape(summary(n))}"}


def discord_payload(n: Notification) -> dict[str, Any]:
    """A Discord webhook body; mentions are disabled so alarm text cannot ping anyone."""
    emoji = "\N{WHITE HEAVY CHECK MARK}" if n.status == "resolved" else (
        "\N{POLICE CARS REVOLVING LIGHT}" if n.alarm.severity == "critical" else "\N{WARNING SIGN}")
    return {"username": "rigmon", "content": f"{emoji} {summary(n)}"[:DISCORD_MAX_CHARS],
            "allowed_mentions": {"parse": []}}


def _header_text(text: str) -> str:
    """A header value httpx can send: ASCII as it is, anything else as one RFC 2047 encoded
    word, which ntfy decodes (httpx refuses a non-ASCII value: the notification would be lost)."""
    if text.isascii():
        return text
    return f"=?utf-8?b?{base64.b64encode(text.encode()).decode()}?="


def ntfy_request(n: Notification) -> tuple[bytes, dict[str, str]]:
    """Body and headers of an ntfy publish (POST to the topic URL)."""
    a = n.alarm
    resolved = n.status == "resolved"
    headers = {
        "Title": _header_text(f"rigmon {a.node}: {a.rule} {'resolved' if resolved else a.severity}"),
        "Priority": "3" if resolved else _NTFY_PRIORITY[a.severity],
        "Tags": "white_check_mark" if resolved else _NTFY_TAGS[a.severity],
    }
    return summary(n).encode(), headers


def command_environment(n: Notification) -> dict[str, str]:
    """``RIGMON_ALARM_*`` variables for a command notifier (``RIGMON_ALARM_JSON``: the webhook payload)."""
    a = n.alarm
    return {
        "RIGMON_ALARM_STATUS": n.status,
        "RIGMON_ALARM_ID": a.id,
        "RIGMON_ALARM_RULE": a.rule,
        "RIGMON_ALARM_SEVERITY": a.severity,
        "RIGMON_ALARM_NODE": a.node,
        "RIGMON_ALARM_SUBJECT": a.subject,
        "RIGMON_ALARM_MESSAGE": a.message,
        "RIGMON_ALARM_VALUE": "" if a.value is None else str(a.value),
        "RIGMON_ALARM_VALUE_NOW": "" if (now := value_now(n)) is None else str(now),
        "RIGMON_ALARM_TEXT": summary(n),
        "RIGMON_ALARM_JSON": json.dumps(webhook_payload(n), separators=(",", ":")),
    }
