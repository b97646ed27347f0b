"""What the poll asks each GPU: every per-poll value's sources (a field and/or functions) and a GPU's
`Plan` built from them, with its field-values array and call buffers allocated once.

Each per-poll value has a `Source`: the field that carries it (``nvmlDeviceGetFieldValues``, one
call per GPU for all of them) and the functions that give it, in order of preference. A GPU's
`Plan` is built from the sources when its facts are read (every `FACTS_EVERY` polls): the fields
to ask, and a call for every value without a field, or whose field the driver refused. The reads
themselves, and what a refusal does to the plan, are `rigmon.hw.nvml.poll`.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pynvml

from rigmon.hw.nvml.calls import FieldValue, Memory, Sample, Utilization, Violation, symbol
from rigmon.hw.nvml.facts import FACTS_EVERY, GpuFacts
from rigmon.hw.nvml.records import NvLinkData

#: Power samples asked in one call. NVML fills at most this many (the oldest first) and says how
#: many; a full buffer is asked again for the samples after its newest.
POWER_SAMPLES_PER_CALL = 128
#: Field ids (nvml.h NVML_FI_DEV_*): instantaneous power (mW; newer drivers only), total energy (mJ),
#: PCIe replay counter, volatile ECC single/double-bit totals, and one NVLink's state (scopeId = link).
FI_POWER_INSTANT = 186
FI_ENERGY = 83
FI_PCIE_REPLAY = 94
FI_ECC_SBE_VOLATILE = 3
FI_ECC_DBE_VOLATILE = 4
FI_NVLINK_STATE = 165
#: Per-link NVLink error counter fields, links 0-5 then 6-11, by counter (nvml.h
#: NVML_FI_DEV_NVLINK_{REPLAY,RECOVERY,CRC_FLIT,CRC_DATA}_ERROR_COUNT_L*). Links past 11 have none.
FI_NVLINK_REPLAY = (46, 47, 48, 49, 50, 51, 108, 109, 110, 111, 112, 113)
FI_NVLINK_RECOVERY = (53, 54, 55, 56, 57, 58, 114, 115, 116, 117, 118, 119)
FI_NVLINK_CRC_FLIT = (32, 33, 34, 35, 36, 37, 96, 97, 98, 99, 100, 101)
FI_NVLINK_CRC_DATA = (39, 40, 41, 42, 43, 44, 102, 103, 104, 105, 106, 107)

_U = ctypes.c_uint
_ULL = ctypes.c_ulonglong
#: The value types of nearly every field and sample: unsigned int and unsigned long long.
VT_UINT = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
VT_ULL = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
#: Bits of the union each unsigned value type uses (a field array whose every value has one of
#: these types is decoded without Python per field).
UNSIGNED_MASK = {VT_UINT: 0xFFFFFFFF, VT_ULL: 0xFFFFFFFFFFFFFFFF,
                 pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: 0xFFFFFFFFFFFFFFFF,
                 pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: 0xFFFF}
#: A function giving a value: its symbol, the arguments between the handle and the output, the output type.
_Call = tuple[str, tuple[int, ...], type]


@dataclass(frozen=True, slots=True)
class Source:
    """Where one per-poll value comes from: a field ``(field id, scope id)`` and/or functions."""

    name: object
    field: tuple[int, int] | None
    calls: tuple[_Call, ...]


def _fn(symbol_name: str, *args: int, out: type = _U) -> _Call:
    return (symbol_name, args, out)


SOURCES: tuple[Source, ...] = (
    Source("power_mw", None, (_fn("nvmlDeviceGetPowerUsage"),)),
    Source("power_instant_mw", (FI_POWER_INSTANT, 0), ()),
    Source("energy_mj", (FI_ENERGY, 0), (_fn("nvmlDeviceGetTotalEnergyConsumption", out=_ULL),)),
    Source("power_limit_mw", None, (_fn("nvmlDeviceGetPowerManagementLimit"),)),
    Source("enforced_limit_mw", None, (_fn("nvmlDeviceGetEnforcedPowerLimit"),)),
    Source("clock_sm_mhz", None, (_fn("nvmlDeviceGetClockInfo", pynvml.NVML_CLOCK_SM),)),
    Source("clock_mem_mhz", None, (_fn("nvmlDeviceGetClockInfo", pynvml.NVML_CLOCK_MEM),)),
    Source("clock_graphics_mhz", None, (_fn("nvmlDeviceGetClockInfo", pynvml.NVML_CLOCK_GRAPHICS),)),
    Source("app_clock_graphics_mhz", None, (_fn("nvmlDeviceGetApplicationsClock", pynvml.NVML_CLOCK_GRAPHICS),)),
    Source("app_clock_mem_mhz", None, (_fn("nvmlDeviceGetApplicationsClock", pynvml.NVML_CLOCK_MEM),)),
    # The event reasons are the throttle reasons renamed (R535); older drivers have only the latter.
    Source("clock_reasons", None, (_fn("nvmlDeviceGetCurrentClocksEventReasons", out=_ULL),
                                    _fn("nvmlDeviceGetCurrentClocksThrottleReasons", out=_ULL))),
    Source("violation_power", None, (_fn("nvmlDeviceGetViolationStatus", pynvml.NVML_PERF_POLICY_POWER,
                                          out=Violation),)),
    Source("violation_thermal", None, (_fn("nvmlDeviceGetViolationStatus", pynvml.NVML_PERF_POLICY_THERMAL,
                                            out=Violation),)),
    Source("temp_c", None, (_fn("nvmlDeviceGetTemperature", pynvml.NVML_TEMPERATURE_GPU),)),
    Source("fan_pct", None, (_fn("nvmlDeviceGetFanSpeed"),)),
    Source("util", None, (_fn("nvmlDeviceGetUtilizationRates", out=Utilization),)),
    Source("memory", None, (_fn("nvmlDeviceGetMemoryInfo", out=Memory),)),
    Source("pstate", None, (_fn("nvmlDeviceGetPerformanceState"),)),
    Source("pcie_gen", None, (_fn("nvmlDeviceGetCurrPcieLinkGeneration"),)),
    Source("pcie_width", None, (_fn("nvmlDeviceGetCurrPcieLinkWidth"),)),
    Source("pcie_replay", (FI_PCIE_REPLAY, 0), (_fn("nvmlDeviceGetPcieReplayCounter"),)),
    Source("ecc_corrected", (FI_ECC_SBE_VOLATILE, 0),
            (_fn("nvmlDeviceGetTotalEccErrors", pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC,
                 out=_ULL),)),
    Source("ecc_uncorrected", (FI_ECC_DBE_VOLATILE, 0),
            (_fn("nvmlDeviceGetTotalEccErrors", pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC,
                 out=_ULL),)),
)
#: NVLink error counters: (kind in NvLinkData order, counter enum, field table).
NVLINK_COUNTERS = (
    ("replay", pynvml.NVML_NVLINK_ERROR_DL_REPLAY, FI_NVLINK_REPLAY),
    ("recovery", pynvml.NVML_NVLINK_ERROR_DL_RECOVERY, FI_NVLINK_RECOVERY),
    ("crc_flit", pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT, FI_NVLINK_CRC_FLIT),
    ("crc_data", pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA, FI_NVLINK_CRC_DATA),
)


def link_sources(count: int) -> tuple[Source, ...]:
    sources: list[Source] = []
    for link in range(count):
        sources.append(Source(("nvl", link, "state"), (FI_NVLINK_STATE, link),
                               (_fn("nvmlDeviceGetNvLinkState", link),)))
        for kind, counter, table in NVLINK_COUNTERS:
            field = (table[link], 0) if link < len(table) else None
            sources.append(Source(("nvl", link, kind), field,
                                   (_fn("nvmlDeviceGetNvLinkErrorCounter", link, counter, out=_ULL),)))
    return tuple(sources)


class Plan:
    """One GPU's per-poll reads: handle, facts, the field-values array and the direct calls.

    Only the poll watchdog's thread touches it.
    """

    __slots__ = ("handle", "facts", "sources", "unsupported", "refused", "polls_left",
                 "field_keys", "field_names", "fields", "fields_ref", "n_fields", "fields_fn", "fields_layout",
                 "field_types", "field_masks", "calls", "samples_fn", "samples", "value_type", "value_type_ref",
                 "count", "count_ref", "link_names", "link_values", "links")

    def __init__(self, handle: Any, facts: GpuFacts) -> None:
        self.handle = handle
        self.facts = facts
        self.sources = SOURCES + link_sources(facts.nvlink_count or 0)
        #: Fields the driver refused, and functions (symbol, arguments) it refused.
        self.unsupported: set[tuple[int, int]] = set()
        self.refused: set[tuple[str, tuple[int, ...]]] = set()
        self.polls_left = FACTS_EVERY
        self.samples = (Sample * POWER_SAMPLES_PER_CALL)()
        self.value_type = ctypes.c_uint()
        self.value_type_ref = ctypes.byref(self.value_type)
        self.count = ctypes.c_uint()
        self.count_ref = ctypes.byref(self.count)
        self.build()

    def build(self) -> None:
        """(Re)build the field array and the calls from the sources, leaving out what was refused."""
        keys: list[tuple[int, int]] = []
        names: list[object] = []
        calls: list[tuple[object, Callable[..., int], tuple[Any, ...], Any, bool, tuple[str, tuple[int, ...]]]] = []
        for source in self.sources:
            if source.field is not None and source.field not in self.unsupported:
                keys.append(source.field)
                names.append(source.name)
                continue
            for symbol_name, args, out_type in source.calls:
                key = (symbol_name, args)
                fn = None if key in self.refused else symbol(symbol_name)
                if fn is None:
                    self.refused.add(key)
                    continue
                out = out_type()
                calls.append((source.name, fn, (self.handle, *args, ctypes.byref(out)), out,
                              out_type in (_U, _ULL), key))
                break
        self.field_keys = tuple(keys)
        self.field_names = tuple(names)
        self.fields = (FieldValue * max(1, len(keys)))()
        for value, (field_id, scope_id) in zip(self.fields, keys):
            value.fieldId = field_id
            value.scopeId = scope_id
        self.fields_ref = ctypes.byref(self.fields)
        self.n_fields = ctypes.c_int32(len(keys))
        self.fields_fn = None if ("nvmlDeviceGetFieldValues", ()) in self.refused else symbol("nvmlDeviceGetFieldValues")
        self.samples_fn = None if ("nvmlDeviceGetSamples", ()) in self.refused else symbol("nvmlDeviceGetSamples")
        #: The whole array as one struct (value type, status, value union per field), and the value
        #: types of the last poll whose every field answered with an unsigned integer (with their masks).
        self.fields_layout = struct.Struct("=" + "24xIIQ" * len(keys))
        self.field_types: tuple[int, ...] | None = None
        self.field_masks: tuple[int, ...] = ()
        self.calls = tuple(calls)
        count = self.facts.nvlink_count or 0
        self.link_names = tuple(("nvl", link, kind) for link in range(count)
                                for kind in ("state", "replay", "recovery", "crc_flit", "crc_data"))
        #: The last poll's NVLink values and records (kept while the values stay the same).
        self.link_values: tuple[Any, ...] | None = None
        self.links: tuple[NvLinkData, ...] = ()
