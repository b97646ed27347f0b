"""Simulated PMBus PSUs in sysfs as the kernel's pmbus driver shows them: one hwmon device per
supply, linked to its I2C client, and what a driver reload or a hidden input does to its files."""

from __future__ import annotations

from dataclasses import dataclass, field

from rigmon.sim.tree import Tree

#: The I2C adapter the simulated supplies sit on (their clients are ``1-00xx``).
I2C_ADAPTER = "/sys/devices/platform/i2c-1"


@dataclass
class SimPmbusChip:
    """One supply's hwmon device: ``hwmon<hwmon>``, registered by ``driver`` for the I2C client at
    ``address`` on `I2C_ADAPTER`.

    Args:
        hwmon: the number of its hwmon device (``hwmon20``).
        address: its 7-bit I2C address (``0x58``: client ``1-0058``).
        driver: the name its hwmon device reports (``pmbus``, or a PSU-specific driver's).
    """

    hwmon: int
    address: int
    driver: str = "pmbus"
    #: Files of the device (``curr2_input``) the driver does not show now (see `hide`).
    hidden: set[str] = field(default_factory=set)
    #: Whether the tree holds this registration's directory (written at the next `write` if not).
    _registered: bool = field(default=False, init=False, repr=False)
    #: The I2C client the tree holds a directory of, to remove when the supply moves to another.
    _client_written: str | None = field(default=None, init=False, repr=False)

    @property
    def base(self) -> str:
        """The hwmon device's directory (``/sys/class/hwmon/hwmon20``)."""
        return f"/sys/class/hwmon/hwmon{self.hwmon}"

    @property
    def client(self) -> str:
        """The I2C client's name, ``<bus>-<address, 4 hex digits>`` (``1-0058``)."""
        return f"1-{self.address:04x}"

    def hide(self, name: str) -> None:
        """The driver stops showing file ``name`` (``curr2_input``) from the next write on."""
        self.hidden.add(name)

    def show(self, name: str) -> None:
        """File ``name`` is shown again from the next write on."""
        self.hidden.discard(name)

    def reregister(self, address: int | None = None, driver: str | None = None) -> None:
        """The driver lets the supply go and registers it again under the same ``hwmonN`` (a driver
        reloaded, the supply's I2C client instantiated again after its PMBus cable was replugged),
        maybe at another address or by another driver: a new device directory at the next write,
        with every file shown.

        Args:
            address: its new I2C address (another client name), ``None`` for the same one.
            driver: the driver that takes it now, ``None`` for the same one.
        """
        if address is not None:
            self.address = address
        if driver is not None:
            self.driver = driver
        self.hidden.clear()
        self._registered = False

    def write(self, tree: Tree, files: dict[str, str]) -> None:
        """Write the device's files (``{"in1_input": "230000", ...}``, without a newline) and its
        ``name``; a hidden file is removed. A new registration first makes a new directory."""
        base = self.base
        if not self._registered:
            tree.renew_dir(base)
            if self._client_written is not None and self._client_written != self.client:
                tree.remove(f"{I2C_ADAPTER}/{self._client_written}")
            tree.write(f"{I2C_ADAPTER}/{self.client}/name", f"{self.driver}\n")
            # Like the kernel's pmbus driver: hwmonN/device is the PSU's I2C client, which is how
            # tools (node_exporter) tell two chips of the same name apart.
            tree.symlink(f"{base}/device", f"../../..{I2C_ADAPTER.removeprefix('/sys')}/{self.client}")
            self._client_written = self.client
            self._registered = True
        for name, value in {"name": self.driver, **files}.items():
            if name in self.hidden:
                tree.remove(f"{base}/{name}")
            else:
                tree.write(f"{base}/{name}", value + "\n")
