"""One NVML poll: one hand-off, counters as fields, facts read rarely, refusals and lost GPUs."""

from __future__ import annotations

import msgspec
import pynvml
import pytest

from rigmon.hw.nvml import calls as nvml_calls
from rigmon.hw.nvml import FACTS_EVERY, PynvmlNvml
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from tests.hw.nvml_helpers import DEADLINE_S


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
