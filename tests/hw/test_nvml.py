"""NVML access: the fake library beneath the real pynvml, named failures, the watchdog and per-root binding."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import msgspec
import pynvml
import pytest

from rigmon.hw.nvml import calls as nvml_calls
from rigmon.hw.nvml import FACTS_EVERY, NvmlHung, NvmlUnavailable, PynvmlNvml, Watchdog, open_nvml
from rigmon.hw.root import HostRoot
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus

DEADLINE_S = 10.0


def _eventually(check: object, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``check()`` until it is true, failing after a bounded number of tries."""
    assert callable(check)
    end = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > end:
            pytest.fail("condition not reached before the deadline")
        time.sleep(0.02)


@pytest.fixture
def machine() -> FakeNvmlMachine:
    return FakeNvmlMachine(v100_sxm2_gpus(4))


# -- the fake at the library level: pynvml's own wrappers run ----------------------------


def test_pynvml_wrappers_read_the_fake(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            assert pynvml.nvmlDeviceGetCount() == 4
            handle = pynvml.nvmlDeviceGetHandleByIndex(2)
            assert pynvml.nvmlDeviceGetName(handle) == "Tesla V100-SXM2-16GB"
            assert pynvml.nvmlDeviceGetPciInfo(handle).busId == "00000000:1C:00.0"
            assert pynvml.nvmlDeviceGetPowerManagementLimit(handle) == 300_000
            assert pynvml.nvmlDeviceGetMemoryInfo(handle).total == 16_945_512_448
            assert pynvml.nvmlSystemGetDriverVersion() == "535.183.01"
        finally:
            pynvml.nvmlShutdown()


def test_named_failure_not_supported(machine: FakeNvmlMachine) -> None:
    machine.fail("not_supported", 1, ["nvmlDeviceGetTotalEnergyConsumption"])
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            h1, h0 = pynvml.nvmlDeviceGetHandleByIndex(1), pynvml.nvmlDeviceGetHandleByIndex(0)
            with pytest.raises(pynvml.NVMLError_NotSupported):
                pynvml.nvmlDeviceGetTotalEnergyConsumption(h1)
            assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h0) > 0
            # The V100-SXM2 profile is passively cooled: no fan on any GPU.
            with pytest.raises(pynvml.NVMLError_NotSupported):
                pynvml.nvmlDeviceGetFanSpeed(h0)
        finally:
            pynvml.nvmlShutdown()


def test_named_failure_gpu_lost_hits_only_that_gpu(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            h3 = pynvml.nvmlDeviceGetHandleByIndex(3)
            machine.fail("gpu_lost", 3)
            with pytest.raises(pynvml.NVMLError_GpuIsLost):
                pynvml.nvmlDeviceGetPowerUsage(h3)
            with pytest.raises(pynvml.NVMLError_GpuIsLost):
                pynvml.nvmlDeviceGetHandleByIndex(3)
            assert pynvml.nvmlDeviceGetPowerUsage(pynvml.nvmlDeviceGetHandleByIndex(0)) == 42_000
            assert pynvml.nvmlDeviceGetCount() == 4  # the driver still counts it
        finally:
            pynvml.nvmlShutdown()


def test_named_failure_driver_missing(machine: FakeNvmlMachine) -> None:
    machine.fail("driver_missing")
    with serving(None, machine):
        with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
            pynvml.nvmlInit()


def test_named_failure_hang_blocks_until_healed(machine: FakeNvmlMachine) -> None:
    results: list[int] = []
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            machine.fail("hang")
            worker = threading.Thread(target=lambda: results.append(pynvml.nvmlDeviceGetCount()), daemon=True)
            worker.start()
            worker.join(0.2)
            assert worker.is_alive() and results == []
            machine.heal("hang")
            worker.join(DEADLINE_S)
            assert results == [4]
        finally:
            pynvml.nvmlShutdown()


def test_missing_symbol_is_function_not_found() -> None:
    machine = FakeNvmlMachine(v100_sxm2_gpus(1), missing_symbols=["nvmlDeviceGetCurrentClocksEventReasons"])
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            with pytest.raises(pynvml.NVMLError_FunctionNotFound):
                pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
        finally:
            pynvml.nvmlShutdown()


def test_power_samples_newer_than_timestamp(machine: FakeNvmlMachine) -> None:
    machine.gpus[0].power_samples.extend([(100, 250_000), (200, 320_000), (300, 240_000)])
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            _, samples = pynvml.nvmlDeviceGetSamples(handle, pynvml.NVML_TOTAL_POWER_SAMPLES, 100)
            assert [(s.timeStamp, s.sampleValue.uiVal) for s in samples] == [(200, 320_000), (300, 240_000)]
            with pytest.raises(pynvml.NVMLError_NotFound):
                pynvml.nvmlDeviceGetSamples(handle, pynvml.NVML_TOTAL_POWER_SAMPLES, 300)
        finally:
            pynvml.nvmlShutdown()


# -- hw.nvml: one error gate per field, lazy init, watchdog -------------------------------


def test_read_device_maps_field_errors_to_none(machine: FakeNvmlMachine) -> None:
    machine.fail("not_supported", 0)
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            data = nvml.read_device(0, 0)
            other = nvml.read_device(1, 0)
        finally:
            nvml.close()
    assert not data.lost and data.name == "Tesla V100-SXM2-16GB"
    assert data.energy_mj is None and data.serial is None and data.nvlinks == ()
    assert data.fan_pct is None and other.fan_pct is None
    assert other.energy_mj is not None and len(other.nvlinks) == 6


def test_read_device_reports_lost(machine: FakeNvmlMachine) -> None:
    machine.fail("gpu_lost", 3)
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            assert nvml.device_count() == 4
            lost = nvml.read_device(3, 0)
        finally:
            nvml.close()
    assert lost.lost and lost.power_mw is None and lost.uuid is None


def test_driver_missing_is_unavailable(machine: FakeNvmlMachine) -> None:
    machine.fail("driver_missing")
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            with pytest.raises(NvmlUnavailable):
                nvml.device_count()
        finally:
            nvml.close()


def test_event_reasons_fall_back_to_throttle_reasons() -> None:
    machine = FakeNvmlMachine(v100_sxm2_gpus(1), missing_symbols=["nvmlDeviceGetCurrentClocksEventReasons"])
    machine.gpus[0].clock_reasons = 0x4
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            assert nvml.read_device(0, 0).clock_reasons == 0x4
        finally:
            nvml.close()


def test_hang_marks_hung_and_recovers(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=0.2)
        try:
            assert nvml.device_count() == 4
            machine.fail("hang")
            with pytest.raises(NvmlHung):
                nvml.device_count()
            # Still stuck: fails at once rather than queueing behind the stuck call.
            with pytest.raises(NvmlHung, match="has not returned"):
                nvml.read_device(0, 0)
            machine.heal("hang")

            def answers() -> bool:
                try:
                    return nvml.device_count() == 4
                except NvmlHung:
                    return False

            _eventually(answers)
        finally:
            nvml.close()


def test_watchdog_hang_does_not_stall_another_watchdog() -> None:
    release = threading.Event()
    stuck, free = Watchdog("stuck", None), Watchdog("free", None)
    try:
        with pytest.raises(NvmlHung):
            stuck.run(release.wait, 0.05)
        assert stuck.stuck
        assert free.run(lambda: 7, DEADLINE_S) == 7
        release.set()
        _eventually(lambda: not stuck.stuck)
        assert stuck.run(lambda: 8, DEADLINE_S) == 8
    finally:
        release.set()
        stuck.close()
        free.close()


def test_xid_events_through_the_event_set(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            assert nvml.wait_xid(0.01) == []  # registers the GPUs
            machine.post_xid(2, 48)
            hits = nvml.wait_xid(1.0)
        finally:
            nvml.close()
    assert [(h.index, h.xid, h.pci_bus_id) for h in hits] == [(2, 48, "00000000:1C:00.0")]
    assert hits[0].uuid == machine.gpus[2].uuid


def test_the_poll_and_the_xid_thread_init_nvml_once(machine: FakeNvmlMachine, monkeypatch: pytest.MonkeyPatch) -> None:
    # Both threads' first use inits NVML; a slow nvmlInit makes them overlap every time.
    inits: list[str] = []
    real_init = pynvml.nvmlInit

    def slow_init() -> None:
        inits.append(threading.current_thread().name)
        time.sleep(0.2)
        real_init()

    monkeypatch.setattr(pynvml, "nvmlInit", slow_init)
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            waiter = threading.Thread(target=lambda: nvml.wait_xid(0.01), name="xid-waiter")
            waiter.start()
            assert nvml.device_count() == 4
            waiter.join(DEADLINE_S)
        finally:
            nvml.close()
    assert len(inits) == 1, inits  # one nvmlInit for the one nvmlShutdown at close


def test_xid_wait_runs_on_the_waiting_thread_and_close_frees_the_set(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        hits: list[object] = []
        waiter = threading.Thread(target=lambda: hits.extend(nvml.wait_xid(DEADLINE_S)), name="xid-waiter")
        try:
            assert nvml.wait_xid(0.01) == []  # registers the GPUs
            waiter.start()
            machine.post_xid(1, 79)
            waiter.join(DEADLINE_S)
            # No thread of its own: the wait ran on the thread that asked (no hand-off twice a second).
            assert not [t.name for t in threading.enumerate() if t.name.startswith("rigmon-nvml-events")]
            assert list(machine.event_sets().values()) == [frozenset(range(4))]  # one set, every GPU
        finally:
            nvml.close()
        assert machine.event_sets() == {}  # close freed the event set
        assert nvml.wait_xid(0.01) == []  # closed: no new registration
        assert machine.event_sets() == {}
    assert [(getattr(h, "index"), getattr(h, "xid")) for h in hits] == [(1, 79)]


def test_close_leaves_the_event_set_of_a_wait_stuck_in_the_driver(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=0.5)
        waiter = threading.Thread(target=lambda: nvml.wait_xid(0.05), daemon=True)
        try:
            assert nvml.wait_xid(0.01) == []
            machine.fail("hang")
            waiter.start()
            _eventually(lambda: nvml.xid_waiters == 1)
            nvml.close()  # returns although the wait and the poll thread's shutdown are stuck
            assert machine.event_sets() != {}  # not freed under the stuck wait
        finally:
            machine.heal("hang")
            waiter.join(DEADLINE_S)


def test_each_root_gets_its_own_machine(tmp_path: Path) -> None:
    node_a, node_b, node_c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for d in (node_a, node_b, node_c):
        d.mkdir()
    two = FakeNvmlMachine(v100_sxm2_gpus(2, first_bus=0x3B))
    with serving(node_a, FakeNvmlMachine(v100_sxm2_gpus(4))), serving(node_b, two):
        nvmls = [open_nvml(HostRoot(d), timeout_s=DEADLINE_S) for d in (node_a, node_b, node_c)]
        try:
            assert nvmls[0].device_count() == 4
            assert nvmls[1].device_count() == 2
            assert nvmls[1].read_device(0, 0).pci_bus_id == "00000000:3B:00.0"
            with pytest.raises(NvmlUnavailable):
                nvmls[2].device_count()  # a node without NVIDIA GPUs
        finally:
            for nvml in nvmls:
                nvml.close()


# -- one poll: one hand-off, counters as fields, facts read rarely ------------------------


def test_read_devices_is_one_hand_off_for_every_gpu(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        runs: list[float] = []
        run = nvml._poll.run

        def counted(fn: object, timeout_s: float) -> object:
            runs.append(timeout_s)
            return run(fn, timeout_s)  # type: ignore[arg-type]

        nvml._poll.run = counted  # type: ignore[method-assign,assignment]
        try:
            datas = nvml.read_devices({0: 0})
            datas = nvml.read_devices({})
        finally:
            nvml.close()
    assert [d.index for d in datas] == [0, 1, 2, 3]
    assert [d.pci_bus_id for d in datas] == [g.bus_id for g in machine.gpus]
    # NVML's first init in a hand-off of its own (a slow init overruns alone), then the count and
    # four GPUs in one hand-off each time, with a budget per GPU.
    assert runs[:3] == [DEADLINE_S, DEADLINE_S, DEADLINE_S * 4]


def test_counters_come_in_one_field_call_with_the_values_of_their_own_functions(machine: FakeNvmlMachine) -> None:
    gpu = machine.gpus[1]
    gpu.nvlink_counters.update({(0, 0): 7, (2, 1): 3, (5, 2): 11, (5, 3): 2})
    gpu.ecc_corrected, gpu.ecc_uncorrected, gpu.pcie_replay = 12, 1, 40
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            batched = nvml.read_devices({})[1]
        finally:
            nvml.close()
    assert machine.calls["nvmlDeviceGetNvLinkErrorCounter"] == 0
    assert machine.calls["nvmlDeviceGetTotalEccErrors"] == 0
    assert machine.calls["nvmlDeviceGetTotalEnergyConsumption"] == 0
    # The same GPU read through each value's own function (the driver refuses field values).
    machine.fail("not_supported", 1, ["nvmlDeviceGetFieldValues"])
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            single = nvml.read_devices({})[1]
        finally:
            nvml.close()
    assert machine.calls["nvmlDeviceGetNvLinkErrorCounter"] == 6 * 4
    assert single.power_instant_mw is None and batched.power_instant_mw == gpu.power_mw
    assert batched == msgspec.structs.replace(single, power_instant_mw=gpu.power_mw)
    assert batched.nvlinks[5].crc_flit == 11 and batched.nvlinks[2].recovery == 3
    assert (batched.ecc_corrected, batched.ecc_uncorrected, batched.pcie_replay) == (12, 1, 40)
    assert batched.energy_mj == int(gpu.energy_mj)


def test_a_refused_field_falls_back_to_its_function(machine: FakeNvmlMachine) -> None:
    machine.fail("not_supported", 0, ["nvmlDeviceGetTotalEccErrors"])
    machine.gpus[2].nvlink_counters[(1, 0)] = 9
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            first = nvml.read_devices({})
            second = nvml.read_devices({})
        finally:
            nvml.close()
    assert first[0].ecc_corrected is None and first[0].ecc_uncorrected is None
    assert second[0].ecc_corrected is None and first[1].ecc_corrected == 0
    assert second[2].nvlinks[1].replay == 9
    # GPU 0's ECC is asked as a field once, then through its own function once (refused too:
    # remembered, like any refused function, until the facts are read again).
    assert machine.calls["nvmlDeviceGetTotalEccErrors"] == 2


def test_a_function_the_driver_refuses_is_asked_again_only_with_the_facts(machine: FakeNvmlMachine) -> None:
    # The SXM2 boards have no fan: NOT_SUPPORTED on every poll, remembered until the next refresh.
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            for _ in range(3):
                datas = nvml.read_devices({})
            assert machine.calls["nvmlDeviceGetFanSpeed"] == 4
            assert [d.fan_pct for d in datas] == [None] * 4
            for _ in range(FACTS_EVERY):
                nvml.read_devices({})
            assert machine.calls["nvmlDeviceGetFanSpeed"] == 2 * 4
            # A fan that answers after a refresh (another driver) is read from then on.
            for gpu in machine.gpus:
                gpu.fan_pct = 40
            for _ in range(FACTS_EVERY + 1):
                datas = nvml.read_devices({})
            assert [d.fan_pct for d in datas] == [40] * 4
        finally:
            nvml.close()


def test_facts_are_read_once_every_facts_every_polls(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            for _ in range(3):
                datas = nvml.read_devices({})
            assert machine.calls["nvmlDeviceGetName"] == 4
            assert machine.calls["nvmlDeviceGetPowerUsage"] == 3 * 4
            assert [d.name for d in datas] == ["Tesla V100-SXM2-16GB"] * 4
            assert datas[0].uuid == machine.gpus[0].uuid and datas[0].max_clock_sm_mhz == 1530
            for _ in range(FACTS_EVERY):
                nvml.read_devices({})
            assert machine.calls["nvmlDeviceGetName"] == 2 * 4
            # A GPU that could not be reached gets its facts read again when it answers.
            machine.fail("gpu_lost", 3)
            assert nvml.read_devices({})[3].lost
            machine.heal("gpu_lost", 3)
            before = machine.calls["nvmlDeviceGetName"]
            assert nvml.read_devices({})[3].name == "Tesla V100-SXM2-16GB"
            assert machine.calls["nvmlDeviceGetName"] == before + 1
        finally:
            nvml.close()


@pytest.mark.parametrize(
    ("value_type", "member", "value"),
    [(pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal", 4_000_000_000),
     (pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal", 1 << 60),
     (pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG, "sllVal", -(1 << 40)),
     (pynvml.NVML_VALUE_TYPE_SIGNED_INT, "siVal", -5),
     (pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT, "usVal", 65_000),
     (pynvml.NVML_VALUE_TYPE_DOUBLE, "dVal", 1.5)],
)
def test_field_values_decoded_from_the_array_bytes_as_by_their_members(value_type: int, member: str,
                                                                       value: float) -> None:
    values = (nvml_calls.FieldValue * 2)()
    values[0].fieldId, values[0].valueType = 83, value_type
    setattr(values[0].value, member, value)
    (_, status, raw), _ = nvml_calls.FIELD_LAYOUT.iter_unpack(bytes(values))
    expected = None if value_type == pynvml.NVML_VALUE_TYPE_DOUBLE else value
    assert nvml_calls.union_int(value_type, raw) == expected == nvml_calls.field_value(values[0])


# -- the poll plan: handles kept, NVLink state as a field, samples in one call ---------------


def test_a_poll_asks_no_handle_and_the_nvlink_states_in_the_field_call(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            nvml.read_devices({})
            handles = machine.calls["nvmlDeviceGetHandleByIndex_v2"]
            for _ in range(3):
                datas = nvml.read_devices({})
            assert machine.calls["nvmlDeviceGetHandleByIndex_v2"] == handles  # kept with the plan
            assert machine.calls["nvmlDeviceGetNvLinkState"] == 0
            assert [link.active for link in datas[2].nvlinks] == [True] * 6
            # A link that goes down (and a counter that moves) shows on the next poll.
            machine.gpus[2].nvlink_active[4] = False
            machine.gpus[2].nvlink_counters[(4, 2)] = 5
            after = nvml.read_devices({})[2]
        finally:
            nvml.close()
    assert [link.active for link in after.nvlinks] == [True] * 4 + [False, True]
    assert after.nvlinks[4].crc_flit == 5 and datas[2].nvlinks[4].crc_flit == 0


def test_nvlink_states_of_a_driver_without_the_field_come_from_their_function() -> None:
    gpus = v100_sxm2_gpus(2)
    for gpu in gpus:
        gpu.nvlink_count_field = False  # an old driver: neither the link count nor the state field
    gpus[1].nvlink_active[1] = False
    machine = FakeNvmlMachine(gpus)
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            datas = nvml.read_devices({})
        finally:
            nvml.close()
    assert [link.active for link in datas[1].nvlinks] == [True, False, True, True, True, True]
    assert machine.calls["nvmlDeviceGetNvLinkState"] == 2 * 7  # probed until refused


def test_power_samples_come_in_one_call_and_a_full_buffer_is_asked_again(machine: FakeNvmlMachine) -> None:
    from collections import deque

    from rigmon.hw.nvml import POWER_SAMPLES_PER_CALL

    many = [(1_000 + i, 200_000 + i) for i in range(POWER_SAMPLES_PER_CALL + 40)]
    machine.gpus[0].power_samples = deque(many, maxlen=len(many))
    machine.gpus[1].power_samples.extend([(10, 250_000), (20, 320_000)])
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            datas = nvml.read_devices({1: 10})
        finally:
            nvml.close()
    assert list(zip(datas[0].power_samples_us, datas[0].power_samples_mw, strict=True)) == many
    assert (datas[1].power_samples_us, datas[1].power_samples_mw) == ((20,), (320_000,))
    assert (datas[2].power_samples_us, datas[2].power_samples_mw) == ((), ())
    # GPU 0: two calls (the first filled the buffer); GPUs 1-3: one each.
    assert machine.calls["nvmlDeviceGetSamples"] == 2 + 3


def test_a_counter_that_moves_is_read_on_every_poll(machine: FakeNvmlMachine) -> None:
    # Every field answers with the same types from the second poll on: the fast decoding path.
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            seen = []
            for replay in (0, 3, 3, 9):
                machine.gpus[3].pcie_replay = replay
                machine.gpus[3].ecc_corrected = replay * 2
                data = nvml.read_devices({})[3]
                seen.append((data.pcie_replay, data.ecc_corrected))
        finally:
            nvml.close()
    assert seen == [(0, 0), (3, 6), (3, 6), (9, 18)]


def test_a_gpu_lost_after_its_plan_was_made_is_reported_lost(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            nvml.read_devices({})
            machine.fail("gpu_lost", 1)
            lost = nvml.read_devices({})[1]
            machine.heal("gpu_lost", 1)
            back = nvml.read_devices({})[1]
        finally:
            nvml.close()
    assert lost.lost and lost.power_mw is None and lost.uuid == machine.gpus[1].uuid
    assert not back.lost and back.power_mw is not None


# -- one binding per machine -----------------------------------------------------------------


def test_the_gpu_and_process_seams_of_one_root_share_one_binding(tmp_path: Path, machine: FakeNvmlMachine,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from rigmon.hw.nvml import open_nvml_processes

    inits: list[str] = []
    real_init = pynvml.nvmlInit

    def counted_init() -> None:
        inits.append(threading.current_thread().name)
        real_init()

    monkeypatch.setattr(pynvml, "nvmlInit", counted_init)
    with serving(tmp_path, machine):
        gpu = open_nvml(HostRoot(tmp_path), timeout_s=DEADLINE_S)
        procs = open_nvml_processes(HostRoot(tmp_path), timeout_s=DEADLINE_S)
        try:
            assert len(gpu.read_devices({})) == 4
            uuids = machine.calls["nvmlDeviceGetUUID"]
            assert [p.uuid for p in procs.read_all_processes({})] == [g.uuid for g in machine.gpus]
            # The process poll takes handle and UUID from the GPU poll's plans.
            assert machine.calls["nvmlDeviceGetUUID"] == uuids
            pollers = [t for t in threading.enumerate() if t.name.startswith("rigmon-nvml-poll")]
            assert len(pollers) == 1 and len(inits) == 1
            gpu.close()
            gpu.close()  # a second close of one user changes nothing
            assert len(procs.read_all_processes({})) == 4  # the other user still reads
            assert machine.init_count == 1
        finally:
            procs.close()
        assert machine.init_count == 0  # the last user's close shut NVML down


def test_process_lists_are_read_into_kept_arrays_that_grow(machine: FakeNvmlMachine) -> None:
    from rigmon.hw.nvml.processes import FIRST_ROOM
    from rigmon.sim.nvml import FakeGpuProcess

    many = [FakeGpuProcess(pid=1000 + i, used_bytes=(i + 1) << 20) for i in range(FIRST_ROOM + 4)]
    machine.gpus[0].processes = [*many, FakeGpuProcess(pid=77, used_bytes=None, kind="graphics"),
                                 FakeGpuProcess(pid=1000, used_bytes=5 << 20, kind="graphics")]
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            first = nvml.read_all_processes({})
            calls = machine.calls["nvmlDeviceGetComputeRunningProcesses_v3"]
            second = nvml.read_all_processes({})
        finally:
            nvml.close()
    # GPU 0: the first array was too small (asked again, grown); GPUs 1-3 answer an empty list at once.
    assert calls == 2 + 3
    assert machine.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == calls + 4  # grown array kept
    assert first == second
    procs = {p.pid: p for p in first[0].processes}
    assert len(procs) == FIRST_ROOM + 5 and first[0].listed and not first[0].lost
    assert procs[77].used_bytes is None and procs[77].kind == "graphics"
    assert procs[1000].kind == "compute" and procs[1000].used_bytes == 1 << 20  # in both lists: compute
    assert procs[1000 + FIRST_ROOM + 3].used_bytes == (FIRST_ROOM + 4) << 20
    assert first[1].listed and first[1].processes == ()


def test_watchdog_thread_ends_on_close_and_a_closed_watchdog_runs_nothing() -> None:
    watchdog = Watchdog("closing", None)
    assert watchdog.run(lambda: threading.current_thread().name, DEADLINE_S) == "rigmon-nvml-closing_0"
    assert watchdog.run(lambda: threading.current_thread().daemon, DEADLINE_S)
    with pytest.raises(ZeroDivisionError):
        watchdog.run(lambda: 1 // 0, DEADLINE_S)  # the call's own error reaches the caller
    watchdog.close()
    _eventually(lambda: not [t for t in threading.enumerate() if t.name == "rigmon-nvml-closing_0"])
    with pytest.raises(RuntimeError):
        watchdog.run(lambda: 1, DEADLINE_S)


def test_a_stuck_watchdog_thread_ends_when_its_call_returns_after_close() -> None:
    release = threading.Event()
    watchdog = Watchdog("stuck-close", None)
    try:
        with pytest.raises(NvmlHung):
            watchdog.run(release.wait, 0.05)
        watchdog.close()  # returns at once
        assert [t for t in threading.enumerate() if t.name == "rigmon-nvml-stuck-close_0"]
    finally:
        release.set()
    _eventually(lambda: not [t for t in threading.enumerate() if t.name == "rigmon-nvml-stuck-close_0"])


def test_a_gpu_that_answers_nothing_gets_its_handle_read_again_on_the_next_poll(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            nvml.read_devices({})
            handles = machine.calls["nvmlDeviceGetHandleByIndex_v2"]
            # Every per-poll function refused on GPU 2: nothing answered.
            from rigmon.hw.nvml.plan import SOURCES

            machine.fail("not_supported", 2, [call[0] for source in SOURCES for call in source.calls]
                         + ["nvmlDeviceGetFieldValues", "nvmlDeviceGetSamples", "nvmlDeviceGetNvLinkState",
                            "nvmlDeviceGetNvLinkErrorCounter"])
            empty = nvml.read_devices({})[2]
            nvml.read_devices({})
        finally:
            nvml.close()
    assert empty.power_mw is None and not empty.lost
    assert machine.calls["nvmlDeviceGetHandleByIndex_v2"] == handles + 1  # GPU 2's, on the next poll


def test_an_r470_driver_s_processes_are_listed_through_v2() -> None:
    """R470-era drivers have no ``_v3`` process lists: the node listed no process at all, and
    `rigmon check`'s busy-GPU finding and the training view were blind on it."""
    from rigmon.sim.nvml import FakeGpuProcess

    machine = FakeNvmlMachine(v100_sxm2_gpus(1), driver_version="470.256.02", missing_symbols=[
        "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3"])
    machine.gpus[0].processes = [FakeGpuProcess(pid=4242, used_bytes=1 << 30),
                                 FakeGpuProcess(pid=77, used_bytes=None, kind="graphics")]
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            first = nvml.read_all_processes({})
            second = nvml.read_all_processes({})
        finally:
            nvml.close()
    assert first == second and first[0].listed
    assert {(p.pid, p.used_bytes, p.kind) for p in first[0].processes} == {(4242, 1 << 30, "compute"),
                                                                           (77, None, "graphics")}
    assert machine.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 2
