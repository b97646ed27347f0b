"""Simulated hwmon registrations of devices whose hwmon directory sits below their own (an NVMe
controller's, an amdgpu card's, a CPU's k10temp or coretemp): the directory, its ``device`` link and
its ``/sys/class/hwmon`` link, and what a controller reset or a driver reload does to them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rigmon.sim.tree import Tree

HWMON_CLASS = "/sys/class/hwmon"


@dataclass
class SimHwmon:
    """One device's hwmon registration, as the kernel's hwmon core makes it: the directory
    ``<parent>/hwmon<number>`` with its ``device`` link to the device it is registered for, and the
    class link ``/sys/class/hwmon/hwmon<number>`` to it.

    Args:
        parent: the directory the hwmon directory is in (``/sys/class/nvme/nvme0``, ``<pci>/hwmon``).
        number: its ``hwmonN``.
    """

    parent: str
    number: int
    #: Whether the device has an hwmon device at all (``False``: a kernel before NVMe hwmon support,
    #: a driver that failed to register one): the next `write` removes it and writes nothing.
    present: bool = True
    #: Files of the device (``power1_average``) its driver does not show now (see `hide`).
    hidden: set[str] = field(default_factory=set)
    #: The ``hwmonN`` whose directory and link the tree holds (``None``: none written yet, or removed).
    _written: int | None = field(default=None, init=False, repr=False)
    #: Whether the tree holds this registration (made anew at the next `write` if not).
    _registered: bool = field(default=False, init=False, repr=False)

    @property
    def device(self) -> str:
        """The device the registration is for, its ``device`` link's target: the parent, or the
        parent's parent for a ``<device>/hwmon`` parent (``<pci>/hwmon/hwmon1/device`` -> ``<pci>``)."""
        return self.parent.removesuffix("/hwmon")

    @property
    def path(self) -> str:
        """The hwmon directory (``/sys/class/nvme/nvme0/hwmon2``)."""
        return f"{self.parent}/hwmon{self.number}"

    def hide(self, name: str) -> None:
        """The driver stops showing file ``name`` (``power1_average``): removed at the next `write`."""
        self.hidden.add(name)

    def show(self, name: str) -> None:
        """File ``name`` is shown again from the next `write` on."""
        self.hidden.discard(name)

    def reregister(self, number: int | None = None) -> None:
        """The device's hwmon device is unregistered and registered again (an NVMe controller reset,
        amdgpu reloaded) under ``hwmon<number>`` (``None``: the same ``hwmonN``): a new directory
        and class link at the next `write`, the old ones gone, with every file shown."""
        if number is not None:
            self.number = number
        self.hidden.clear()
        self._registered = False

    def write(self, tree: Tree, files: dict[str, str], fixed: dict[str, str] | None = None) -> None:
        """Write the registration's files (``{"temp1_input": "38850\\n"}``), and ``fixed`` (its name,
        labels and limits) when it is new; a new registration first makes its directory and class
        link (and removes those of the one before). A hidden file (`hide`) is removed instead."""
        if not self.present:
            if self._written is not None:
                self.unregister(tree)
            return
        if not self._registered:
            if self._written is not None and self._written != self.number:
                self.unregister(tree)
            # Under the same name too, a new directory and link (new inode numbers), never the old
            # ones emptied: how a reader tells the registrations apart (`Tree.renew_dir`).
            tree.renew_dir(self.path)
            # hwmon_device_register_with_info(dev, ...): the hwmon device's ``device`` link is ``dev``,
            # the link by which lm-sensors (and rigmon) names the chip by its bus and address.
            tree.symlink(f"{self.path}/device", os.path.relpath(self.device, self.path))
            tree.symlink(f"{HWMON_CLASS}/hwmon{self.number}", os.path.relpath(self.path, HWMON_CLASS))
            self._written = self.number
            self._registered = True
            files = {**(fixed or {}), **files}
        for name, value in files.items():
            if name in self.hidden:
                tree.remove(f"{self.path}/{name}")
            else:
                tree.write(f"{self.path}/{name}", value)

    def unregister(self, tree: Tree) -> None:
        """Remove the registration's directory and class link (the device is gone)."""
        if self._written is not None:
            tree.remove(f"{self.parent}/hwmon{self._written}")
            tree.remove(f"{HWMON_CLASS}/hwmon{self._written}")
        self._written = None
        self._registered = False
