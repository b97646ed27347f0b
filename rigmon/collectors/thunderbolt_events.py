"""Thunderbolt/USB4 change events: each entry's link, state and authorization against what was last read."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rigmon.collectors.base import EventDraft
from rigmon.schema import LinkState, ThunderboltDeviceReading

#: Per direction's lane speed (Gb/s) and lane count: ``(rx_speed, tx_speed, rx_lanes, tx_lanes)``;
#: ``None`` where the file could not be read.
LinkKey = tuple[float | None, float | None, int | None, int | None]


def link_key(r: ThunderboltDeviceReading) -> LinkKey:
    """The link figures of a reading."""
    return (r.rx_speed_gbps, r.tx_speed_gbps, r.rx_lanes, r.tx_lanes)


def link_changed(before: LinkKey, now: LinkKey) -> bool:
    """Whether a figure read both times changed: a file that could not be read now (empty, garbled,
    refused) says nothing of the link, so ``20 Gb/s x2 -> rx 20 Gb/s x?`` is no change."""
    return any(a is not None and b is not None and a != b for a, b in zip(before, now, strict=True))


def merged(before: LinkKey | None, now: LinkKey) -> LinkKey:
    """``now``, with what it could not read taken from ``before``: the link as last read."""
    if before is None:
        return now
    return (before[0] if now[0] is None else now[0], before[1] if now[1] is None else now[1],
            before[2] if now[2] is None else now[2], before[3] if now[3] is None else now[3])


class TbLinkEvents:
    """Events between reads of the bus: devices added and removed, link figures, link state and
    authorization changed, each judged against its last value read (a read that could not read a
    file is no change: no ``authorized True -> None``, no ``degraded -> unknown -> degraded``)."""

    def __init__(self) -> None:
        self._seen: dict[str, ThunderboltDeviceReading] | None = None
        self._link: dict[str, LinkKey] = {}
        self._judged: dict[str, LinkState] = {}
        self._authorized: dict[str, bool] = {}

    @property
    def started(self) -> bool:
        """Whether the bus was read before."""
        return self._seen is not None

    def events(self, readings: Sequence[ThunderboltDeviceReading], at: float,
               removed: Collection[str] = ()) -> list[EventDraft]:
        """The events of one read of the bus (none but degraded links on the first), at ``at``.

        ``removed``: entries udev said were removed since the last read (a re-read after a burst of
        udev events). One that is back by this read was unplugged and plugged again (or its link
        dropped and retrained) between two reads, which no comparison of the reads can see: it is
        a removal and an addition all the same (incident 5: a link that flaps).
        """
        now = {r.name: r for r in readings}
        seen, self._seen = self._seen, now
        out: list[EventDraft] = []
        for r in readings:
            before = seen.get(r.name) if seen is not None and r.name in removed else None
            if before is not None:
                out.append(EventDraft("tb_device_removed", "warning", f"link:{r.name}",
                                      f"Thunderbolt {label(before)} disconnected (udev: back before the next read)",
                                      link_data(before), at))
                out.append(EventDraft("tb_device_added", "info", f"link:{r.name}",
                                      f"Thunderbolt {label(r)} connected again at {link_text(link_key(r))}",
                                      link_data(r), at))
            out.extend(self._entry_events(r, seen, at))
        for name, gone in (seen or {}).items():
            if name not in now:
                for known in (self._link, self._judged, self._authorized):
                    known.pop(name, None)
                out.append(EventDraft("tb_device_removed", "warning", f"link:{name}",
                                      f"Thunderbolt {label(gone)} disconnected", link_data(gone), at))
        return out

    def _entry_events(self, r: ThunderboltDeviceReading, seen: dict[str, ThunderboltDeviceReading] | None,
                      at: float) -> list[EventDraft]:
        subject = f"link:{r.name}"
        data = link_data(r)
        link_before, judged_before = self._link.get(r.name), self._judged.get(r.name)
        authorized_before = self._authorized.get(r.name)
        self._link[r.name] = merged(link_before, link_key(r))
        if r.link_state != "unknown":
            self._judged[r.name] = r.link_state
        if r.authorized is not None:
            self._authorized[r.name] = r.authorized
        out: list[EventDraft] = []
        if seen is None or r.name not in seen:
            if seen is not None:
                out.append(EventDraft("tb_device_added", "info", subject,
                                      f"Thunderbolt {label(r)} connected at {link_text(link_key(r))}", data, at))
            if r.link_state == "degraded":
                out.append(EventDraft("tb_link_degraded", "warning", subject,
                                      f"Thunderbolt {label(r)} came up degraded: {r.degraded_reason}", data, at))
            return out
        if link_before is not None and link_changed(link_before, link_key(r)):
            rx, tx = _gbps(link_before[0], link_before[2]), _gbps(link_before[1], link_before[3])
            slower = r.rx_gbps is not None and r.tx_gbps is not None and rx is not None and tx is not None \
                and r.rx_gbps + r.tx_gbps < rx + tx
            out.append(EventDraft(
                "tb_link_changed", "warning" if slower else "info", subject,
                f"Thunderbolt {label(r)} link {link_text(link_before)} -> {link_text(link_key(r))}",
                {**data, "from_rx_gbps": rx, "from_tx_gbps": tx,
                 "from_rx_lanes": link_before[2], "from_tx_lanes": link_before[3]}, at,
            ))
        if r.link_state == "degraded" and judged_before != "degraded":
            out.append(EventDraft("tb_link_degraded", "warning", subject,
                                  f"Thunderbolt {label(r)} degraded: {r.degraded_reason}", data, at))
        elif r.link_state == "ok" and judged_before == "degraded":
            out.append(EventDraft("tb_link_recovered", "info", subject,
                                  f"Thunderbolt {label(r)} back at {link_text(link_key(r))}", data, at))
        if r.authorized is not None and authorized_before is not None and r.authorized != authorized_before:
            out.append(EventDraft("tb_authorized_changed", "info", subject,
                                  f"Thunderbolt {label(r)} authorized {authorized_before} -> {r.authorized}",
                                  {"authorized": r.authorized}, at))
        return out


def label(r: ThunderboltDeviceReading) -> str:
    """``0-1 (OWC Express 1M2)``: the router name, and vendor and device names when known."""
    what = " ".join(p for p in (r.vendor, r.device_name) if p)
    return f"{r.name} ({what})" if what else r.name


def link_text(key: LinkKey) -> str:
    """``20 Gb/s x2``, ``rx 20 Gb/s x2 / tx 10 Gb/s x2``, ``no link files``."""
    rx_speed, tx_speed, rx_lanes, tx_lanes = key
    if rx_speed is None and tx_speed is None:
        return "no link files"
    rx, tx = _direction(rx_speed, rx_lanes), _direction(tx_speed, tx_lanes)
    return tx if rx == tx else f"rx {rx} / tx {tx}"


def _direction(speed: float | None, lanes: int | None) -> str:
    return f"{'?' if speed is None else f'{speed:g}'} Gb/s x{'?' if lanes is None else lanes}"


def _gbps(speed: float | None, lanes: int | None) -> float | None:
    return None if speed is None or lanes is None else speed * lanes


def link_data(r: ThunderboltDeviceReading) -> dict[str, str | int | float | bool | None]:
    """An event's data: the link's bandwidth and lanes each way, its expected rate and state."""
    return {"rx_gbps": r.rx_gbps, "tx_gbps": r.tx_gbps, "rx_lanes": r.rx_lanes, "tx_lanes": r.tx_lanes,
            "expected_gbps": r.expected_gbps, "link_state": r.link_state, "unique_id": r.unique_id}
