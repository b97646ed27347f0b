"""Calling NVML: the error gate, symbols called directly, the output buffers and field-value decoding.

pynvml's wrappers allocate an output, resolve the function and raise an exception for every
refusal on every call; the per-poll reads instead call the library's functions directly
(`symbol`) into buffers allocated once per GPU, with the same error semantics (`Gate`).
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from typing import Any

import pynvml

from rigmon.hw.nvml.watchdog import NvmlUnavailable

#: Error codes that mean "this machine has no usable NVIDIA driver": a quiet absence.
ABSENT_CODES = frozenset({
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    pynvml.NVML_ERROR_NO_PERMISSION,
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
})
#: NVML answers that mean "this function gives nothing on this GPU or driver": remembered, not
#: asked again until the GPU's facts are read again (a fan on an SXM2 board answers NOT_SUPPORTED
#: on every poll, and raising and catching pynvml's exception for it cost more than the call).
REFUSED_CODES = frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})
#: Answers that mean the library itself went away: every read stops with `NvmlUnavailable`.
GONE_CODES = frozenset({pynvml.NVML_ERROR_UNINITIALIZED, pynvml.NVML_ERROR_DRIVER_NOT_LOADED})
SUCCESS = pynvml.NVML_SUCCESS
GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
#: NVML_VALUE_NOT_AVAILABLE: -1 in the value's unsigned type, what the driver answers (with
#: success) for a value it has not got: a power reading of 4294967.295 W, a temperature of
#: 4294967295 C, were it taken as a number.
NOT_AVAILABLE_U32: int = pynvml.NVML_VALUE_NOT_AVAILABLE_uint.value
NOT_AVAILABLE_U64: int = pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value


class Gate:
    """Maps per-field NVML errors to ``None`` and remembers whether the GPU is lost."""

    __slots__ = ("lost",)

    def __init__(self) -> None:
        self.lost = False

    def get(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call the pynvml wrapper ``fn(*args)``; ``None`` for an NVML error, which the field cannot give.

        NOT_SUPPORTED (fans on SXM2), FUNCTION_NOT_FOUND (an older driver), NO_PERMISSION
        and GPU_IS_LOST all leave that one value missing; GPU_IS_LOST also marks the GPU
        lost. Errors meaning the whole library went away propagate as `NvmlUnavailable`.
        """
        try:
            return fn(*args)
        except pynvml.NVMLError as exc:
            if exc.value == GPU_IS_LOST:
                self.lost = True
            elif exc.value in GONE_CODES:
                raise NvmlUnavailable(str(exc)) from None
            return None

    def answered(self, ret: int) -> bool:
        """Whether a direct call's return code ``ret`` is success; notes a lost GPU.

        Raises:
            NvmlUnavailable: the library went away (uninitialised, driver not loaded).
        """
        if ret == SUCCESS:
            return True
        if ret == GPU_IS_LOST:
            self.lost = True
        elif ret in GONE_CODES:
            raise NvmlUnavailable(str(pynvml.NVMLError(ret)))
        return False


def symbol(name: str) -> Callable[..., int] | None:
    """The NVML function ``name`` as pynvml resolved it (its cache), ``None`` when the library lacks it."""
    try:
        fn: Callable[..., int] = pynvml._nvmlGetFunctionPointer(name)
    except pynvml.NVMLError:
        return None
    return fn


def mhz(value: Any) -> int | None:
    """A clock in MHz; ``None`` for 0, which some drivers answer for a domain they do not report,
    and for NVML_VALUE_NOT_AVAILABLE."""
    return int(value) if isinstance(value, int) and 0 < value < NOT_AVAILABLE_U32 else None


def u32(value: int | None) -> int | None:
    """An unsigned 32-bit NVML value (milliwatts, degrees, link generation); ``None`` for
    NVML_VALUE_NOT_AVAILABLE."""
    return None if value == NOT_AVAILABLE_U32 else value


def u64(value: int | None) -> int | None:
    """An unsigned 64-bit NVML value (energy, error counts, a reason mask); ``None`` for
    NVML_VALUE_NOT_AVAILABLE."""
    return None if value == NOT_AVAILABLE_U64 else value


def pct(value: Any) -> int | None:
    """A percentage; ``None`` for NVML_VALUE_NOT_AVAILABLE (all ones), which fills samples without a value."""
    return int(value) if isinstance(value, int) and 0 <= value <= 100 else None


def handle_key(handle: Any) -> int:
    """A device handle's pointer value, to recognise it in event data."""
    return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)


# The outputs are plain ctypes structures with the layout (and member names) of pynvml's:
# pynvml's own are `_PrintableStructure`s whose every attribute read and write goes through a
# Python __getattribute__/__setattr__ (bytes-to-str conversion).
class FieldValue(ctypes.Structure):
    """``nvmlFieldValue_t``."""

    _fields_ = pynvml.c_nvmlFieldValue_t._fields_


class Sample(ctypes.Structure):
    """``nvmlSample_t``."""

    _fields_ = pynvml.c_nvmlSample_t._fields_


class Memory(ctypes.Structure):
    """``nvmlMemory_t``."""

    _fields_ = pynvml.c_nvmlMemory_t._fields_


class Utilization(ctypes.Structure):
    """``nvmlUtilization_t``."""

    _fields_ = pynvml.c_nvmlUtilization_t._fields_


class Violation(ctypes.Structure):
    """``nvmlViolationTime_t``."""

    _fields_ = pynvml.c_nvmlViolationTime_t._fields_


#: ``c_nvmlValue_t`` member for each integer value type.
_VALUE_MEMBER = {
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}


def field_value(value: Any) -> int | None:
    """The integer in one ``c_nvmlFieldValue_t``, by its value type; ``None`` for a double or an unknown type."""
    member = _VALUE_MEMBER.get(int(value.valueType))
    return None if member is None else int(getattr(value.value, member))


#: ``c_nvmlFieldValue_t`` as bytes: valueType and nvmlReturn (after fieldId, scopeId, timestamp and
#: latencyUsec), then the 8-byte value union as an unsigned integer (native byte order).
FIELD_LAYOUT = struct.Struct("=24xII Q")
assert FIELD_LAYOUT.size == ctypes.sizeof(FieldValue), "c_nvmlFieldValue_t changed its layout"
#: ``c_nvmlSample_t`` as bytes: the timestamp (us), then the 8-byte value union as an unsigned integer.
SAMPLE_LAYOUT = struct.Struct("=QQ")
assert SAMPLE_LAYOUT.size == ctypes.sizeof(Sample), "c_nvmlSample_t changed its layout"
#: Bits of the union's unsigned 64-bit view each integer value type uses, and whether it is signed.
_UNION_INT = {
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: (0xFFFFFFFF, 0),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: (0xFFFFFFFFFFFFFFFF, 0),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: (0xFFFFFFFFFFFFFFFF, 0),
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: (0xFFFFFFFFFFFFFFFF, 1 << 63),
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: (0xFFFFFFFF, 1 << 31),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: (0xFFFF, 0),
}


def union_int(value_type: int, raw: int) -> int | None:
    """The integer in a value union read as unsigned 64 bits; ``None`` for a double or an unknown type."""
    try:
        mask, sign = _UNION_INT[value_type]
    except KeyError:
        return None
    value = raw & mask
    return value - 2 * sign if sign and value & sign else value
