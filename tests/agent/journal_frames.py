"""Small frames and an injected clock for the journal tests (one host reading, one NIC)."""

from __future__ import annotations

from rigmon.schema import (
    SCHEMA_VERSION,
    CollectorStatus,
    Event,
    Frame,
    HostReading,
    NetInterfaceReading,
    Readings,
)

T0 = 1_699_999_200.0  # a multiple of 900: buckets start on whole frames


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t - T0


def host(cpu_pct: float) -> HostReading:
    return HostReading(cpu_pct=cpu_pct, cpu_count=8, load_1=1.0, load_5=1.0, load_15=1.0, mem_total_bytes=100,
                       mem_available_bytes=50, swap_total_bytes=0, swap_free_bytes=0, uptime_s=5.0, boot_id="b")


def nic(name: str, rx: float) -> NetInterfaceReading:
    return NetInterfaceReading(name=name, operstate="up", carrier=True, speed_mbps=1000, mtu=1500,
                               rx_bytes_total=1, tx_bytes_total=1, rx_packets_total=1, tx_packets_total=1,
                               rx_errors_total=0, tx_errors_total=0, rx_dropped_total=0, tx_dropped_total=0,
                               carrier_changes_total=1, rx_bytes_per_s=rx, tx_bytes_per_s=None,
                               rx_packets_per_s=None, tx_packets_per_s=None)


def frame(seq: int, at: float, cpu: float, run_id: str = "run1", events: tuple[Event, ...] = ()) -> Frame:
    return Frame(schema=SCHEMA_VERSION, node="n1", run_id=run_id, seq=seq, taken_at=at, agent_start=T0,
                 collectors={"host": CollectorStatus(state="ok", ok=True)},
                 readings=Readings(host=host(cpu), net=(nic("eth0", cpu * 10),)), events=events)
