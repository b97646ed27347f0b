"""`rigmon.schema.events.EVENT_KINDS` against every call in rigmon/ that emits an event."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from rigmon.agent.trouble import NOTED_KINDS
from rigmon.collectors.base import EventDraft
from rigmon.alarms.lifecycle import Change
from rigmon.schema.events import EVENT_KINDS, EventDataType, data_type, fits
from tests.alarms.event_sites import ROOT, Site, _Module, event_sites
from tests.alarms.helpers import FakeClock, sim_frames

#: Calls that pass on a kind their caller chose (or helpers named like an emitter that emit nothing):
#: the kinds are checked where the caller spells them. ``(file, kind as written)``.
FORWARDERS = {
    ("rigmon/agent/agent.py", "*event"),  # the guard's emit, bound to the sampler's
    ("rigmon/agent/agent.py", "kind"),  # the journal's events, handed to the loop
    ("rigmon/agent/alarm_state.py", "kind"),  # _report("alarm_state_...")
    ("rigmon/agent/check.py", "d"),  # rigmon check turns collectors' drafts into events
    ("rigmon/agent/journal/recovery.py", "kind"),  # the journal's _emit keeps its events at the stop
    ("rigmon/agent/guard/shared.py", "kind"),  # the guard's event(...)
    ("rigmon/agent/sampler.py", "record.kind"),  # collectors' EventDrafts
    ("rigmon/agent/sampler.py", "kind"),  # emit_event itself
    ("rigmon/collectors/gpu_xid_events.py", "hit"),  # _event(hit) builds the "xid" draft
    ("rigmon/collectors/kernel_log.py", "match"),  # _event(match) builds "xid"/"gpu_off_bus"/"pcie_aer"
    ("rigmon/collectors/psu_device.py", "kind"),  # _event("psu_adc_...")
}
#: Alarm transitions: ``alarm_{change}``.
ALARM_KINDS = {f"alarm_{change}" for change in typing.get_args(Change)}


def emitted_fits(value: object, of: EventDataType) -> bool:
    """Whether an emitted value is of type ``of``: an ``int`` key's values are ``int``s (a rule may say
    ``79.0``, `fits` takes it; an emitter sends ``79``)."""
    return fits(value, of) and (of != "int" or type(value) is int)


def _sites() -> list[Site]:
    return [s for s in event_sites() if (s.where.rsplit(":", 1)[0], s.kind_source) not in FORWARDERS]


def _unclean_keys() -> set[str]:
    """The data of ``unclean_shutdown``: built by `rigmon.agent.journal.runs.unclean_message`."""
    module = _Module(ROOT / "agent" / "journal" / "runs.py")
    func = module.functions["unclean_message"]
    end = func.body[-1]
    found = module.keys(ast.Name(id="data"), func, end)
    assert found is not None
    return found[0]


def test_every_emitted_kind_is_known() -> None:
    sites = _sites()
    assert len(sites) > 60  # the scan finds the emitters
    unknown = []
    for site in sites:
        kinds = ALARM_KINDS if site.kind_source == "f'alarm_{t.change}'" else {site.kind}
        unknown += [f"{site.where}: {k or site.kind_source}" for k in kinds if k not in EVENT_KINDS]
    assert not unknown, "emitted kinds missing from EVENT_KINDS (or new forwarders to list here): " + str(unknown)


def test_every_emitted_data_key_is_known_with_its_type() -> None:
    problems = []
    for site in _sites():
        kinds = ALARM_KINDS if site.kind_source == "f'alarm_{t.change}'" else {site.kind}
        keys = site.keys if site.keys is not None or site.kind != "unclean_shutdown" else frozenset(_unclean_keys())
        if keys is None:
            problems.append(f"{site.where}: data of {site.kind} not followed")
            continue
        for kind in kinds:
            known = EVENT_KINDS.get(str(kind), {})
            problems += [f"{site.where}: {kind}.{key}" for key in keys if data_type(known, key) is None]
            problems += [f"{site.where}: {kind}.{key} = {value!r} is not {data_type(known, key)}"
                         for key, value in site.values
                         if value is not None and (of := data_type(known, key)) and not emitted_fits(value, of)]
    assert not problems, problems


def test_every_known_kind_and_key_is_emitted() -> None:
    """No entry of the registry is stale: a rule on it would load and never fire."""
    seen: dict[str, set[str]] = {}
    for site in _sites():
        kinds = ALARM_KINDS if site.kind_source == "f'alarm_{t.change}'" else {str(site.kind)}
        keys = site.keys if site.keys is not None else frozenset(_unclean_keys())
        for kind in kinds:
            seen.setdefault(kind, set()).update(keys)
    for kind in NOTED_KINDS:
        seen.setdefault(kind, set()).update({"after_event", "after_kind", "after_s"})
    assert sorted(set(EVENT_KINDS) - set(seen)) == []
    stale = {kind: sorted(set(keys) - seen[kind]) for kind, keys in EVENT_KINDS.items() if set(keys) - seen[kind]}
    assert stale == {}


def test_the_scan_follows_data_through_helpers_and_branches() -> None:
    """The scan itself: a key added in a branch that returns belongs to that branch's event only."""
    by_kind = {s.kind: s.keys for s in _sites() if s.where.startswith("rigmon/collectors/kernel_log.py")}
    assert by_kind["gpu_off_bus"] is not None and "xid" not in by_kind["gpu_off_bus"]
    assert by_kind["xid"] is not None and {"xid", "source", "pci_bus_id"} <= by_kind["xid"]
    assert "error_type" in (by_kind["pcie_aer"] or ())


@pytest.mark.parametrize("scenario", ["lab", "loose-sxm2", "md-degraded", "nvme-link-gen3", "nvme-thermal-throttle",
                                      "rdma-port-flap",
                                      "strix-usb4"])
def test_the_events_of_simulated_incidents_have_the_listed_keys_and_types(scenario: str, tmp_path: Path) -> None:
    """The types the scan cannot see: what the real collectors emit on the simulator's hardware."""
    drafts: list[EventDraft] = []
    for _ in sim_frames(scenario, 1, tmp_path, FakeClock(), 120, 1.0, drafts):
        pass
    assert drafts
    for draft in drafts:
        kind = EVENT_KINDS[draft.kind]
        for key, value in (draft.data or {}).items():
            of = data_type(kind, key)
            assert of is not None and (value is None or emitted_fits(value, of)), (draft.kind, key, value, of)


def test_integer_keys_are_typed_as_integers() -> None:
    """Xid codes, GPU indices, PIDs, ports, lanes and steps are ``int``: a rule's ``79.5`` is refused."""
    assert EVENT_KINDS["xid"]["xid"] == EVENT_KINDS["xid"]["gpu_index"] == EVENT_KINDS["xid"]["pid"] == "int"
    assert EVENT_KINDS["rdma_link_downed"]["port"] == EVENT_KINDS["guard_step"]["step"] == "int"
    assert EVENT_KINDS["agent_stalled"]["stalled_s"] == "number"
    assert fits(79, "int") and fits(79.0, "int") and not fits(79.5, "int") and not fits(True, "int")
    assert not fits(float("inf"), "int") and not fits(float("nan"), "int") and not fits("79", "int")
    assert not emitted_fits(79.0, "int") and emitted_fits(79.5, "number")
