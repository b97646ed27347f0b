"""Hostile strings for the dashboard: recorded frames whose every text carries markup, terminal
escapes, C1 controls and bidi overrides, alarms to match, an agent that refuses with such a
reason, and helpers that render a screen the way Textual writes it to the terminal.

The strings are what a device ROM, a driver, a kernel line or a hostile agent can send: Rich
markup (``[/]``, ``[@click=app.quit]``, ``[bold``), OSC window-title and clipboard writes,
CSI screen clears, 8-bit C1 controls and Unicode bidi overrides and separators.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from msgspec.structs import replace
from textual.app import App

from rigmon.schema import (
    Alarm,
    AlarmList,
    CollectorStatus,
    Event,
    Frame,
    HwmonVoltageReading,
    decode_data,
)
from rigmon.typed import to_data
from tests.tui.snapshot_apps.fake_agent import START_AT, FakeAgent, make_alarm
from tests.tui.snapshot_apps.record_frames import load_frames

ESC = "\x1b"
BEL = "\x07"
#: Appended to every other string of the frames: each kind of trouble once.
PAYLOAD = f"[/]{ESC}]0;pwned{BEL}[@click=app.quit]q{ESC}[2J\x9b31m\u202e[bold\u2066\u2028\x00\x7f"

# Strings checked on screen, one per field the issue names.
NODE = f"rig[/]01{ESC}]0;t{BEL}"
TB_NAME = "Evil[/]Dock"
TB_VENDOR = f"Acme{ESC}]0;x{BEL}"
GPU_NAME = "Tesla V100[/"
EVENT_SUBJECT = "gpu:[@click=app.quit]3"
EVENT_MESSAGE = f"Xid 79 [bold{ESC}[2J\x9b31m fell off"
ALARM_MESSAGE = f"rail low{ESC}[2J\u202eevil"
ALARM_SUBJECT = "psu[/]"
BY = f"mallory{ESC}]52;c;ZXZpbA=={BEL}"
COLLECTOR_ERROR = f"read failed [/]{ESC}[31m"
NVME_MODEL = "Samsung[/]980\u2066x\u2069"
MD_NAME = "md[/]r0\x9b"
REASON = f"go away [/]{ESC}]0;x{BEL}"

#: How each checked string must read on screen: markup literally, controls as escapes.
VISIBLE = {
    "node": r"rig[/]01\x1b]0;t\x07",
    "tb_name": "Evil[/]Dock",
    "tb_vendor": r"Acme\x1b]0;x\x07",
    "gpu_name": "V100[/",
    "event_subject": "gpu:[@click=app.quit]3",
    "event_message": r"Xid 79 [bold\x1b[2J\x9b31m fell off",
    "alarm_message": r"rail low\x1b[2J\u202eevil",
    "alarm_subject": "psu[/]",
    "by": r"mallory\x1b]52;c;ZXZpbA==\x07",
    "collector_error": r"read failed [/]\x1b[31m",
    "nvme_model": r"Samsung[/]980\u2066x\u2069",
    "md_name": r"md[/]r0\x9b",
    "reason": r"go away [/]\x1b]0;x\x07",
}

#: Keys whose values are closed sets (checked by the decoder) or identities the agent and
#: the dashboard must agree on; every other string is poisoned.
KEEP = frozenset({
    "id", "run_id", "kind", "severity", "state", "role", "link_state", "protocol", "envelope_source",
    "expected_source", "method", "health", "clock_reasons", "data", "uuid", "card",
})
#: Objects whose keys are names from the hardware (poisoned like values).
NAMED_KEYS = frozenset({"collectors", "channels_volts", "channels_amps", "labels"})

#: Characters that must never reach the terminal from data.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]")
#: Textual's own sequences in a full update: colours and cursor moves.
OWN_SEQUENCES = re.compile(r"\x1b\[[0-9;:]*[mH]")


def poison(data: Any, key: str = "") -> Any:
    """Plain frame data with `PAYLOAD` appended to every string not under a `KEEP` key."""
    if key in KEEP:
        return data
    if isinstance(data, str):
        return data + PAYLOAD
    if isinstance(data, list):
        return [poison(v, key) for v in data]
    if isinstance(data, dict):
        rename = key in NAMED_KEYS
        return {(k + PAYLOAD if rename else k): poison(v, "" if rename else k) for k, v in data.items()}
    return data


def hostile_frames(count: int = 40) -> list[Frame]:
    """``count`` frames of every source (V100 GPUs and the rail, md arrays, NVMe, Thunderbolt,
    an AMD GPU, an hwmon input), every string poisoned and the checked ones set."""
    v100 = load_frames("v100-gpu-lost-rail-sag")
    storage = load_frames("enclosure-link-10g-array-lagging")
    amd = load_frames("strix-amd-gpu")
    frames = []
    for i in range(count):
        base, disks, apu = v100[-count + i], storage[-count + i], amd[i % len(amd)]
        readings = replace(
            base.readings, disks=disks.readings.disks, raid=disks.readings.raid, nvme=disks.readings.nvme,
            thunderbolt=disks.readings.thunderbolt, amd_gpus=apu.readings.amd_gpus,
            hwmon_volts=(HwmonVoltageReading(sensor="hwmon3/in1", chip="nct6798", label="+12V", volts=11.9,
                                             min_volts=11.4, max_volts=12.6, alarm=False, scale=12.0),))
        collectors = {**disks.collectors, **apu.collectors, **base.collectors}
        events: tuple[Event, ...] = ()
        if i == count - 5:
            events = (
                Event(id=f"e{i}-1", at=base.taken_at, kind="xid", severity="critical", subject=EVENT_SUBJECT,
                      message=EVENT_MESSAGE, data={"xid": 79, "source": "kmsg", "gpu_index": 3}),
                Event(id=f"e{i}-2", at=base.taken_at, kind="gpu_lost", severity="critical", subject="gpu:3",
                      message="GPU 3 is lost", data={}),
                Event(id=f"e{i}-3", at=base.taken_at, kind="link_changed", severity="warning",
                      subject="link:0-1", message="link 40 -> 10 Gb/s", data={}),
            )
        frames.append(replace(base, readings=readings, collectors=collectors, events=events))
    poisoned = [decode_data(Frame, poison(to_data(f))) for f in frames]
    return [_checked_values(f) for f in poisoned]


def _checked_values(frame: Frame) -> Frame:
    r = frame.readings
    gpus = tuple(replace(g, name=GPU_NAME) if g.index == 0 else g for g in r.gpus)
    # Short names for the boxes whose optional columns hold the checked strings: with every
    # name poisoned, those columns would not fit and be left out.
    tb = tuple(replace(d, name=d.name.removesuffix(PAYLOAD), device_name=TB_NAME, vendor=TB_VENDOR)
               if d.kind == "device" else replace(d, name=d.name.removesuffix(PAYLOAD), device_name=None, vendor=None)
               for d in r.thunderbolt)
    nvme = tuple(replace(d, name=d.name.removesuffix(PAYLOAD), model=NVME_MODEL if i == 0 else d.model)
                 for i, d in enumerate(r.nvme))
    raid = tuple(replace(a, md_name=MD_NAME) for a in r.raid[:1]) + r.raid[1:]
    events = tuple(replace(e, subject=EVENT_SUBJECT, message=EVENT_MESSAGE) if e.kind == "xid" else e
                   for e in frame.events)
    collectors = {**frame.collectors, "psu_hwmon": CollectorStatus(state="error", ok=False, error=COLLECTOR_ERROR,
                                                                    duration_s=0.001)}
    return replace(frame, readings=replace(r, gpus=gpus, thunderbolt=tb, nvme=nvme, raid=raid), events=events,
                   collectors=collectors)


def hostile_alarm(n: int, rule: str, severity: str, subject: str, message: str, **kw: Any) -> Alarm:
    """An alarm of node `NODE` (its id stays a plain one: the dashboard acknowledges by id)."""
    return replace(make_alarm("hostile", n, rule, severity, subject, message, **kw), node=NODE)


def hostile_alarms() -> AlarmList:
    """A firing critical alarm acknowledged by `BY`, a pending warning and a resolved one, all hostile."""
    acked = replace(hostile_alarm(1, "psu_rail_low_critical" + PAYLOAD, "critical", ALARM_SUBJECT, ALARM_MESSAGE),
                    acknowledged_at=START_AT + 110, acknowledged_by=BY, labels={"rack" + PAYLOAD: "r1" + PAYLOAD})
    pending = hostile_alarm(2, "thunderbolt_degraded", "warning", "link:[/]0-1", "degraded " + PAYLOAD,
                            state="pending")
    resolved = hostile_alarm(3, "gpu_lost", "critical", "gpu:" + PAYLOAD, "GPU lost " + PAYLOAD, resolved=True)
    return AlarmList(node=NODE, active=(acked, pending), recent=(resolved,), control=True)


class HostileAgent(FakeAgent):
    """A `FakeAgent` whose node name is `NODE` (its URL stays a valid one)."""

    def __init__(self, frames: list[Frame]) -> None:
        super().__init__(NODE, recorded=frames, frames=len(frames))

    @property
    def url(self) -> str:
        return "http://hostile.test:9871"


class RefusingAgent(FakeAgent):
    """Every request refused with 401 and `REASON` as the error."""

    @property
    def url(self) -> str:
        return "http://refusing.test:9871"

    async def handle(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, content=json.dumps({"error": REASON}, ensure_ascii=False).encode())


def screen_lines(app: App[Any]) -> tuple[list[str], str]:
    """The text of every line of the screen as drawn now (toasts included), and the bytes a
    full update writes to the terminal."""
    update = app.screen._compositor.render_full_update(simplify=True)
    lines = ["".join(segment.text for strip in line for segment in strip if not segment.control)
             for line in update.strips]
    return lines, update.render_segments(app.console)


def assert_clean(app: App[Any]) -> str:
    """The screen's text, after checking that no unsafe character of the data reaches it and
    that the terminal gets no sequence but Textual's own colours and cursor moves."""
    lines, terminal = screen_lines(app)
    text = "\n".join(lines)
    bad = UNSAFE.search(text)
    assert bad is None, f"{bad.group()!r} on screen: {text[max(0, bad.start() - 40):bad.end() + 40]!r}"
    rest = OWN_SEQUENCES.sub("", terminal)
    stray = re.search("[\x1b\x07\x80-\x9f\u2028-\u202e\u2066-\u2069]", rest)
    assert stray is None, f"{stray.group()!r} written to the terminal: {rest[max(0, stray.start() - 40):stray.end() + 40]!r}"
    return text

