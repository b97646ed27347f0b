"""What NVML's raw values mean: clock event reason bits, power samples, milliwatts, and what to
do when NVML does not start. Pure functions of the GPU collector (`rigmon.collectors.gpu`)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from rigmon.schema import ClockReason

MILLI = 1000.0
NANO = 1e9

#: Clock event (throttle) reason bits, in NVML's order (nvmlClocksEventReason*/ThrottleReason*).
CLOCK_REASON_BITS: tuple[tuple[int, ClockReason], ...] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)
_KNOWN_REASON_MASK = sum(bit for bit, _ in CLOCK_REASON_BITS)


#: Distinct clock event reason masks remembered with their names and text: a GPU's mask is one of
#: a few (idle, power cap, thermal...) from poll to poll, and decoding it was per GPU and poll.
REASON_MASKS_KEPT = 256


@lru_cache(maxsize=REASON_MASKS_KEPT)
def decode_clock_reasons(mask: int) -> tuple[ClockReason, ...]:
    """Names of the set bits of an NVML clock event reason mask (``other`` for unknown bits)."""
    names: list[ClockReason] = [name for bit, name in CLOCK_REASON_BITS if mask & bit]
    if mask & ~_KNOWN_REASON_MASK:
        names.append("other")
    return tuple(names)


@lru_cache(maxsize=REASON_MASKS_KEPT)
def clock_reasons_text(mask: int) -> str:
    """An NVML clock event reason mask as nvidia-smi prints it (``clocks_event_reasons.active``):
    ``0x0000000000001004``."""
    return f"0x{mask:016X}"


def power_extremes(samples_mw: Sequence[int]) -> tuple[float | None, float | None, int]:
    """Peak and minimum watts of power samples in milliwatts, and their count."""
    if not samples_mw:
        return None, None, 0
    return max(samples_mw) / MILLI, min(samples_mw) / MILLI, len(samples_mw)


#: What to do when NVML cannot start while NVIDIA GPUs are on the bus, by a phrase of pynvml's
#: error text (nvmlErrorString); otherwise the driver is most likely not loaded.
_INIT_HINTS = (
    # NVML_ERROR_LIB_RM_VERSION_MISMATCH: nvidia-smi says "Driver/library version mismatch".
    ("version mismatch", "the NVIDIA kernel module and libnvidia-ml are different versions (a driver "
                         "update without a reboot?): reboot, or reload the nvidia kernel modules"),
    # NVML_ERROR_NO_PERMISSION: /dev/nvidiactl or /dev/nvidia* not open to the agent's user.
    ("Insufficient Permissions", "may the agent's user open /dev/nvidiactl and /dev/nvidia*?"),
)


def init_hint(why: str) -> str:
    """What to check when NVML cannot start while NVIDIA GPUs are on the bus, from its error text."""
    for phrase, hint in _INIT_HINTS:
        if phrase in why:
            return hint
    return "is the NVIDIA driver loaded (nvidia-smi)?"


def watts(mw: int | None) -> float | None:
    """Milliwatts as watts (``None`` stays ``None``)."""
    return None if mw is None else mw / MILLI
