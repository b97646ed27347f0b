"""Fake NVML field values (nvmlDeviceGetFieldValues): each field answers from the GPU state its function reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rigmon.sim.nvml_abi import (
    ERROR_INVALID_ARGUMENT,
    ERROR_NOT_SUPPORTED,
    SUCCESS,
    VALUE_TYPE_UNSIGNED_INT,
    VALUE_TYPE_UNSIGNED_LONG_LONG,
    int_arg,
)
from rigmon.sim.nvml_machine import FakeGpu

if TYPE_CHECKING:
    from rigmon.sim.nvml import FakeNvmlLibrary

FI_DEV_POWER_INSTANT = 186
FI_DEV_NVLINK_LINK_COUNT = 91
#: NVML_FI_DEV_NVLINK_GET_STATE: one link's state (1 up, 0 down), the link in scopeId.
FI_DEV_NVLINK_GET_STATE = 165
#: Field ids answered from the same GPU state as the function each mirrors (nvml.h NVML_FI_DEV_*):
#: field id -> (that function's symbol, value type, value).
_FIELDS: dict[int, tuple[str, int, Callable[[FakeGpu], int]]] = {
    83: ("nvmlDeviceGetTotalEnergyConsumption", VALUE_TYPE_UNSIGNED_LONG_LONG, lambda g: int(g.energy_mj)),
    94: ("nvmlDeviceGetPcieReplayCounter", VALUE_TYPE_UNSIGNED_INT, lambda g: g.pcie_replay),
    3: ("nvmlDeviceGetTotalEccErrors", VALUE_TYPE_UNSIGNED_LONG_LONG, lambda g: g.ecc_count(True, False)),
    4: ("nvmlDeviceGetTotalEccErrors", VALUE_TYPE_UNSIGNED_LONG_LONG, lambda g: g.ecc_count(False, False)),
    5: ("nvmlDeviceGetTotalEccErrors", VALUE_TYPE_UNSIGNED_LONG_LONG, lambda g: g.ecc_count(True, True)),
    6: ("nvmlDeviceGetTotalEccErrors", VALUE_TYPE_UNSIGNED_LONG_LONG, lambda g: g.ecc_count(False, True)),
}
#: Per-link NVLink error counter fields: counter type (NVLINK_COUNTERS order) -> field id of each link 0-11.
_NVLINK_FIELDS: dict[int, tuple[int, ...]] = {
    0: (46, 47, 48, 49, 50, 51, 108, 109, 110, 111, 112, 113),  # DL_REPLAY
    1: (53, 54, 55, 56, 57, 58, 114, 115, 116, 117, 118, 119),  # DL_RECOVERY
    2: (32, 33, 34, 35, 36, 37, 96, 97, 98, 99, 100, 101),  # DL_CRC_FLIT
    3: (39, 40, 41, 42, 43, 44, 102, 103, 104, 105, 106, 107),  # DL_CRC_DATA
}
_NVLINK_FIELD_AT = {fid: (link, kind) for kind, ids in _NVLINK_FIELDS.items() for link, fid in enumerate(ids)}


def field_symbols(lib: FakeNvmlLibrary) -> dict[str, Callable[..., Any]]:
    """The field-value symbol for ``lib``'s symbol table."""
    s: dict[str, Callable[..., Any]] = {}

    def field_values(handle: Any, n: Any, values: Any) -> int:
        # A field mirroring a function answers from the same GPU state, and NOT_SUPPORTED
        # where that function would (the GPU's not_supported names, a driver lacking it).
        def fill(gpu: FakeGpu) -> int:
            machine = lib.machine()
            missing = machine.missing_symbols if machine is not None else set()
            array = values._obj
            filled = False
            for i in range(int_arg(n)):
                value = array[i]
                fid = int(value.fieldId)
                answer: tuple[int, int] | None = None
                if fid == FI_DEV_POWER_INSTANT and gpu.power_instant_supported:
                    answer = (VALUE_TYPE_UNSIGNED_INT, gpu.power_mw)
                elif fid == FI_DEV_NVLINK_LINK_COUNT and gpu.nvlink_count_field:
                    count = len(gpu.nvlink_active) if gpu.nvlink_count_answer is None else gpu.nvlink_count_answer
                    answer = (VALUE_TYPE_UNSIGNED_INT, count)
                elif fid == FI_DEV_NVLINK_GET_STATE:
                    # As nvmlDeviceGetNvLinkState answers for that link (scopeId), on drivers
                    # that know the field (those that know the link count).
                    link = int(value.scopeId)
                    symbol = "nvmlDeviceGetNvLinkState"
                    if not gpu.nvlink_count_field or symbol in gpu.not_supported or symbol in missing:
                        pass
                    elif link < len(gpu.nvlink_active):
                        answer = (VALUE_TYPE_UNSIGNED_INT, 1 if gpu.nvlink_active[link] else 0)
                    else:
                        value.nvmlReturn = ERROR_INVALID_ARGUMENT
                        continue
                elif fid in _FIELDS:
                    symbol, kind, getter = _FIELDS[fid]
                    if symbol not in gpu.not_supported and symbol not in missing:
                        answer = (kind, getter(gpu))
                elif fid in _NVLINK_FIELD_AT:
                    link, counter = _NVLINK_FIELD_AT[fid]
                    symbol = "nvmlDeviceGetNvLinkErrorCounter"
                    if (link < len(gpu.nvlink_active) and symbol not in gpu.not_supported
                            and symbol not in missing):
                        answer = (VALUE_TYPE_UNSIGNED_LONG_LONG, gpu.nvlink_counters.get((link, counter), 0))
                if answer is None:
                    value.nvmlReturn = ERROR_NOT_SUPPORTED
                    continue
                value.valueType = answer[0]
                if answer[0] == VALUE_TYPE_UNSIGNED_LONG_LONG:
                    value.value.ullVal = answer[1]
                else:
                    value.value.uiVal = answer[1]
                value.nvmlReturn = SUCCESS
                filled = True
            return SUCCESS if filled else ERROR_NOT_SUPPORTED

        return lib.device_call("nvmlDeviceGetFieldValues", handle, fill)

    s["nvmlDeviceGetFieldValues"] = field_values
    return s
