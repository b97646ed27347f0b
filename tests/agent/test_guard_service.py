"""The guard in the agent over the fake NVML: acting, dry-run, refusals, hung calls, stop and restart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import msgspec
import pytest

from rigmon.agent.guard.service import GuardService
from rigmon.agent.guard.state_file import state_file_path
from rigmon.config import GuardSection
from rigmon.hw.nvml_control import NvmlControl, open_nvml_control
from rigmon.hw.root import HostRoot
from rigmon.schema import (
    CollectorStatus,
    EventValue,
    Frame,
    GpuReading,
    PsuAdcCounters,
    PsuRailReading,
    Readings,
    Severity,
    VoltageEnvelope,
)
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.summary.figures import guard_mark
from rigmon.tui.widgets.guard_line import guard_text

DEADLINE_S = 10.0


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


async def driver_answers(service: GuardService) -> None:
    """Wait until the call that hung has returned (its watchdog fails every call until then)."""
    control = service.shared.control
    assert isinstance(control, NvmlControl)
    for _ in range(int(DEADLINE_S / 0.01)):
        if not control._watchdog.stuck:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the hung call never returned")


async def settle(service: GuardService) -> None:
    await asyncio.to_thread(service.wait_idle, DEADLINE_S)
    await asyncio.sleep(0)  # events hop to the loop with call_soon_threadsafe


@pytest.fixture
def machine() -> FakeNvmlMachine:
    return FakeNvmlMachine(v100_sxm2_gpus(4))


def make(tmp_path: Path, config: GuardSection, events: Events, clock: Clock) -> GuardService:
    control = open_nvml_control(HostRoot(str(tmp_path / "root")), timeout_s=config.call_timeout_s)
    return GuardService(config, control, events, clock, state_dir=str(tmp_path / "state"), node="n")


ENFORCE = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, gpus=(0, 1, 2, 3))


async def engaged_then_killed(tmp_path: Path, events: Events, clock: Clock) -> None:
    """An enforcing guard that engages on a sag and is then killed: no close(), nothing restored;
    only its worker thread goes away (the state file and the caps stay)."""
    first = make(tmp_path, ENFORCE, events, clock)
    first.start()
    first.on_frame(frame(clock.t, 11.3))
    await settle(first)
    first.worker._executor.shutdown(wait=True)


async def test_enforce_caps_every_gpu_then_restores_after_healthy(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, ENFORCE, events, clock)
        service.start()
        service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4  # derived: 0.66 x 1530
        assert all(g.persistence_mode == 1 for g in machine.gpus)
        kind, message, data = events.items[-1]
        assert kind == "guard_engaged" and data["dry_run"] is False and data["gpus"] == "0,1,2,3"
        assert "877/1312 MHz" in str(data["before"]) and "877/1005 MHz" in str(data["after"])
        assert "11.300 V" in str(data["trigger"])
        assert state_file_path(tmp_path / "state").exists()
        reading = service.reading()
        assert (reading.state, reading.step, reading.acting) == ("engaged", 1, True)
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert not any(g.app_clocks_set for g in machine.gpus)
        assert all(g.persistence_mode == 0 for g in machine.gpus)
        assert events.kinds()[-1] == "guard_restored" and not state_file_path(tmp_path / "state").exists()
        assert service.reading().state == "armed"
        await asyncio.to_thread(service.close)


async def test_no_permission_reports_once_and_stays_in_dry_run(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    machine.no_permission = True
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, ENFORCE, events, clock)
        service.start()
        await settle(service)
        service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        assert events.kinds() == ["guard_failed", "guard_engaged"]
        assert "permission" in events.items[0][1]
        _, message, data = events.items[1]
        assert data["dry_run"] is True and "would cap" in message and "877/1005 MHz" in str(data["after"])
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        reading = service.reading()
        assert not reading.acting and reading.reason and "permission" in reading.reason
        assert not state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(service.close)


async def test_a_hung_call_is_reported_and_sampling_is_not_blocked(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, call_timeout_s=0.2, app_clocks_mhz=(877, 1005),
                          gpus=(0, 1))
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, config, events, clock)
        service.start()
        await settle(service)
        machine.fail("hang")
        try:
            # Frames keep coming while the driver hangs: on_frame only decides and queues.
            service.on_frame(frame(clock.t, 11.3))
            for _ in range(5):
                clock.t += 1
                service.on_frame(frame(clock.t, 11.9))
            await settle(service)
            failed = [(m, d) for k, m, d in events.items if k == "guard_failed"]
            assert failed and ("did not return" in failed[0][0] or "has not returned" in failed[0][0])
            assert service.reading().failures_total >= 1
        finally:
            machine.heal("hang")
        await asyncio.to_thread(service.close)


async def test_stop_restores_what_it_changed(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, step_after_s=0, power_limit_w=200,
                          gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, config, events, clock)
        service.start()
        for volts in (11.3, 11.3, 11.3):
            clock.t += 1
            service.on_frame(frame(clock.t, volts))
        await settle(service)
        assert events.kinds()[-3:] == ["guard_engaged", "guard_step", "guard_step"]
        assert machine.gpus[0].locked_clock_max_mhz == 1005 and machine.gpus[0].power_limit_mw == 200_000
        await asyncio.to_thread(service.close)
        await asyncio.sleep(0)
        assert events.kinds()[-1] == "guard_restored"
        gpu = machine.gpus[0]
        assert (gpu.app_clock_graphics_mhz, gpu.locked_clock_max_mhz, gpu.power_limit_mw) == (1312, None, 300_000)
        assert not state_file_path(tmp_path / "state").exists()


async def test_a_power_limit_whose_value_before_was_not_known_goes_back_to_the_default(tmp_path: Path) -> None:
    """A driver that does not report the power limit: the guard's 200 W stayed after the restore."""
    machine = FakeNvmlMachine(v100_sxm2_gpus(4), missing_symbols=["nvmlDeviceGetPowerManagementLimit"])
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, step_after_s=0, power_limit_w=200,
                          restore_after_s=30.0, gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, config, events, clock)
        service.start()
        for _ in range(3):
            clock.t += 1
            service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        assert [g.power_limit_mw for g in machine.gpus] == [200_000] * 4
        assert [s.power_limit_w for s in service.reading().settings] == [200.0] * 4
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert events.kinds()[-1] == "guard_restored"
        assert [g.power_limit_mw for g in machine.gpus] == [g.default_limit_mw for g in machine.gpus]
        await asyncio.to_thread(service.close)


async def test_killed_while_engaged_then_restarted_finds_and_restores(tmp_path: Path,
                                                                      machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        await engaged_then_killed(tmp_path, events, clock)
        assert machine.gpus[2].app_clock_graphics_mhz == 1005
        assert state_file_path(tmp_path / "state").exists()

        events2 = Events()
        clock.t += 100
        second = make(tmp_path, ENFORCE, events2, clock)
        second.start()
        await settle(second)
        kind, message, data = events2.items[0]
        assert kind == "guard_engaged" and data["left_behind"] is True and "previous agent run" in message
        reading = second.reading()
        assert reading.left_behind and reading.state == "engaged"
        assert [s.app_clock_graphics_mhz for s in reading.original] == [1312] * 4
        clock.t += 31
        second.on_frame(frame(clock.t, 11.9))
        await settle(second)
        assert events2.kinds()[-1] == "guard_restored"
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert not state_file_path(tmp_path / "state").exists() and not second.reading().left_behind
        await asyncio.to_thread(second.close)


async def test_operator_hold_and_release(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, ENFORCE, events, clock)
        service.start()
        service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        assert service.command("hold", "alice").state == "held"
        clock.t += 1000
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert machine.gpus[0].app_clock_graphics_mhz == 1005
        service.command("release", "alice")
        await settle(service)
        assert machine.gpus[0].app_clock_graphics_mhz == 1312
        assert events.kinds()[-1] == "guard_restored" and "alice" in events.items[-1][1]
        await asyncio.to_thread(service.close)


def test_a_disabled_guard_still_reports_settings_left_behind(tmp_path: Path) -> None:
    from rigmon.agent.guard.state_file import report_left_behind_when_disabled

    events = Events()
    assert not report_left_behind_when_disabled(str(tmp_path), events)
    state_file_path(tmp_path).write_text("{}")
    assert report_left_behind_when_disabled(str(tmp_path), events)
    kind, message, data = events.items[0]
    assert kind == "guard_failed" and data["left_behind"] is True and "nvidia-smi -rac" in message


async def test_a_restore_that_hung_is_tried_again_and_a_stop_still_restores(tmp_path: Path,
                                                                           machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, call_timeout_s=0.2,
                          gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, config, events, clock)
        service.start()
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        # The driver hangs on the restore's first write: every GPU's restore fails.
        machine.fail("hang", symbols={"nvmlDeviceSetApplicationsClocks"})
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        machine.heal("hang")
        await driver_answers(service)
        assert events.kinds()[-1] == "guard_failed"
        assert state_file_path(tmp_path / "state").exists()
        assert len(service.reading().settings) == 4  # still in force, and said so
        # ... on the dashboard too: not "guard armed" and no mark while the caps are on.
        assert service.reading().step == 0 and guard_mark(service.reading()) == "G!"
        assert "caps still in force on GPUs 0,1,2,3, the restore failed: retrying" in guard_text(service.reading())
        # The guard tries again once the driver answers; GPU 3 fell off the bus meanwhile.
        machine.fail("gpu_lost", gpu=3)
        for _ in range(3):
            clock.t += 30
            service.on_frame(frame(clock.t, 11.9, gpus=4, lost=(3,)))
            await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus[:3]] == [1312] * 3
        kind, message, data = events.items[-1]
        assert kind == "guard_restored" and "GPUs 0,1,2 " in message
        assert [s.index for s in service.reading().settings] == [3]  # the lost one, still reported
        assert state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(service.close)


async def test_a_stop_after_a_failed_restore_puts_the_settings_back(tmp_path: Path,
                                                                   machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, call_timeout_s=0.2,
                          gpus=(0, 1))
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, config, events, clock)
        service.start()
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        machine.fail("hang", symbols={"nvmlDeviceSetApplicationsClocks"})
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        machine.heal("hang")
        await driver_answers(service)
        assert machine.gpus[1].app_clock_graphics_mhz == 1005
        await asyncio.to_thread(service.close)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert not state_file_path(tmp_path / "state").exists()


async def test_application_clocks_only_permission_still_restores_what_it_capped(tmp_path: Path,
                                                                                 machine: FakeNvmlMachine) -> None:
    # nvidia-smi -pm 1; nvidia-smi -acp UNRESTRICTED; agent not root: step 1 may write, step 2 may not.
    machine.no_permission = machine.app_clocks_unrestricted = True
    for gpu in machine.gpus:
        gpu.persistence_mode = 1
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, step_after_s=0, restore_after_s=30.0,
                          gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, config, events, clock)
        service.start()
        for _ in range(2):
            clock.t += 1
            service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        assert [(g.app_clock_graphics_mhz, g.locked_clock_max_mhz) for g in machine.gpus] == [(1005, None)] * 4
        kind, message, _ = events.items[-1]
        assert kind == "guard_failed" and "lock clocks" in message and "permission" in message
        reading = service.reading()
        # What is in force, not what a dry-run would have added on top.
        assert [(s.app_clock_graphics_mhz, s.locked_clock_max_mhz) for s in reading.settings] == [(1005, None)] * 4
        assert "would cap" not in " ".join(m for _, m, _ in events.items)
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        kind, message, data = events.items[-1]
        assert kind == "guard_restored" and "would" not in message and data["dry_run"] is False
        assert not state_file_path(tmp_path / "state").exists()
        # The next sag is capped again: a refused lock does not make the whole guard a dry-run.
        clock.t += 1
        service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        assert service.reading().acting
        await asyncio.to_thread(service.close)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4


async def test_application_clocks_only_permission_caps_without_persistence_and_a_stop_restores(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    # Persistence mode needs root even under -acp UNRESTRICTED: the clocks are capped all the same.
    machine.no_permission = machine.app_clocks_unrestricted = True
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, ENFORCE, events, clock)
        service.start()
        service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        assert events.kinds()[-1] == "guard_engaged" and service.reading().acting
        await asyncio.to_thread(service.close)
        assert [(g.app_clock_graphics_mhz, g.persistence_mode) for g in machine.gpus] == [(1312, 0)] * 4
        assert not state_file_path(tmp_path / "state").exists()


async def test_the_state_file_is_written_before_the_first_write_reaches_a_gpu(tmp_path: Path,
                                                                              machine: FakeNvmlMachine) -> None:
    # An agent killed while its first write is in the driver must still find the originals.
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, call_timeout_s=60.0, gpus=(0, 1))
    path = state_file_path(tmp_path / "state")
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, config, events, clock)
        service.start()
        await settle(service)
        machine.fail("hang", symbols={"nvmlDeviceSetApplicationsClocks"})
        try:
            service.on_frame(frame(clock.t, 11.3))
            for _ in range(500):
                if path.exists():
                    break
                await asyncio.sleep(0.01)
            assert path.exists(), "GPU 0 is being written and no state file says what to restore"
            saved = json.loads(path.read_text())
            assert [o["app_clock_graphics_mhz"] for o in saved["original"]] == [1312]
            assert [o["app_clock_graphics_mhz"] for o in saved["in_force"]] == [1005]
        finally:
            machine.heal("hang")
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus[:2]] == [1005] * 2
        await asyncio.to_thread(service.close)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4 and not path.exists()


async def test_writes_that_were_all_refused_leave_no_state_file(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, app_clocks_mhz=(877, 1000), gpus=(0, 1))
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, config, events, clock)
        service.start()
        service.on_frame(frame(clock.t, 11.3))  # 1000 MHz is no V100 clock: INVALID_ARGUMENT
        await settle(service)
        assert events.kinds()[-1] == "guard_failed"
        assert not state_file_path(tmp_path / "state").exists()
        assert service.reading().settings == ()
        await asyncio.to_thread(service.close)


@pytest.mark.parametrize("text", ["{not json", "[]", '{"step": 1, "gpus": [0], "original": [{"index": "zero"}]}'])
async def test_an_unreadable_state_file_is_kept_aside_and_not_overwritten(tmp_path: Path, machine: FakeNvmlMachine,
                                                                        text: str) -> None:
    events, clock = Events(), Clock()
    path = state_file_path(tmp_path / "state")
    path.parent.mkdir()
    path.write_text(text)
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, ENFORCE, events, clock)
        service.start()
        await settle(service)
        kind, message, data = events.items[0]
        assert kind == "guard_failed" and "unreadable" in message and "nvidia-smi -rac" in message
        assert service.reading().state == "armed"
        service.on_frame(frame(clock.t, 11.3))  # engages: writes a state file of its own
        await settle(service)
        assert path.with_name(path.name + ".unreadable").read_text() == text
        await asyncio.to_thread(service.close)


async def test_settings_left_behind_found_in_dry_run_are_not_promised_a_restore(tmp_path: Path,
                                                                                machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        await engaged_then_killed(tmp_path, events, clock)

        events2 = Events()
        second = make(tmp_path, GuardSection(enabled=True, mode="dry-run", rail_count=1, restore_after_s=30.0),
                      events2, clock)
        second.start()
        await settle(second)
        kind, message, data = events2.items[0]
        assert kind == "guard_engaged" and data["left_behind"] is True
        assert "does not restore them" in message and "restored after" not in message
        clock.t += 31
        second.on_frame(frame(clock.t, 11.9))
        await settle(second)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4  # dry-run writes nothing
        assert state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(second.close)


async def test_settings_the_gpus_refuse_are_reported_at_start(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", app_clocks_mhz=(1005, 877), power_limit_w=100.0,
                          gpus=(0, 5))
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, config, events, clock)
        service.start()
        await settle(service)
        [(kind, message, _)] = events.items
        assert kind == "guard_failed" and "does not fit" in message
        assert "gpus: 5 not on this node" in message and "[1005, 877]" in message and "100" in message
        events.items.clear()
        good = make(tmp_path, ENFORCE, events, clock)
        good.start()
        await settle(good)
        assert events.items == []
        await asyncio.to_thread(good.close)
        await asyncio.to_thread(service.close)


def gpu_frame(at: float, machine: FakeNvmlMachine) -> Frame:
    """A healthy-rail frame whose GPU readings are the fake GPUs' settings now."""
    base = frame(at, 11.9)
    gpus = tuple(GpuReading(index=g.index, uuid=None, name=None, serial=None, pci_bus_id=None, pci_bus_id_nvml=None,
                            pci_bus_id_xid=None, clock_app_mem_mhz=g.app_clock_mem_mhz,
                            clock_app_graphics_mhz=g.app_clock_graphics_mhz, power_limit_w=g.power_limit_mw / 1000)
                 for g in machine.gpus)
    collectors = {**base.collectors, "gpu": CollectorStatus("ok", True, duration_s=0.01, sampled_at=at)}
    return msgspec.structs.replace(base, collectors=collectors,
                                   readings=msgspec.structs.replace(base.readings, gpus=gpus))


async def test_settings_another_tool_changed_while_engaged_show_in_readings(tmp_path: Path,
                                                                           machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, ENFORCE, events, clock)
        service.start()
        before = gpu_frame(clock.t, machine)  # taken before the guard's write
        service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        service.on_frame(before)  # older than the write: shows the old clocks, changes nothing
        machine.gpus[0].power_limit_mw = 150_000
        hung = msgspec.structs.replace(gpu_frame(clock.t + 5, machine), collectors={
            "gpu": CollectorStatus("hung", False, sampled_at=clock.t + 5)})
        machine.gpus[0].power_limit_mw = 300_000
        service.on_frame(hung)  # a hung collector's readings: not taken up either
        settings = service.reading().settings
        assert [(s.app_clock_graphics_mhz, s.power_limit_w) for s in settings] == [(1005, 300.0)] * 4
        machine.gpus[2].app_clock_graphics_mhz = 1312  # nvidia-smi -rac by a job's prologue
        clock.t += 1
        service.on_frame(gpu_frame(clock.t, machine))
        await settle(service)
        assert [s.app_clock_graphics_mhz for s in service.reading().settings] == [1005, 1005, 1312, 1005]
        kind, message, data = events.items[-1]
        assert kind == "guard_failed" and data["changed_elsewhere"] is True and "gpu2 877/1312 MHz" in message
        clock.t += 1
        service.on_frame(gpu_frame(clock.t, machine))  # said once
        await settle(service)
        assert events.items[-1][1] == message and len(events.items) == 2
        clock.t += 31
        service.on_frame(gpu_frame(clock.t, machine))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert events.kinds()[-1] == "guard_restored"
        await asyncio.to_thread(service.close)


async def test_a_gpu_lost_while_capped_does_not_keep_the_others_capped(tmp_path: Path,
                                                                      machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, ENFORCE, events, clock)
        service.start()
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        machine.fail("gpu_lost", gpu=3)
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9, gpus=4, lost=(3,)))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus[:3]] == [1312] * 3
        kind, message, _ = events.items[-1]
        assert kind == "guard_failed" and message.startswith("guard: restored GPUs 0,1,2; restoring: GPU 3: ")
        assert "GPU 3: GPU 3" not in message and "lost" in message
        assert [s.index for s in service.reading().original] == [3]
        for _ in range(3):  # not tried again while it is off the bus
            clock.t += 61
            service.on_frame(frame(clock.t, 11.9, gpus=4, lost=(3,)))
            await settle(service)
        assert events.kinds().count("guard_failed") == 1
        await asyncio.to_thread(service.close)


async def test_a_driver_loaded_after_the_agent_started_lets_the_guard_act(tmp_path: Path,
                                                                         machine: FakeNvmlMachine) -> None:
    # At boot the agent may start before the nvidia module is loaded: not a reason to stay in dry-run.
    events, clock = Events(), Clock()
    machine.fail("driver_missing")
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, ENFORCE, events, clock)
        service.start()
        await settle(service)
        assert not service.reading().acting and "no NVIDIA driver" in str(service.reading().reason)
        machine.heal("driver_missing")
        clock.t += 61
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        assert service.reading().acting and events.kinds()[-1] == "guard_engaged"
        await asyncio.to_thread(service.close)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4


async def test_no_permission_is_not_asked_again(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    machine.no_permission = True
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, ENFORCE, events, clock)
        service.start()
        await settle(service)
        writes = machine.calls["nvmlDeviceSetApplicationsClocks"]
        for _ in range(3):
            clock.t += 61
            service.on_frame(frame(clock.t, 11.9, gpus=4))
            await settle(service)
        assert machine.calls["nvmlDeviceSetApplicationsClocks"] == writes
        await asyncio.to_thread(service.close)


async def test_a_sag_while_the_stopping_agent_restores_does_not_cap_again(tmp_path: Path,
                                                                         machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, call_timeout_s=30.0, gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, config, events, clock)
        service.start()
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        machine.fail("hang", symbols={"nvmlDeviceSetApplicationsClocks"})
        stopping = asyncio.create_task(asyncio.to_thread(service.close))
        for _ in range(int(DEADLINE_S / 0.01)):  # the stop began; its restore hangs in the driver
            if service.shared.closing:
                break
            await asyncio.sleep(0.01)
        clock.t += 1
        service.on_frame(frame(clock.t, 11.2, gpus=4))  # frames still flow during the stop
        assert service.reading().state == "armed"
        machine.heal("hang")
        await stopping
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert not state_file_path(tmp_path / "state").exists()
