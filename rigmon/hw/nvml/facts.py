"""What a GPU answers the same on every poll (identity, PCI address, limits, maximum clocks and link,
NVLink count), read through pynvml's wrappers once every `FACTS_EVERY` polls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pynvml

from rigmon.hw.nvml.calls import Gate, field_value, mhz, u32

#: Polls between two reads of a GPU's facts: they do not change while the GPU stays on the bus
#: (the driver keeps them from load to unload). Read again sooner when the GPU cannot be reached
#: or the device count changes. The refusals remembered by the poll (`rigmon.hw.nvml.poll`) are
#: forgotten at the same time.
FACTS_EVERY = 60
#: Field id of a GPU's NVLink link count (NVML_FI_DEV_NVLINK_LINK_COUNT; V100-SXM2: 6).
FI_NVLINK_LINK_COUNT = 91
#: Highest NVLink index probed when the driver does not say how many links a GPU has.
MAX_NVLINKS = 18


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """A GPU's facts (NVML units); ``None`` where the driver does not say.

    ``nvlink_count`` ``None``: the driver does not say how many links (old drivers), so the poll
    probes the link states until one is refused.
    """

    uuid: str | None
    name: str | None
    serial: str | None
    pci_bus_id: str | None
    default_limit_mw: int | None
    max_clock_sm_mhz: int | None
    max_clock_mem_mhz: int | None
    max_clock_graphics_mhz: int | None
    pcie_gen_max: int | None
    pcie_width_max: int | None
    nvlink_count: int | None


def read_facts(gate: Gate, handle: Any) -> GpuFacts:
    """Read the facts of the GPU behind ``handle`` through pynvml's wrappers (a rare path)."""
    g = gate.get
    pci = g(pynvml.nvmlDeviceGetPciInfo, handle)
    return GpuFacts(
        uuid=g(pynvml.nvmlDeviceGetUUID, handle),
        name=g(pynvml.nvmlDeviceGetName, handle),
        serial=g(pynvml.nvmlDeviceGetSerial, handle),
        pci_bus_id=None if pci is None else str(pci.busId),
        default_limit_mw=u32(g(pynvml.nvmlDeviceGetPowerManagementDefaultLimit, handle)),
        max_clock_sm_mhz=mhz(g(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM)),
        max_clock_mem_mhz=mhz(g(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_MEM)),
        max_clock_graphics_mhz=mhz(g(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_GRAPHICS)),
        pcie_gen_max=u32(g(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle)),
        pcie_width_max=u32(g(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle)),
        # Ask the driver how many links the GPU has: some drivers answer the state query for
        # every index up to NVML_NVLINK_MAX_LINKS ("disabled" past the real ones), which would
        # list 18 links on a V100-SXM2 with 6. Old drivers lack the field: probed instead.
        nvlink_count=_link_count(_field_uint(gate, handle, FI_NVLINK_LINK_COUNT)),
    )


def _link_count(count: int | None) -> int | None:
    """The NVLink count the driver answered; ``None`` (probed, up to `MAX_NVLINKS`) when it is more
    than any GPU has (NVML_NVLINK_MAX_LINKS): the poll asks a field and a call per link, and a
    garbled count of 4294967295 would build billions of them."""
    return None if count is not None and count > pynvml.NVML_NVLINK_MAX_LINKS else count


def _field_uint(gate: Gate, handle: Any, field_id: int) -> int | None:
    values = gate.get(pynvml.nvmlDeviceGetFieldValues, handle, [field_id])
    if values is None:
        return None
    # The call succeeds when any field was filled; each field carries its own status.
    value = values[0]
    if value.nvmlReturn != pynvml.NVML_SUCCESS:
        return None
    return field_value(value)
