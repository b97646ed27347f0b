"""What each notifier sends: rigmon's JSON webhook payload, ntfy, Slack, Discord, command environment.

Pure functions of a `Notification`; the wire format of the generic webhook is versioned
(``version``) and additive, like the agent's API.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

from rigmon.schema import Alarm
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


def summary(n: Notification) -> str:
    """One line for humans: ``[CRITICAL] v100-a psu: 12 V rail minimum 11.42 V is below 11.5 V``."""
    a = n.alarm
    head = "RESOLVED" if n.status == "resolved" else a.severity.upper()
    text = f"[{head}] {a.node} {a.subject}: {a.message}"
    if n.suppressed:
        text += f" (+{n.suppressed} suppressed)"
    return text


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
    }


def slack_payload(n: Notification) -> dict[str, Any]:
    """A Slack incoming-webhook body (also what Mattermost and Rocket.Chat accept)."""
    emoji = ":white_check_mark:" if n.status == "resolved" else _EMOJI[n.alarm.severity]
    return {"text": f"{emoji} {summary(n)}"}


def discord_payload(n: Notification) -> dict[str, Any]:
    """A Discord webhook body; mentions are disabled so alarm text cannot ping anyone."""
    emoji = "\N{WHITE HEAVY CHECK MARK}" if n.status == "resolved" else (
        "\N{POLICE CARS REVOLVING LIGHT}" if n.alarm.severity == "critical" else "\N{WARNING SIGN}")
    return {"username": "rigmon", "content": f"{emoji} {summary(n)}"[:DISCORD_MAX_CHARS],
            "allowed_mentions": {"parse": []}}


def ntfy_request(n: Notification) -> tuple[bytes, dict[str, str]]:
    """Body and headers of an ntfy publish (POST to the topic URL)."""
    a = n.alarm
    resolved = n.status == "resolved"
    headers = {
        "Title": f"rigmon {a.node}: {a.rule} {'resolved' if resolved else a.severity}",
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
        "RIGMON_ALARM_TEXT": summary(n),
        "RIGMON_ALARM_JSON": json.dumps(webhook_payload(n), separators=(",", ":")),
    }
