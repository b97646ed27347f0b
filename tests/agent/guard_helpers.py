"""Helpers of the guard service tests: an injected clock, an event recorder, rail frames, a service
over the fake NVML."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from rigmon.agent.guard.service import GuardService
from rigmon.config import GuardSection
from rigmon.hw.nvml_control import open_nvml_control
from rigmon.hw.root import HostRoot
from rigmon.schema import (
    Alarm,
    CollectorStatus,
    Event,
    EventValue,
    Frame,
    GpuReading,
    PsuAdcCounters,
    PsuRailReading,
    Readings,
    Severity,
    VoltageEnvelope,
)
from rigmon.sim.nvml import FakeNvmlMachine


DEADLINE_S = 10.0
#: The trigger alarm rule of the tests.
RULE = "psu_rail_low_critical"


class Clock:
    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, str, dict[str, EventValue]]] = []

    def __call__(self, kind: str, severity: Severity, subject: str, message: str,
                 data: dict[str, EventValue] | None) -> None:
        self.items.append((kind, message, dict(data or {})))

    def kinds(self) -> list[str]:
        return [k for k, _, _ in self.items]


def frame(at: float, volts: float, gpus: int = 0, lost: tuple[int, ...] = ()) -> Frame:
    rail = PsuRailReading(
        port="/dev/x", protocol="rm1", connected=True, stale=False, envelope_source="device", windows=1,
        volts=VoltageEnvelope(11.9, volts, 12.0), amps=None, channels_volts={}, channels_amps={}, samples=None,
        window_s=1.0, flags=0, under_voltage_latched=False, sag=volts < 11.5, seq=int(at), device_id=None,
        firmware=None,
        sensor=None, last_window_at=None, counters=PsuAdcCounters(),
    )
    readings = tuple(GpuReading(index=i, uuid=None, name=None, serial=None, pci_bus_id=None, pci_bus_id_nvml=None,
                                pci_bus_id_xid=None, state="lost" if i in lost else "ok") for i in range(gpus))
    return Frame(schema=1, node="n", run_id="r", seq=1, taken_at=at, agent_start=0.0,
                 collectors={"psu": CollectorStatus("ok", True)}, readings=Readings(psu_rail=rail, gpus=readings),
                 events=())


def firing_alarm(alarm_id: str = "a1", rule: str = RULE) -> Alarm:
    """An alarm of ``rule`` firing, as the alarm engine has it in force."""
    return Alarm(id=alarm_id, rule=rule, rule_kind="threshold", severity="critical", node="n", subject="psu",
                 state="firing", message="x", started_at=0.0, updated_at=0.0)


def alarm_event(kind: str, alarm_id: str = "a1", **data: EventValue) -> Event:
    """The alarms' event of ``kind`` (``alarm_firing``, ``alarm_resolved``) for an alarm of `RULE`."""
    return Event(f"e-{kind}", 0.0, kind, "critical", "psu", "x", {"rule": RULE, "alarm_id": alarm_id, **data})


async def settle(service: GuardService) -> None:
    await asyncio.to_thread(service.wait_idle, DEADLINE_S)
    await asyncio.sleep(0)  # events hop to the loop with call_soon_threadsafe


def make(tmp_path: Path, config: GuardSection, events: Events, clock: Clock) -> GuardService:
    control = open_nvml_control(HostRoot(str(tmp_path / "root")), timeout_s=config.call_timeout_s)
    return GuardService(config, control, events, clock, state_dir=str(tmp_path / "state"), node="n")


ENFORCE = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, gpus=(0, 1, 2, 3))


async def started(tmp_path: Path, config: GuardSection, events: Events, clock: Clock) -> GuardService:
    """A guard made and started, its start-up work (state file, probe of the driver) done."""
    service = make(tmp_path, config, events, clock)
    service.start()
    await settle(service)
    return service


async def engaged(tmp_path: Path, config: GuardSection, events: Events, clock: Clock, gpus: int = 0) -> GuardService:
    """A guard made and started that has seen one sag (a frame at 11.3 V) and done what it decided."""
    service = make(tmp_path, config, events, clock)
    service.start()
    service.on_frame(frame(clock.t, 11.3, gpus=gpus))
    await settle(service)
    return service


async def engaged_by_sags(tmp_path: Path, config: GuardSection, events: Events, clock: Clock,
                          sags: int) -> GuardService:
    """A guard made and started that has seen ``sags`` frames at 11.3 V a second apart (each one may
    step it further) and done what it decided."""
    service = make(tmp_path, config, events, clock)
    service.start()
    for _ in range(sags):
        clock.t += 1
        service.on_frame(frame(clock.t, 11.3))
    await settle(service)
    return service


def gpu_frame(at: float, machine: FakeNvmlMachine, volts: float = 11.9) -> Frame:
    """A frame whose GPU readings are the fake GPUs' now: a lost one reads ``lost`` and nothing else."""
    base = frame(at, volts)
    gpus = tuple(
        GpuReading(index=g.index, uuid=None, name=None, serial=None, pci_bus_id=None, pci_bus_id_nvml=None,
                   pci_bus_id_xid=None, state="lost")
        if g.lost else
        GpuReading(index=g.index, uuid=None, name=None, serial=None, pci_bus_id=None, pci_bus_id_nvml=None,
                   pci_bus_id_xid=None, clock_app_mem_mhz=g.app_clock_mem_mhz,
                   clock_app_graphics_mhz=g.app_clock_graphics_mhz, power_limit_w=g.power_limit_mw / 1000)
        for g in machine.gpus)
    collectors = {**base.collectors, "gpu": CollectorStatus("ok", True, duration_s=0.01, sampled_at=at)}
    return msgspec.structs.replace(base, collectors=collectors,
                                   readings=msgspec.structs.replace(base.readings, gpus=gpus))
