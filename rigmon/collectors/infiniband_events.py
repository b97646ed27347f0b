"""RDMA port events between two reads (`rigmon.collectors.infiniband.InfinibandCollector`): ports added and
removed, state, rate and degraded changes, link downs counted by ``link_downed``, counters stopped at their maximum."""

from __future__ import annotations

from collections.abc import Mapping

from rigmon.collectors.base import EventDraft
from rigmon.collectors.infiniband_saturation import COUNTER_MAX
from rigmon.schema import InfinibandPortReading

#: ``state`` id of an active port (``4: ACTIVE``).
ACTIVE = 4


def saturated_event(r: InfinibandPortReading, counter: str, at: float) -> EventDraft:
    """``rdma_counter_saturated``: ``counter`` of port ``r`` reached its maximum, where it stops."""
    top = COUNTER_MAX[counter]
    return EventDraft("rdma_counter_saturated", "warning", f"rdma:{r.name}",
                      f"RDMA port {r.name} counter {counter} stopped at {top}, its maximum: it counts no more errors, "
                      "and errors_total stands still while they go on; clear the port's counters (perfquery -R)",
                      {**_data(r), "counter": counter, "value": top}, at)


def _state_changed(last: InfinibandPortReading, r: InfinibandPortReading, readable_only: bool) -> bool:
    """Whether a port's state or physical state changed since ``last``; with ``readable_only`` a
    file that could not be read now (``None``) is no change."""
    if not readable_only:
        return (r.state_id, r.physical_state_id) != (last.state_id, last.physical_state_id)
    if r.state_id is None:
        return False
    return r.state_id != last.state_id or (r.physical_state_id is not None and last.physical_state_id is not None
                                           and r.physical_state_id != last.physical_state_id)


def _state_text(r: InfinibandPortReading) -> str:
    phys = f" ({r.phys_state})" if r.phys_state else ""
    return f"{r.state or '?'}{phys}"


def _data(r: InfinibandPortReading) -> dict[str, str | int | float | bool | None]:
    return {"device": r.device, "port": r.port, "state": r.state, "phys_state": r.phys_state,
            "rate_gbps": r.rate_gbps, "expected_gbps": r.expected_gbps, "link_layer": r.link_layer,
            "link_state": r.link_state, "link_downed_total": r.link_downed_total}


def port_events(seen: Mapping[str, InfinibandPortReading] | None, now: Mapping[str, InfinibandPortReading],
                at: float, active_rates: Mapping[str, float] | None = None,
                state_reads: Mapping[str, InfinibandPortReading] | None = None,
                downed_reads: Mapping[str, int] | None = None) -> list[EventDraft]:
    """Events between two reads of every port (``seen`` is ``None`` on the first read).

    Args:
        active_rates: each port's rate at its last read while ACTIVE, before ``now``. When
            given, a rate change is an ACTIVE port's rate against it: a port without a link
            shows a rate of its own (``10 Gb/sec (4X)`` while polling), which is no retrain.
            ``None``: against the previous read.
        state_reads: each port's last read whose ``state`` could be read, before ``now``. When
            given, a state change is a readable state against it: a ``state`` or ``phys_state``
            file that is empty or unreadable for a read says nothing (it was ``ACTIVE -> ?``, a
            warning, and back). ``None``: against the previous read.
        downed_reads: each port's ``link_downed`` counter at its last read that could read it, before
            ``now``. When given, downs are counted from it: a read that could not read the counter
            (the driver refuses it while the port resets, as it flaps) loses none of them.
            ``None``: against the previous read.
    """
    out: list[EventDraft] = []
    for key, r in now.items():
        subject = f"rdma:{key}"
        before = None if seen is None else seen.get(key)
        if before is None:
            if seen is not None:
                out.append(EventDraft("rdma_port_added", "info", subject,
                                      f"RDMA port {key} appeared: {_state_text(r)}", _data(r), at))
            if r.link_state == "degraded":
                out.append(EventDraft("rdma_port_degraded", "warning", subject,
                                      f"RDMA port {key} came up degraded: {r.degraded_reason}", _data(r), at))
            continue
        last = before if state_reads is None else state_reads.get(key)
        if last is not None and _state_changed(last, r, state_reads is not None):
            left_active = last.state_id == ACTIVE and r.state_id != ACTIVE
            out.append(EventDraft("rdma_port_state_changed", "warning" if left_active else "info", subject,
                                  f"RDMA port {key} {_state_text(last)} -> {_state_text(r)}",
                                  {**_data(r), "from_state": last.state, "from_phys_state": last.phys_state},
                                  at))
        downed_before = before.link_downed_total if downed_reads is None else downed_reads.get(key)
        if (r.link_downed_total is not None and downed_before is not None
                and r.link_downed_total > downed_before):
            n = r.link_downed_total - downed_before
            out.append(EventDraft("rdma_link_downed", "warning", subject,
                                  f"RDMA port {key} link went down {n} time{'s' if n != 1 else ''}",
                                  {**_data(r), "downs": n}, at))
        if active_rates is None:
            last_rate = before.rate_gbps
        else:
            last_rate = active_rates.get(key) if r.state_id == ACTIVE else None
        if r.rate_gbps != last_rate and r.rate_gbps is not None and last_rate is not None:
            slower = r.rate_gbps < last_rate
            out.append(EventDraft("rdma_port_rate_changed", "warning" if slower else "info", subject,
                                  f"RDMA port {key} rate {last_rate:g} -> {r.rate_gbps:g} Gb/s",
                                  {**_data(r), "from_rate_gbps": last_rate}, at))
        if r.link_state != before.link_state and r.link_state == "degraded":
            out.append(EventDraft("rdma_port_degraded", "warning", subject,
                                  f"RDMA port {key} degraded: {r.degraded_reason}", _data(r), at))
    for key, gone in (seen or {}).items():
        if key not in now:
            out.append(EventDraft("rdma_port_removed", "warning", f"rdma:{key}", f"RDMA port {key} disappeared",
                                  _data(gone), at))
    return out
