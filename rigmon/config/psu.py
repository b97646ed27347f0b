"""``[psu]`` and ``[psu.hwmon]``: the 12 V rail from a serial ADC or meter, or from hwmon."""

from __future__ import annotations

import math
from typing import Literal

import msgspec

from rigmon.config.common import check_ranges


PsuProtocol = Literal["rm1", "text", "pzem017"]


class PsuHwmonSection(msgspec.Struct, frozen=True, gc=False):
    """``[psu.hwmon]``: 12 V from hwmon (Super I/O, BMC, PMBus PSUs) without a serial ADC."""

    enabled: bool = True
    """Read hwmon voltage and PMBus files (absent hardware is a quiet state)."""
    scale: dict[str, float] = msgspec.field(default_factory=dict)
    """Multiplier per input, keyed ``CHIP/inN`` (``nct6779/in4 = 6.6``): Super I/O chips report
    the pin voltage behind a board-specific divider, as sensors.conf ``compute`` lines do."""
    share_imbalance_pct: float = 20.0
    """Paralleled PSUs whose current share deviates from an equal share by more than this
    many percentage points are reported as imbalanced (a corroding connection)."""

    def __post_init__(self) -> None:
        if self.share_imbalance_pct <= 0:
            raise ValueError("share_imbalance_pct must be positive")
        check_ranges(self, {"share_imbalance_pct": (0.0, 100.0)})
        for key, factor in self.scale.items():
            # A key hwmon never names (``in4`` without its chip) scaled nothing: the Super I/O pin's
            # 1.8 V went on being reported as the 12 V rail, the setting ignored without a word.
            chip, slash, name = key.partition("/")
            if not (chip and slash and name.startswith("in") and name[2:].isdigit()):
                raise ValueError(f"scale.{key}: a key is CHIP/inN as hwmon names the input "
                                 f"(\"nct6779/in4\": the chip's name file, then the input), got {key!r}")
            if not 0 < factor < math.inf:  # also refuses NaN
                raise ValueError(f"scale.{key} must be a positive number (a divider's ratio), got {factor!r}")


#: The line speeds a PZEM-017 can be set to (its manual); 9600 from the factory.
PZEM_BAUDS = (1200, 2400, 4800, 9600)


class PsuSection(msgspec.Struct, frozen=True, gc=False):
    """``[psu]``: the 12 V rail from a serial ADC or meter (see README "PSU rail")."""

    port: str = ""
    """Serial device (``/dev/serial/by-id/...``, read below the agent root); empty: no ADC."""
    protocol: PsuProtocol = "rm1"
    """``rm1`` (rigmon firmware), ``text`` (numbers, CSV, key=value) or ``pzem017`` (Modbus RTU)."""
    baud: int = 0
    """Line speed; 0: the protocol's (115200 for ``rm1`` and ``text``; 9600, a PZEM-017's
    factory setting, for ``pzem017``). Ignored by USB CDC devices."""
    primary: str = "v"
    """Load-side voltage channel: the one alarms and sag pushes look at."""
    psu_side: str = "vpsu"
    """PSU-side voltage channel for the path resistance (empty: none)."""
    current: str = "i"
    """Load current channel for the path resistance (empty: none)."""
    sag_volts: float = 11.5
    """A window whose minimum of ``primary`` is below this is published at once."""
    stale_after_s: float = 3.0
    """No valid window for this long (at least 3 windows) marks the readings stale."""
    reopen_min_s: float = 1.0
    """First delay before reopening a lost port; doubles up to ``reopen_max_s``."""
    reopen_max_s: float = 5.0
    """Longest delay between reopen attempts (a udev tty add retries at once)."""
    query_identity: bool = True
    """Send ``?`` after opening so an RM1 device repeats its identity line."""
    pzem_address: int = 1
    """Modbus slave address of a PZEM-017 (1..247)."""
    poll_interval_s: float = 1.0
    """Seconds between PZEM-017 polls (the meter refreshes about once a second)."""
    channels: dict[str, str] = msgspec.field(default_factory=lambda: {"v": "0"})
    """``text`` protocol: rigmon channel -> field of the line (a key, a CSV header name, or a
    0-based column number). Channels starting with ``v`` are volts, with ``i`` amps."""
    scale: dict[str, float] = msgspec.field(default_factory=dict)
    """``text`` protocol: multiplier per channel to volts or amps (``v = 0.001`` for mV)."""
    hwmon: PsuHwmonSection = msgspec.field(default_factory=PsuHwmonSection)

    @property
    def line_baud(self) -> int:
        """The line speed to open the port at: ``baud``, else the protocol's."""
        return self.baud or (9600 if self.protocol == "pzem017" else 115200)

    def __post_init__(self) -> None:
        if self.baud < 0:
            raise ValueError("baud must be positive (or 0: the protocol's)")
        if self.protocol == "pzem017" and self.baud not in (0, *PZEM_BAUDS):
            raise ValueError(f"baud: a PZEM-017 talks at {', '.join(map(str, PZEM_BAUDS))} (9600 from the factory), "
                             f"not {self.baud}")
        if not 0 < self.sag_volts < 1000:
            raise ValueError("sag_volts must be between 0 and 1000")
        if self.stale_after_s <= 0 or self.poll_interval_s <= 0:
            raise ValueError("stale_after_s and poll_interval_s must be positive")
        if not 0 < self.reopen_min_s <= self.reopen_max_s:
            raise ValueError("reopen_min_s must be positive and at most reopen_max_s")
        if not 1 <= self.pzem_address <= 247:
            raise ValueError("pzem_address must be 1..247")
        check_ranges(self, {"baud": (0 if self.baud == 0 else 50, 4_000_000), "stale_after_s": (0.01, 86400.0), "poll_interval_s": (0.01, 3600.0),
                            "reopen_min_s": (0.001, 3600.0), "reopen_max_s": (0.001, 3600.0)})
        if self.port and not self.port.startswith("/"):
            # Read below the agent's root: "ttyUSB0" was opened as <root>/ttyUSB0, a device that never exists.
            raise ValueError(f"port must be an absolute device path (/dev/serial/by-id/..., /dev/rigmon-psu0), "
                             f"got {self.port!r}")
        if not self.primary:
            raise ValueError("primary must name a channel")
        for name in self.channels:
            if not name[:1] in ("v", "i"):
                raise ValueError(f"channels.{name}: channel names start with v (volts) or i (amps)")
        self._check_text_channels()

    def _check_text_channels(self) -> None:
        """Refuse a ``[psu.scale]`` or ``primary`` that names no channel the lines are read for.

        A scale keyed by a typo (``V = 0.001``) multiplied nothing: every line of a sketch printing mV
        read 12030 V, was dropped as nonsense, and the ADC was called silent, the mistake named nowhere.
        """
        names = ", ".join(sorted(self.channels)) or "none"
        if self.protocol != "text":
            if self.scale:
                raise ValueError(f"scale: [psu.scale] is read only with protocol = \"text\" (this port speaks "
                                 f"{self.protocol}, which sends volts and amps); remove it")
            return
        for name in self.scale:
            if name not in self.channels:
                raise ValueError(f"scale.{name}: no channel {name} in [psu.channels] (its channels: {names}); "
                                 f"a scale is keyed by the channel it multiplies (v = 0.001 for a sketch printing mV)")
        if self.primary not in self.channels:
            raise ValueError(f"primary: the channel {self.primary!r} is not in [psu.channels] (its channels: {names}); "
                             f"map the load-side voltage to it, or set primary to one of them")
