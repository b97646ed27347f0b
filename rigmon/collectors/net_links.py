"""Network links that lose their carrier: events when a link goes down, comes back or flaps between
reads, and whether a link that had a carrier since the agent started has lost it now (`link_lost`).

Incident 7: the data link between the nodes of a cluster (10/100 GbE, thunderbolt-net) drops and the
job's collectives hang. A port never seen with a carrier (a free second port, an unplugged management
NIC) is not a lost link. An interface backed by an RDMA device (RoCE, IPoIB: its device has an
``infiniband`` directory) is the RDMA collector's: its port state, `rdma_port_down` and
`rdma_port_flapped` already say it, once. Pure judgement over what the host collector read: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from rigmon.collectors.base import EventDraft

#: Kinds of interface whose lost carrier is a lost link (`rigmon.collectors.host.parse_net_kind`).
#: A bridge, a virtual interface (veth, docker, tun) or Wi-Fi going down is its software's business.
WATCHED_KINDS = frozenset({"ethernet", "thunderbolt-net", "bond", "infiniband"})
#: operstate values of a link that is down (RFC 2863; ``dormant``, ``testing`` and ``unknown`` say nothing).
DOWN_STATES = frozenset({"down", "lowerlayerdown", "notpresent"})


@dataclass(slots=True)
class _Link:
    """What is kept of one interface between reads."""

    kind: str | None = None
    had_carrier: bool = False
    up: bool | None = None
    changes: int | None = None
    speed_mbps: int | None = None
    rx_bytes: int | None = None


def link_up(carrier: bool | None, operstate: str | None) -> bool | None:
    """Whether a link is up: its carrier, else its operstate (``carrier`` reads EINVAL while the
    interface is administratively down); ``None`` when neither says."""
    if carrier is not None:
        return carrier
    if operstate == "up":
        return True
    if operstate in DOWN_STATES:
        return False
    return None


def _gbps(speed_mbps: int | None) -> str:
    return "" if speed_mbps is None else f" at {speed_mbps / 1000:g} Gb/s"


class NetLinkWatch:
    """Each watched interface's carrier from read to read (see the module docstring)."""

    def __init__(self) -> None:
        self._links: dict[str, _Link] = {}
        #: Links that had a carrier when their interface went away: one back under the name is the link
        #: back (a thunderbolt-net cable plugged in again, a NIC's driver reloaded).
        self._gone: set[str] = set()

    def judge(self, name: str, kind: str | None, rdma: bool, carrier: bool | None, operstate: str | None,
              carrier_changes: int | None, speed_mbps: int | None,
              rx_bytes: int | None = None) -> tuple[bool, list[EventDraft]]:
        """Whether ``name`` lost its link, and the events of this read (none on its first).

        Args:
            name: the interface's name as records carry it.
            kind: its kind (`parse_net_kind`); only `WATCHED_KINDS` are judged.
            rdma: whether an RDMA device backs it (its device has an ``infiniband`` directory).
            carrier, operstate, carrier_changes, speed_mbps: as read now.
            rx_bytes: its received bytes counter: lower than at the last read, the interface was removed
                and created again between the two (its counters started again), a flap all the same.
        """
        if kind not in WATCHED_KINDS or rdma:
            return False, []
        link = self._links.get(name)
        first = link is None
        if link is None:
            link = self._links[name] = _Link(kind=kind)
        up = link_up(carrier, operstate)
        if up is None:
            up = link.up  # nothing said: as last read
        events: list[EventDraft] = []
        data = {"kind": kind, "carrier_changes_total": carrier_changes}
        subject = f"link:{name}"
        if first and name in self._gone:
            self._gone.discard(name)
            link.had_carrier = True
            if up:
                # A flap, however long: the same alarm as one between two reads, which a read may or may not catch.
                events.append(EventDraft("net_link_flapped", "warning", subject,
                                         f"link {name} went away and came back{_gbps(speed_mbps)} (a new interface)",
                                         {**data, "speed_mbps": speed_mbps, "downs": 1}))
        recreated = not first and rx_bytes is not None and link.rx_bytes is not None and rx_bytes < link.rx_bytes
        if recreated and up and link.up:
            events.append(EventDraft("net_link_flapped", "warning", subject,
                                     f"link {name} went away and came back between two reads (a new interface: "
                                     "its counters started again)", {**data, "speed_mbps": speed_mbps, "downs": 1}))
        elif not first and up is not None and link.up is not None:
            if link.up and not up:
                events.append(EventDraft("net_link_down", "warning", subject,
                                         f"link {name} lost its carrier (it was up{_gbps(link.speed_mbps)})",
                                         {**data, "speed_mbps": link.speed_mbps}))
            elif up and not link.up:
                events.append(EventDraft("net_link_up", "info", subject, f"link {name} is up again{_gbps(speed_mbps)}",
                                         {**data, "speed_mbps": speed_mbps}))
            elif up and carrier_changes is not None and link.changes is not None \
                    and carrier_changes - link.changes >= 2:
                # Down and up again between two reads (a new interface, its count started again, is told
                # by its bytes above).
                downs = (carrier_changes - link.changes) // 2
                events.append(EventDraft("net_link_flapped", "warning", subject,
                                         f"link {name} lost its carrier and got it back between two reads"
                                         f"{'' if downs == 1 else f' ({downs} times)'}",
                                         {**data, "speed_mbps": speed_mbps, "downs": downs}))
        if up:
            link.had_carrier = True
            link.speed_mbps = speed_mbps
        link.up = up
        link.changes = carrier_changes
        link.rx_bytes = rx_bytes
        return bool(link.had_carrier and up is False), events

    def forget_missing(self, names: set[str] | frozenset[str]) -> list[EventDraft]:
        """Drop what is kept of interfaces not in ``names``; the events of links that went away with a
        carrier (a thunderbolt-net cable unplugged takes its interface along; a NIC off the PCIe bus)."""
        events = []
        for name in self._links.keys() - names:
            link = self._links.pop(name)
            if link.had_carrier and link.up:
                self._gone.add(name)
                events.append(EventDraft("net_link_removed", "warning", f"link:{name}",
                                         f"link {name} went away (its interface is gone; it was up"
                                         f"{_gbps(link.speed_mbps)})",
                                         {"kind": link.kind, "carrier_changes_total": link.changes,
                                          "speed_mbps": link.speed_mbps}))
        return events
