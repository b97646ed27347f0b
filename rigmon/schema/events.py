"""The kinds of events an agent emits and the data each carries: what an event rule can match.

An event rule (``kind = "event"``) names an ``event`` kind and may require values of its ``data``;
a kind no agent emits, a key its events never carry, or a value of the wrong type (``xid = ["79"]``:
Xids are numbers; ``xid = [79.5]``: they are integers) would load and never fire. Rules are checked
against `EVENT_KINDS` when they load.

This is a list kept by hand next to the code that emits the events (collectors' ``EventDraft``s,
the sampler, journal, guard, alarm service and state); ``tests/alarms/test_event_kinds.py`` reads
every emitting call in ``rigmon/`` and fails when a kind or data key is missing here, or listed
here and emitted nowhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

#: The type of one data value: an integer (Xid codes, GPU indices, PIDs, ports, lanes: the emitters
#: always send an ``int``), a number (int or float: rules compare ``79 == 79.0``), text, a
#: true/false, or any of them (an alarm's ``value``). Any value may also be ``null`` (not known).
EventDataType = Literal["int", "number", "text", "bool", "any"]

_GPU_IDS: dict[str, EventDataType] = {
    "gpu_index": "int", "pci_bus_id": "text", "pci_bus_id_nvml": "text", "pci_bus_id_xid": "text",
}
_KERNEL: dict[str, EventDataType] = {**_GPU_IDS, "source": "text", "seq": "int"}
_GPU_PROCESS: dict[str, EventDataType] = {
    "pid": "int", "vendor": "text", "gpu_index": "int", "uuid": "text", "pci_bus_id": "text",
    "user": "text", "command": "text", "gpu_mem_bytes": "int", "in_namespace": "bool", "started_at": "number",
}
_RDMA: dict[str, EventDataType] = {
    "device": "text", "port": "int", "state": "text", "phys_state": "text", "rate_gbps": "number",
    "expected_gbps": "number", "link_layer": "text", "link_state": "text", "link_downed_total": "int",
}
#: ``md_arrays``: the md arrays holding the drive (a namespace or a partition of it), space-separated
#: (``md127 md126``), null for a drive in no array; an ``nvme_removed``'s those it was in when last read.
_NVME_LINK: dict[str, EventDataType] = {
    "serial": "text", "link_gts": "number", "link_width": "int", "max_link_gts": "number",
    "max_link_width": "int", "port_max_link_gts": "number", "port_max_link_width": "int", "md_arrays": "text",
}
_NVME_TEMP: dict[str, EventDataType] = {
    "serial": "text", "temp_c": "number", "temp_max_c": "number", "temp_crit_c": "number", "md_arrays": "text",
}
_TB_LINK: dict[str, EventDataType] = {
    "rx_gbps": "number", "tx_gbps": "number", "rx_lanes": "int", "tx_lanes": "int",
    "expected_gbps": "number", "link_state": "text", "unique_id": "text",
}
_NET_LINK: dict[str, EventDataType] = {"kind": "text", "carrier_changes_total": "int", "speed_mbps": "int"}
_PEER: dict[str, EventDataType] = {
    "peer": "text", "path": "text", "address": "text", "transport": "text", "from_state": "text",
    "state": "text", "rtt_p50_us": "number", "rtt_p99_us": "number", "loss_pct": "number",
}
_GUARD: dict[str, EventDataType] = {
    "mode": "text", "dry_run": "bool", "trigger": "text", "step": "int", "step_name": "text",
    "gpus": "text", "before": "text", "after": "text",
}
#: An engage, step or extend: ``gpus`` are those it changed (as its message names them), ``gpus_skipped``
#: those it was to act on and did not change, ``skipped`` why (``null`` when none was skipped).
_GUARD_CAP: dict[str, EventDataType] = {**_GUARD, "gpus_skipped": "text", "skipped": "text"}
_GUARD_COMMAND: dict[str, EventDataType] = {"by": "text", "command": "text", "step": "int"}
#: ``reason``: an ``alarm_resolved``'s `Alarm.resolve_reason` (the events share one emitting call).
_ALARM: dict[str, EventDataType] = {
    "alarm_id": "text", "rule": "text", "severity": "text", "state": "text", "value": "any", "restored": "bool",
    "reason": "text", "count": "int",
}
_FROM_TO: dict[str, EventDataType] = {"from": "text", "to": "text"}

#: Every event kind an agent emits, with the data keys its events carry and their types. A key
#: ending in ``*`` stands for every key that begins with the rest (``min:*``: ``min:psu_rail.volts``).
EVENT_KINDS: Mapping[str, Mapping[str, EventDataType]] = {
    # the agent itself
    "agent_started": {},
    "agent_stalled": {"stalled_s": "number"},
    "mark": {"text": "text", "by": "text"},
    "collector_failed": {"state": "text"},
    "collector_recovered": {"state": "text"},
    "unclean_shutdown": {"previous_run_id": "text", "previous_started_at": "number", "last_frame_at": "number",
                         "gap_s": "number", "min:*": "number", "max:*": "number"},
    "journal_recovered": {"frames_not_written": "number", "frames_not_written_total": "number",
                          "events_not_written_total": "number"},
    "journal_failed": {"error": "text"},
    "journal_set_aside": {"error": "text", "kept_as": "text"},
    "journal_dropped": {"dropped_total": "number"},
    # written by the journal alone, first in a journal begun afresh (reason: set_aside, removed, replaced)
    "journal_begun": {"reason": "text", "noticed_at": "number", "error": "text", "kept_as": "text"},
    "alarm_pending": _ALARM,
    "alarm_firing": _ALARM,
    "alarm_resolved": _ALARM,
    "alarm_acknowledged": _ALARM,
    # an event alarm that counted a further event while it fired (its message and count moved on)
    "alarm_repeated": _ALARM,
    "alarm_state_restored": {"path": "text", "saved_at": "number", "saved_by_run": "text", "trend_series": "number",
                             "first_seen": "number", "alarms": "number", "recent": "number",
                             "path_resistance": "number", "dropped": "number"},
    "alarm_state_ignored": {},
    "alarm_state_save_failed": {},
    "guard_engaged": {**_GUARD_CAP, "left_behind": "bool", "held": "bool"},
    "guard_step": _GUARD_CAP,
    # A GPU that (re)appeared while the guard is engaged, given the steps in force.
    "guard_extended": _GUARD_CAP,
    "guard_held": {"by": "text", "command": "text", "step": "int"},
    "guard_restored": _GUARD,
    # Caps kept in force while the rail (or the GPUs' throttle reasons) cannot be read.
    "guard_holding": {"mode": "text", "dry_run": "bool", "step": "int", "step_name": "text", "gpus": "text",
                      "unread_since": "number"},
    # An operator's release when nothing was in force (agents before it said ``guard_restored``).
    "guard_released_idle": _GUARD_COMMAND,
    # ``gpus``: the GPUs that failed (for the ceiling on actions: those the step would have capped).
    "guard_failed": {**_GUARD, "reason": "text", "changed_elsewhere": "bool", "left_behind": "bool",
                     "state_file": "text"},
    # GPUs and the kernel log
    "gpu_lost": {**_GPU_IDS, "uuid": "text", "name": "text", "reason": "text"},
    "gpu_back": {"gpu_index": "int", "uuid": "text", "name": "text", "lost_reason": "text", "lost_s": "number",
                 "pci_bus_id": "text"},
    "xid": {**_KERNEL, "xid": "int", "uuid": "text", "pid": "int", "process": "text", "text": "text"},
    "gpu_off_bus": _KERNEL,
    "pcie_aer": {**_KERNEL, "severity": "text", "error_type": "text", "agent": "text", "requester_id": "text"},
    "kernel_log_overrun": {"lost": "number", "lost_total": "number"},
    "kernel_log_garbled": {"garbled": "number", "garbled_total": "number"},
    "nvml_events_hung": {"source": "text", "waited_s": "number"},
    "nvml_events_failed": {"source": "text", "error": "text"},
    "nvml_events_resumed": {"source": "text"},
    "gpu_process_started": _GPU_PROCESS,
    "gpu_process_released": _GPU_PROCESS,
    # ``after_*``: the trouble the exit followed (rigmon.agent.trouble).
    "gpu_process_exited": {**_GPU_PROCESS, "exit_status": "int", "exit_code": "int", "exit_signal": "int",
                           "after_event": "text", "after_kind": "text", "after_s": "number"},
    # A process the agent's /proc does not show (another PID namespace) gone from the GPU: exited or not.
    "gpu_process_left": {**_GPU_PROCESS, "after_event": "text", "after_kind": "text", "after_s": "number"},
    # power
    "psu_adc_reconnected": {},
    "psu_adc_disconnected": {"reason": "text"},
    "psu_adc_replaced": {"device_id": "text", "previous": "text"},
    "psu_adc_rebooted": {"why": "text"},
    "psu_adc_protocol_mismatch": {"protocol": "text", "line": "text"},
    "psu_adc_channel_missing": {"channel": "text", "channels": "text"},
    "psu_current_imbalance": {"share_pct": "number", "deviation_pct": "number"},
    "psu_current_balanced": {},
    # storage
    "diskstats_line_skipped": {"skipped": "number", "skipped_total": "number", "line": "text"},
    "net_dev_line_skipped": {"skipped": "number", "skipped_total": "number", "line": "text"},
    "net_link_down": _NET_LINK,
    "net_link_up": _NET_LINK,
    "net_link_removed": _NET_LINK,
    "net_link_flapped": {**_NET_LINK, "downs": "int"},
    "proc_stat_garbled": {"error": "text"},
    "raid_array_added": {"level": "text", "health": "text"},
    "raid_health_changed": {**_FROM_TO, "array_state": "text", "degraded": "int"},
    "raid_member_changed": {**_FROM_TO, "member": "text"},
    "raid_sync_changed": _FROM_TO,
    "raid_array_removed": {"md_name": "text"},
    "nvme_added": {"serial": "text", "model": "text", "md_arrays": "text"},
    "nvme_removed": {"serial": "text", "model": "text", "md_arrays": "text"},
    "nvme_link_lost": {"serial": "text", "md_arrays": "text"},
    "nvme_link_changed": {"from_gts": "number", "to_gts": "number", "from_width": "int", "to_width": "int",
                          "md_arrays": "text"},
    "nvme_link_below_max": _NVME_LINK,
    "nvme_link_recovered": _NVME_LINK,
    "nvme_state_changed": {**_FROM_TO, "md_arrays": "text"},
    "nvme_temp_over_max": _NVME_TEMP,
    "nvme_temp_normal": _NVME_TEMP,
    # links
    "tb_device_added": _TB_LINK,
    "tb_device_removed": _TB_LINK,
    "tb_link_degraded": _TB_LINK,
    "tb_link_recovered": _TB_LINK,
    "tb_link_changed": {**_TB_LINK, "from_rx_gbps": "number", "from_tx_gbps": "number", "from_rx_lanes": "int",
                        "from_tx_lanes": "int"},
    "tb_authorized_changed": {"authorized": "bool"},
    "rdma_port_added": _RDMA,
    "rdma_port_removed": _RDMA,
    "rdma_port_degraded": _RDMA,
    "rdma_port_state_changed": {**_RDMA, "from_state": "text", "from_phys_state": "text"},
    "rdma_port_rate_changed": {**_RDMA, "from_rate_gbps": "number"},
    "rdma_link_downed": {**_RDMA, "downs": "int"},
    "rdma_counter_saturated": {**_RDMA, "counter": "text", "value": "int"},
    "peer_path_silent": _PEER,
    "peer_path_degraded": _PEER,
    "peer_path_recovered": _PEER,
}

#: Kinds the journal writes and no frame carries (the journal's readers show them: /v1/history, snapshots,
#: replays): no rule in the agent sees them, so an event rule on one is refused.
JOURNAL_ONLY_KINDS = frozenset({"journal_begun"})


def data_type(kind: Mapping[str, EventDataType], key: str) -> EventDataType | None:
    """The type of data ``key`` in events of one kind (its entry of `EVENT_KINDS`); ``None``: never carried."""
    found = kind.get(key)
    if found is not None:
        return found
    for pattern, of in kind.items():
        if pattern.endswith("*") and key.startswith(pattern[:-1]):
            return of
    return None


def fits(value: object, of: EventDataType) -> bool:
    """Whether a rule's ``value`` can equal a data value of type ``of`` (ints and floats are both numbers;
    an integer key takes a whole float, ``79.0``, which equals ``79``, and refuses ``79.5``, which never would)."""
    if of == "any":
        return True
    if of == "bool":
        return isinstance(value, bool)
    if of == "int":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if of == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, str)
