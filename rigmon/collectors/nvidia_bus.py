"""NvidiaBus: the NVIDIA GPUs on the PCI bus (sysfs) that NVML should read, for the collectors that read NVML."""

from __future__ import annotations

from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.gpu_values import init_hint
from rigmon.collectors.kernel_log import DISPLAY_CLASS_PREFIX, NVIDIA_VENDOR
from rigmon.hw.root import HostRoot


class NvidiaBus:
    """The NVIDIA display controllers in ``/sys/bus/pci/devices`` below a root.

    Args:
        root: the machine's files.
    """

    def __init__(self, root: HostRoot) -> None:
        self.root = root
        #: Per PCI address: whether it is an NVIDIA display controller (vendor and class, read once).
        self._pci_facts: DeviceFacts[str, bool] = DeviceFacts()
        #: The last call's answer; ``None`` while it is being made.
        self._ids: list[str] | None = None

    def bus_ids(self) -> list[str]:
        """Sysfs bus ids of the NVIDIA display controllers, sorted. The bus is listed on every call
        (a GPU that fell off it is gone from the list at once); each device's vendor and class are
        read when it appears, and all again after any device came or went and every 60 calls (a
        server lists a hundred or more PCI functions: two reads each a poll were most of the GPU
        collector's file reads). While the listing is the last call's and no fact is due, the
        answer is the last call's (the same devices with the same facts): no work per device."""
        devices = self.root.listdir("/sys/bus/pci/devices")
        if self._pci_facts.begin(devices) and self._ids is not None:
            return list(self._ids)
        self._ids = None
        ids = [bdf.lower() for bdf in devices if self._pci_facts.get(bdf, self._is_nvidia_gpu)]
        self._ids = ids
        return list(ids)

    def meant_for_nvidia(self, bdf: str) -> bool:
        """Whether NVML should read this GPU: bound to the ``nvidia`` driver, or to none (its module
        did not load). One given to a VM (``vfio-pci``) or to ``nouveau`` is not NVML's."""
        link = self.root.readlink(f"/sys/bus/pci/devices/{bdf}/driver")
        return link is None or link.rstrip("/").rsplit("/", 1)[-1] == "nvidia"

    def unread(self, why: str) -> str | None:
        """What to report when NVML cannot start (``why``, its error text) while NVIDIA GPUs meant for
        it are on the bus (a driver module that failed to build after a kernel update, a driver
        update without a reboot); ``None`` when there are none: no driver is then a quiet absence."""
        on_bus = [bdf for bdf in self.bus_ids() if self.meant_for_nvidia(bdf)]
        if not on_bus:
            return None
        why = why.rstrip(".")
        return (f"{why}, but {len(on_bus)} NVIDIA GPU{'s' if len(on_bus) > 1 else ''} "
                f"on the PCI bus ({', '.join(on_bus)}): {init_hint(why)}")

    def _is_nvidia_gpu(self, bdf: str) -> bool:
        base = f"/sys/bus/pci/devices/{bdf}"
        cls = self.root.read_attr(f"{base}/class")
        return (self.root.read_attr(f"{base}/vendor") == NVIDIA_VENDOR and cls is not None
                and cls.startswith(DISPLAY_CLASS_PREFIX))
