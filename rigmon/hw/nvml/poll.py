"""The per-poll reads of every GPU: one field-values call and the functions NVML has no field for,
called directly into buffers allocated once per GPU.

What each GPU is asked is its `rigmon.hw.nvml.plan.Plan`, built from the per-poll values'
sources when its facts are read (every `FACTS_EVERY` polls). A refused field is read through its
function from then on; a refused function (NOT_SUPPORTED, FUNCTION_NOT_FOUND) is dropped from the
plan, its next alternative taken, until the plan is built again. The device handle is kept with
the plan: a GPU that falls off the bus answers GPU_IS_LOST to every call on it, and a changed
device count drops every plan.
"""

from __future__ import annotations

import ctypes
import functools
import operator
import struct
from typing import Any

import pynvml

from rigmon.hw.nvml.calls import (
    ABSENT_CODES,
    GPU_IS_LOST,
    GONE_CODES,
    NOT_AVAILABLE_U32,
    REFUSED_CODES,
    SUCCESS,
    Gate,
    mhz,
    pct,
    symbol,
    u32,
    u64,
    union_int,
)
from rigmon.hw.nvml.facts import MAX_NVLINKS, read_facts
from rigmon.hw.nvml.plan import (
    NVLINK_COUNTERS,
    POWER_SAMPLES_PER_CALL,
    UNSIGNED_MASK,
    VT_UINT,
    VT_ULL,
    Plan,
)
from rigmon.hw.nvml.records import NvLinkData, NvmlDeviceData
from rigmon.hw.nvml.watchdog import NvmlUnavailable

#: Sampling type of the driver's power sample buffer (values in mW).
TOTAL_POWER_SAMPLES = pynvml.NVML_TOTAL_POWER_SAMPLES

NOT_FOUND = pynvml.NVML_ERROR_NOT_FOUND


@functools.lru_cache(maxsize=2 * POWER_SAMPLES_PER_CALL)
def _sample_layout(count: int, uint: bool) -> struct.Struct:
    """``count`` ``nvmlSample_t`` as one struct: the timestamp, then the value union's low 4 bytes as
    they lie in memory (an unsigned int, what drivers give; "=" is native byte order and the union's
    members start at its start) or all 8 bytes (another value type, decoded by `union_int`)."""
    return struct.Struct("=" + ("QI4x" if uint else "QQ") * count)


def _pstate(value: int | None) -> int | None:
    """A performance state (0 fastest to 15); ``None`` for NVML_PSTATE_UNKNOWN (32)."""
    return None if value == pynvml.NVML_PSTATE_UNKNOWN else value


class DeviceReader:
    """Reads every GPU of one binding; lives in (and is only called from) the poll watchdog's thread."""

    def __init__(self) -> None:
        self._plans: dict[int, Plan] = {}
        self.count_hint = 1
        #: Indices whose last read found no GPU that answers (lost, no handle).
        self._unreached: set[int] = set()
        self._last_count: int | None = None
        #: A GPU answers again after it could not be reached, or the device count changed, since
        #: the binding last looked: a GPU was reset or rescanned, and the driver forgot what was
        #: registered for it (the Xid event set). The binding clears it.
        self.returned = False
        self._count = ctypes.c_uint()
        self._count_ref = ctypes.byref(self._count)

    @property
    def counted(self) -> bool:
        """Whether the device count was read (until it is, `count_hint` is 1)."""
        return self._last_count is not None

    def count(self) -> int:
        """The device count; a changed count drops every GPU's plan (an index may be another GPU now).

        Raises:
            NvmlUnavailable: no driver or library.
        """
        fn = symbol("nvmlDeviceGetCount_v2")
        ret = pynvml.NVML_ERROR_UNINITIALIZED if fn is None else fn(self._count_ref)
        if ret != SUCCESS:
            if ret in ABSENT_CODES or ret == pynvml.NVML_ERROR_UNINITIALIZED:
                raise NvmlUnavailable(f"NVML: {pynvml.NVMLError(ret)}")
            raise pynvml.NVMLError(ret)
        count = int(self._count.value)
        if count != self._last_count:
            self.returned = self.returned or self._last_count is not None
            self._last_count = count
        if max(1, count) != self.count_hint:
            self._plans.clear()
            self.count_hint = max(1, count)
        return count

    def plan(self, index: int, refresh: bool = True) -> tuple[Plan | None, bool]:
        """GPU ``index``'s plan, made again (handle and facts) when due and ``refresh``; ``None`` when
        the GPU cannot be reached, with whether it answered GPU_IS_LOST."""
        plan = self._plans.get(index)
        if plan is not None and (plan.polls_left > 0 or not refresh):
            return plan, False
        gate = Gate()
        handle = gate.get(pynvml.nvmlDeviceGetHandleByIndex, index)
        facts = None if handle is None else read_facts(gate, handle)
        if facts is None or gate.lost:
            self._plans.pop(index, None)
            return None, gate.lost
        plan = self._plans[index] = Plan(handle, facts)
        return plan, False

    def drop(self, index: int) -> None:
        """Forget GPU ``index``'s plan (it answered GPU_IS_LOST): handle and facts are read again."""
        self._plans.pop(index, None)

    def read(self, index: int, since_us: int) -> NvmlDeviceData:
        """Every per-poll value of GPU ``index``; power samples newer than ``since_us``.

        Raises:
            NvmlUnavailable: the library went away.
        """
        data = self._read(index, since_us)
        if data.lost or data.uuid is None:
            self._unreached.add(index)
        elif index in self._unreached:
            self._unreached.discard(index)
            self.returned = True
        return data

    def _read(self, index: int, since_us: int) -> NvmlDeviceData:
        plan = self._plans.get(index)
        if plan is None or plan.polls_left <= 0:
            plan, lost = self.plan(index)
            if plan is None:
                return NvmlDeviceData(index=index, lost=lost)
        plan.polls_left -= 1
        got: dict[object, Any] = {}
        lost = self._read_fields(plan, got)
        if not lost:
            lost = self._call(plan, got)
        facts = plan.facts
        if not got:
            # Nothing answered (a handle the driver no longer knows after a reset?): the handle
            # and facts are read again on the next poll rather than after `FACTS_EVERY`.
            self._plans.pop(index, None)
        if lost:
            self._plans.pop(index, None)
            return NvmlDeviceData(index=index, lost=True, uuid=facts.uuid, name=facts.name, serial=facts.serial,
                                  pci_bus_id=facts.pci_bus_id)
        gate = Gate()
        samples_us, samples_mw, sampled = self._power_samples(gate, plan, since_us)
        nvlinks = self._nvlinks(gate, plan, got)
        if gate.lost:
            self._plans.pop(index, None)
            return NvmlDeviceData(index=index, lost=True, uuid=facts.uuid, name=facts.name, serial=facts.serial,
                                  pci_bus_id=facts.pci_bus_id)
        get = got.get
        util, memory = get("util"), get("memory")
        viol_power, viol_thermal = get("violation_power"), get("violation_thermal")
        return NvmlDeviceData(
            index=index,
            lost=False,
            uuid=facts.uuid,
            name=facts.name,
            serial=facts.serial,
            pci_bus_id=facts.pci_bus_id,
            # A value the driver answers NVML_VALUE_NOT_AVAILABLE for (all ones) is missing, not
            # 4294967 W or 4294967295 C: alarms, the journal's maxima and the guard would take it.
            power_mw=u32(get("power_mw")),
            power_samples_us=samples_us,
            power_samples_mw=samples_mw,
            power_sampled=sampled,
            power_instant_mw=u32(get("power_instant_mw")),
            energy_mj=u64(get("energy_mj")),
            power_limit_mw=u32(get("power_limit_mw")),
            enforced_limit_mw=u32(get("enforced_limit_mw")),
            default_limit_mw=facts.default_limit_mw,
            # Clocks: some drivers answer 0 for a domain they do not report; 0 MHz is never real.
            clock_sm_mhz=mhz(get("clock_sm_mhz")),
            clock_mem_mhz=mhz(get("clock_mem_mhz")),
            clock_graphics_mhz=mhz(get("clock_graphics_mhz")),
            app_clock_graphics_mhz=mhz(get("app_clock_graphics_mhz")),
            app_clock_mem_mhz=mhz(get("app_clock_mem_mhz")),
            max_clock_sm_mhz=facts.max_clock_sm_mhz,
            max_clock_mem_mhz=facts.max_clock_mem_mhz,
            max_clock_graphics_mhz=facts.max_clock_graphics_mhz,
            clock_reasons=u64(get("clock_reasons")),
            violation_power_ns=None if viol_power is None else u64(int(viol_power.violationTime)),
            violation_thermal_ns=None if viol_thermal is None else u64(int(viol_thermal.violationTime)),
            temp_c=u32(get("temp_c")),
            # Not capped at 100: NVML says the fan speed may exceed 100 % of its nominal maximum.
            fan_pct=u32(get("fan_pct")),
            util_gpu_pct=None if util is None else pct(int(util.gpu)),
            util_mem_pct=None if util is None else pct(int(util.memory)),
            mem_total_bytes=None if memory is None else u64(int(memory.total)),
            mem_used_bytes=None if memory is None else u64(int(memory.used)),
            pstate=_pstate(get("pstate")),
            pcie_gen=u32(get("pcie_gen")),
            pcie_width=u32(get("pcie_width")),
            pcie_gen_max=facts.pcie_gen_max,
            pcie_width_max=facts.pcie_width_max,
            pcie_replay=u32(get("pcie_replay")),
            nvlinks=nvlinks,
            ecc_corrected=u64(get("ecc_corrected")),
            ecc_uncorrected=u64(get("ecc_uncorrected")),
        )

    @staticmethod
    def _read_fields(plan: Plan, got: dict[object, Any]) -> bool:
        """The plan's fields in one call into ``got``; whether the GPU is lost. A field the driver
        refuses (the whole call, or that field's own status) is read through its function from now
        on (this poll included) until the plan is built again."""
        if not plan.field_keys:
            return False
        fn = plan.fields_fn
        ret = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND if fn is None else fn(plan.handle, plan.n_fields, plan.fields_ref)
        if ret != SUCCESS:
            if ret == GPU_IS_LOST:
                return True
            if ret in GONE_CODES:
                raise NvmlUnavailable(str(pynvml.NVMLError(ret)))
            if ret in REFUSED_CODES:
                plan.refused.add(("nvmlDeviceGetFieldValues", ()))
            plan.unsupported.update(plan.field_keys)
            plan.build()
            return False
        # The call succeeds when any field was filled; each field carries its own status. The
        # array is decoded in one unpack of its bytes (an attribute read per member was most of
        # the decoding). When every field answered with the same unsigned types as last time (every
        # poll but the first), the values are masked and stored without Python per field.
        flat = plan.fields_layout.unpack_from(plan.fields)
        types, statuses, raws = flat[0::3], flat[1::3], flat[2::3]
        if types == plan.field_types and statuses.count(SUCCESS) == len(statuses):
            got.update(zip(plan.field_names, map(operator.and_, raws, plan.field_masks)))
            return False
        refused = False
        lost = False
        for key, name, value_type, status, raw in zip(plan.field_keys, plan.field_names, types, statuses, raws,
                                                      strict=True):
            if status == SUCCESS:
                # The counters are unsigned long long and unsigned int: no table look-up for those.
                number = (raw if value_type == VT_ULL else raw & 0xFFFFFFFF if value_type == VT_UINT
                          else union_int(value_type, raw))
                if number is not None:
                    got[name] = number
                    continue
                plan.unsupported.add(key)
                refused = True
            elif status == GPU_IS_LOST:
                lost = True
            else:
                plan.unsupported.add(key)
                refused = True
        if refused:
            plan.build()
        elif not lost and all(t in UNSIGNED_MASK for t in types):
            plan.field_types = types
            plan.field_masks = tuple(UNSIGNED_MASK[t] for t in types)
        return lost

    @staticmethod
    def _call(plan: Plan, got: dict[object, Any], only_missing: bool = False) -> bool:
        """The plan's direct calls into ``got``; whether the GPU is lost (the calls stop there: every
        further call on a lost GPU answers the same). The next alternative of a refused function (the
        throttle reasons for the event reasons) is asked in the same poll."""
        refused = False
        for name, fn, args, out, scalar, key in plan.calls:
            if only_missing and name in got:
                continue
            ret = fn(*args)
            if not ret:  # NVML_SUCCESS
                got[name] = out.value if scalar else out
            elif ret == GPU_IS_LOST:
                return True
            elif ret in GONE_CODES:
                raise NvmlUnavailable(str(pynvml.NVMLError(ret)))
            elif ret in REFUSED_CODES:
                plan.refused.add(key)
                refused = True
            # Any other answer (NO_PERMISSION, UNKNOWN) leaves the value missing for this poll.
        if refused:
            plan.build()
            return DeviceReader._call(plan, got, only_missing=True)
        return False

    @staticmethod
    def _power_samples(gate: Gate, plan: Plan,
                       since_us: int) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
        """The driver's power samples newer than ``since_us``, oldest first, as their timestamps (us)
        and values (mW), in one call per `POWER_SAMPLES_PER_CALL` (no count query first: the
        buffer says how many it can hold); and whether the driver answered (``False``: it refuses
        the buffer, or the call failed, so no samples says nothing)."""
        fn = plan.samples_fn
        if fn is None:
            return (), (), False
        stamps: tuple[int, ...] = ()
        values: tuple[int, ...] = ()
        answered = False
        while True:
            plan.count.value = POWER_SAMPLES_PER_CALL
            ret = fn(plan.handle, TOTAL_POWER_SAMPLES, ctypes.c_ulonglong(since_us), plan.value_type_ref,
                     plan.count_ref, plan.samples)
            if not gate.answered(ret):
                # NOT_FOUND is the driver's way of saying "no samples newer than that".
                if ret == NOT_FOUND:
                    answered = True
                elif ret in REFUSED_CODES:
                    plan.refused.add(("nvmlDeviceGetSamples", ()))
                    plan.samples_fn = None
                break
            answered = True
            count = min(plan.count.value, POWER_SAMPLES_PER_CALL)
            if not count:
                break
            value_type = plan.value_type.value
            # One unpack of the whole array into a flat (timestamp, value, ...) tuple.
            flat = _sample_layout(count, value_type == VT_UINT).unpack_from(plan.samples)
            if value_type == VT_UINT:
                new_stamps, new_values = flat[0::2], flat[1::2]
                if NOT_AVAILABLE_U32 in new_values:
                    # A sample without a value (NVML_VALUE_NOT_AVAILABLE) is no peak of 4294967 W.
                    kept = [(ts, mw) for ts, mw in zip(new_stamps, new_values, strict=True) if mw != NOT_AVAILABLE_U32]
                    new_stamps, new_values = tuple(ts for ts, _ in kept), tuple(mw for _, mw in kept)
                stamps, values = stamps + new_stamps, values + new_values
            else:
                # Another value type (none is documented for power): integers kept, doubles dropped.
                pairs = [(ts, union_int(value_type, raw)) for ts, raw in zip(flat[0::2], flat[1::2], strict=True)]
                stamps += tuple(ts for ts, number in pairs if number is not None)
                values += tuple(number for _, number in pairs if number is not None)
            if count < POWER_SAMPLES_PER_CALL:
                break
            # The newest sample's time, kept or not (a buffer of samples without a value keeps none).
            since_us = flat[-2]
        return stamps, values, answered

    @staticmethod
    def _nvlinks(gate: Gate, plan: Plan, got: dict[object, Any]) -> tuple[NvLinkData, ...]:
        count = plan.facts.nvlink_count
        if count is None:
            return DeviceReader._probe_nvlinks(gate, plan)
        values = tuple(map(got.get, plan.link_names))
        if values == plan.link_values:
            # No link changed state and no counter moved (the usual poll): the same records.
            return plan.links
        links: list[NvLinkData] = []
        get = got.get
        for link in range(count):
            state = get(("nvl", link, "state"))
            if state is None:
                # A GPU without NVLink (or a link the driver does not know) answers no state: no more links.
                break
            links.append(NvLinkData(link=link, active=bool(state), replay=get(("nvl", link, "replay")),
                                    recovery=get(("nvl", link, "recovery")), crc_flit=get(("nvl", link, "crc_flit")),
                                    crc_data=get(("nvl", link, "crc_data"))))
        plan.link_values, plan.links = values, tuple(links)
        return plan.links

    @staticmethod
    def _probe_nvlinks(gate: Gate, plan: Plan) -> tuple[NvLinkData, ...]:
        """Links of a GPU whose driver does not say how many (old drivers): each link's state until
        one is refused, and its counters through their functions."""
        links: list[NvLinkData] = []
        handle = plan.handle
        for link in range(MAX_NVLINKS):
            state = gate.get(pynvml.nvmlDeviceGetNvLinkState, handle, link)
            if state is None:
                # A GPU without NVLink answers NOT_SUPPORTED; past the last link the driver
                # answers INVALID_ARGUMENT (or NOT_SUPPORTED): either way, no more links.
                break
            counters = [gate.get(pynvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter)
                        for _, counter, _ in NVLINK_COUNTERS]
            links.append(NvLinkData(link, bool(state), *(None if c is None else int(c) for c in counters)))
        return tuple(links)

