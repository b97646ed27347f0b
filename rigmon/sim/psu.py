"""Simulated PSU rail: paralleled PSUs, a supply path with resistance, and an RM1 ADC on a real pty.

Physics (DESIGN.md): the rail at the GPU terminals is the PSUs' output voltage minus the
path resistance times the current. The current comes from the GPUs' board power
(``node.bus["gpu_power_w"]``) plus the rest of the node, or from ``node.load`` when no
GPUs are simulated. Paralleled PSUs share the current; each droops a little with load and
folds back hard beyond its rating, so one PSU alone cannot carry a full node. A fast
load step dips the output until the PSUs' control loop catches up (a few tens of ms),
which is what a window minimum catches and a 1 s mean hides.

The ADC speaks RM1 on a pseudo-terminal (``os.openpty``): the agent opens the slave
through a ``/dev/serial/by-id/...`` symlink in the node's tree, exactly as on a node.
"""

from __future__ import annotations

import errno
import math
import os
import random
import tty
from dataclasses import dataclass

from rigmon.collectors.psu_lines import format_rm1, rm1_checksum
from rigmon.lazy_re import lazy_compile
from rigmon.sim.node import SimNode
from rigmon.sim.pmbus import SimPmbusChip
from rigmon.sim.tree import Tree

#: Where the sim puts the ADC's link in the node's tree; the agent config points at it.
DEFAULT_LINK = "/dev/serial/by-id/usb-rigmon_rm1-if00"
FIRMWARE = "rmfw-sim-1"
#: The simulated MCU samples the INA226 every millisecond.
SAMPLES_PER_S = 1000
#: INA226 bus under-voltage limit the firmware sets as its sag trap (flag 4).
UNDER_VOLTAGE_ALERT_V = 11.45
WINDOW_SLACK_MS = 0.5
U32 = 2**32


@dataclass
class _Envelope:
    """Running min/mean/max of a channel over the current ADC window."""

    total: float = 0.0
    weight: float = 0.0
    low: float = math.inf
    high: float = -math.inf

    def add(self, mean: float, low: float, high: float, weight: float) -> None:
        self.total += mean * weight
        self.weight += weight
        self.low = min(self.low, low)
        self.high = max(self.high, high)

    def millis(self) -> str:
        mean = self.total / self.weight if self.weight else (self.low + self.high) / 2
        low, high = round(self.low * 1000), round(self.high * 1000)
        return f"{min(max(round(mean * 1000), low), high)}/{low}/{high}"


_FLAGS = lazy_compile(rb",flags=(\d+)\*")


def _line_flags(line: bytes) -> int:
    """The flags of a formatted RM1 window line (0 without them, or for a garbled line)."""
    found = _FLAGS.search(line)
    return int(found[1]) if found else 0


class SimPsuRail:
    """PSUs, a supply path and an RM1 ADC on one simulated node (a `SimDevice`).

    Append it to ``node.devices`` after the GPUs, so it reads their power of this step;
    it writes ``node.bus["rail_volts"]`` (the rail's minimum over the step, what decides
    whether a GPU falls off the bus), ``rail_volts_mean`` and ``rail_amps`` for the GPUs'
    next step.

    Args:
        psus: PSUs in parallel (two carry a 4x V100 node; one alone folds back).
        psu_rated_w: rating of each PSU.
        set_volts: PSU output at no load.
        psu_droop_mohm: each PSU's output resistance (load regulation).
        path_mohm: resistance of cables, lugs and breakout board to the GPU terminals.
        transient_mohm: extra dip per ampere of a sudden load step, recovering with ``loop_tau_s``.
        idle_w, full_w: node power at load 0 and 1 when no GPU writes ``gpu_power_w``.
        base_w: CPU, fans, drives on the same rail, added to the GPUs' power.
        win_ms: ADC window length.
        link: the by-id path the ADC appears at in the node's tree.
        pty: speak RM1 on a real pty; with False, lines collect in `take_lines` (tests).
        device_id: the ADC's unique id in its identity line.
    """

    def __init__(
        self,
        psus: int = 2,
        psu_rated_w: float = 1100.0,
        set_volts: float = 12.06,
        psu_droop_mohm: float = 2.0,
        path_mohm: float = 0.8,
        transient_mohm: float = 0.5,
        loop_tau_s: float = 0.03,
        idle_w: float = 200.0,
        full_w: float = 1500.0,
        base_w: float = 150.0,
        win_ms: int = 1000,
        link: str = DEFAULT_LINK,
        pty: bool = True,
        device_id: str = "E6614103E7452D2F",
        noise_mv: float = 2.0,
    ) -> None:
        self.psus = psus
        self.psus_online = psus
        self.psu_rated_w = psu_rated_w
        self.set_volts = set_volts
        self.psu_droop_mohm = psu_droop_mohm
        self.path_mohm = path_mohm
        self.transient_mohm = transient_mohm
        self.loop_tau_s = loop_tau_s
        self.idle_w = idle_w
        self.full_w = full_w
        self.base_w = base_w
        self.win_ms = win_ms
        self.link = link
        self.use_pty = pty
        self.device_id = device_id
        self.noise_mv = noise_mv
        #: Relative current each PSU carries (a corroded lug on one PSU lowers its share).
        self.share_weights = [1.0] * psus
        #: Write each PSU's PMBus readings as hwmon files (``pmbus`` driver), from hwmon20 on.
        self.pmbus = True
        #: Each PSU's hwmon device and I2C client (``1-0058`` on): hide an input or register one
        #: again through them.
        self.pmbus_chips = [SimPmbusChip(hwmon=20 + k, address=0x58 + k) for k in range(psus)]
        #: Probability that a line is garbled (scenario ``adc-garbage``).
        self.garbage = 0.0
        self.plugged = True
        #: Firmware hung: the USB port stays enumerated and open, and nothing comes out of it.
        self.hung = False
        self.amps = 0.0
        self.rail_volts = set_volts
        self.source_volts = set_volts
        self._deviation_v = 0.0
        self._rng = random.Random(0)
        self._seeded = False
        self._powered = False
        self._seq = 0
        self._up_ms = 0.0
        self._flags = 0
        self._acc_ms = 0.0
        self._env_v = _Envelope()
        self._env_vpsu = _Envelope()
        self._env_i = _Envelope()
        self._out: list[bytes] = []
        self._lines: list[str] = []
        self._unsent = bytearray()
        #: The rest of the line going out on the pty: a line leaves whole, as the port takes it.
        self._pending = b""
        self._master: int | None = None
        self._slave: int | None = None
        self._tree: Tree | None = None
        self._boot()

    # -- the hook the simulator uses to configure the node's agent ----------------------

    def agent_config(self) -> dict[str, object]:
        """``[psu]`` settings that make the node's agent read this ADC."""
        return {"psu": {"port": self.link, "protocol": "rm1", "baud": 115200}}

    # -- physics ------------------------------------------------------------------------

    def source_at(self, amps: float) -> float:
        """PSU output voltage at a total current: droop, and fold-back above the rating."""
        online = max(self.psus_online, 0)
        if online == 0:
            return 0.0
        per_psu = amps / online
        rated_amps = self.psu_rated_w / self.set_volts
        volts = self.set_volts - per_psu * self.psu_droop_mohm / 1000.0
        if per_psu > rated_amps:
            # Current limit: the output collapses steeply beyond the rating.
            volts -= (per_psu - rated_amps) * 0.05
        return max(volts, 0.0)

    def solve(self, power_w: float) -> tuple[float, float, float]:
        """Steady state for a load drawing ``power_w``: (rail volts, PSU-side volts, amps)."""
        amps = power_w / max(self.rail_volts, 6.0)
        rail = source = self.set_volts
        for _ in range(30):
            source = self.source_at(amps)
            rail = source - amps * self.path_mohm / 1000.0
            if rail <= 1.0:
                return 0.0, source, 0.0
            amps = 0.5 * amps + 0.5 * power_w / rail
        return rail, source, amps

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        if not self._seeded:
            self._rng = random.Random(node.rng.random())
            self._seeded = True
        gpu_w = node.bus.get("gpu_power_w")
        power_w = self.base_w + (gpu_w if gpu_w is not None else self.idle_w + node.load * (self.full_w - self.idle_w))
        rail, source, amps = self.solve(power_w)
        if not self._powered:
            # First step: the node was already running at this load.
            self._powered = True
            self.amps = amps
        amps_before, deviation_start = self.amps, self._deviation_v
        step_amps = amps - amps_before
        # A sudden step dips (or lifts) the output until the PSUs' loop catches up.
        deviation_start -= step_amps * self.transient_mohm / 1000.0
        decay = math.exp(-dt_s / self.loop_tau_s) if dt_s > 0 else 1.0
        mean_dev = deviation_start * (self.loop_tau_s / dt_s) * (1 - decay) if dt_s > 0 else deviation_start
        self._deviation_v = deviation_start * decay
        noise = self.noise_mv / 1000.0
        low_dev, high_dev = min(deviation_start, 0.0), max(deviation_start, 0.0)
        self.amps, self.rail_volts, self.source_volts = amps, rail, source
        rail_low = rail + low_dev - noise * self._rng.random()
        node.bus["rail_volts"] = rail_low
        node.bus["rail_volts_mean"] = rail + mean_dev
        node.bus["rail_amps"] = amps
        if not self.plugged or self.hung or dt_s <= 0:
            return
        weight = dt_s
        self._env_v.add(rail + mean_dev, rail_low, rail + high_dev + noise * self._rng.random(), weight)
        self._env_vpsu.add(source + mean_dev, source + low_dev - noise * self._rng.random(),
                           source + high_dev + noise * self._rng.random(), weight)
        self._env_i.add(amps, min(amps, amps_before), max(amps, amps_before), weight)
        if rail_low < UNDER_VOLTAGE_ALERT_V:
            self._flags |= 4
        self._acc_ms += dt_s * 1000.0
        self._up_ms += dt_s * 1000.0
        # Half a millisecond of slack: a step landing a hair short of the window (a 100 ms
        # window stepped every 100 ms of wall time) closes it instead of doubling it.
        if self._acc_ms + WINDOW_SLACK_MS >= self.win_ms:
            self._emit_window()

    def _emit_window(self) -> None:
        win = round(self._acc_ms)
        n = max(1, min(int(self._acc_ms * SAMPLES_PER_S / 1000.0), 10**9))
        body = (f"RM1,seq={self._seq % U32},up={round(self._up_ms) % U32},win={win},n={n},"
                f"v={self._env_v.millis()},i={self._env_i.millis()},vpsu={self._env_vpsu.millis()}")
        if self._flags:
            body += f",flags={self._flags}"
        self._queue(format_rm1(body))
        self._seq += 1
        self._flags = 0
        self._acc_ms = 0.0
        self._env_v, self._env_vpsu, self._env_i = _Envelope(), _Envelope(), _Envelope()

    def _identity_line(self) -> str:
        return format_rm1(f"RMI,proto=1,fw={FIRMWARE},id={self.device_id},sensor=ina226,"
                          f"win={self.win_ms},ch=v;i;vpsu")

    def _boot(self) -> None:
        """Power-on: counters from zero, identity line first."""
        self._seq = 0
        self._up_ms = 0.0
        self._acc_ms = 0.0
        self._flags = 0
        self._env_v, self._env_vpsu, self._env_i = _Envelope(), _Envelope(), _Envelope()
        self._pending = b""
        self._queue(self._identity_line())

    def _queue(self, line: str) -> None:
        if self.garbage and self._rng.random() < self.garbage:
            self._out.append(self._garble(line))
        else:
            self._out.append(line.encode() + b"\r\n")
        if not self.use_pty:
            # Kept for `take_lines` only off the pty: on it nobody takes them, and a long
            # simulation at high speed would keep every line it ever sent.
            self._lines.append(line)

    def _garble(self, line: str) -> bytes:
        """One kind of line damage, chosen at random: what a flaky USB-serial link does."""
        kind = self._rng.randrange(6)
        raw = line.encode()
        if kind == 0:  # line noise bytes
            return bytes(self._rng.randrange(256) for _ in range(self._rng.randrange(1, 40))) + b"\r\n" + raw + b"\r\n"
        if kind == 1:  # cut: the rest of the line never arrives
            return raw[: self._rng.randrange(1, len(raw))]
        if kind == 2:  # one byte flipped in transit
            pos = self._rng.randrange(1, len(raw) - 3)
            return raw[:pos] + bytes([raw[pos] ^ (1 << self._rng.randrange(7))]) + raw[pos + 1 :] + b"\r\n"
        if kind == 3:  # a wrong checksum on a line claiming a deep sag
            body = f"RM1,seq={self._seq},up=1,win=1000,n=9,v=9000/5000/9100"
            bad = f"${body}*{rm1_checksum(body) ^ 0x5A:02X}\r\n"
            return bad.encode() + raw + b"\r\n"
        if kind == 4:  # an over-long line
            return b"$RM1," + b"x=1," * 80 + b"\r\n" + raw + b"\r\n"
        return b"[INFO] ina226 ok, bus 12V\r\n" + raw + b"\r\n"

    def take_lines(self) -> list[str]:
        """RM1 lines generated since the last call, as the firmware formatted them (tests)."""
        lines, self._lines = self._lines, []
        return lines

    def _write_pmbus(self, tree: Tree) -> None:
        """Per-PSU hwmon files as the kernel's pmbus driver exposes them (mV, mA, uW, m°C)."""
        weights = [w if k < self.psus_online else 0.0 for k, w in enumerate(self.share_weights[: self.psus])]
        total = sum(weights) or 1.0
        for chip, weight in zip(self.pmbus_chips, weights, strict=False):
            iout = self.amps * weight / total
            pout = iout * self.source_volts
            pin = pout / 0.92 if pout else 0.0
            chip.write(tree, {
                "in1_label": "vin", "in1_input": "230000" if weight else "0",
                "in2_label": "vout1", "in2_input": str(round(self.source_volts * 1000) if weight else 0),
                "curr1_label": "iin", "curr1_input": str(round(pin / 230 * 1000)),
                "curr2_label": "iout1", "curr2_input": str(round(iout * 1000)),
                "power1_label": "pin", "power1_input": str(round(pin * 1e6)),
                "power2_label": "pout1", "power2_input": str(round(pout * 1e6)),
                "temp1_input": str(round((30 + 25 * iout / 90) * 1000)),
                "in2_lcrit_alarm": "1" if weight and self.source_volts < 11.4 else "0",
            })

    def take_bytes(self) -> bytes:
        """Bytes the ADC sent since the last call, damage included, when not on a pty (tests)."""
        data, self._unsent = bytes(self._unsent), bytearray()
        return data

    # -- the pty --------------------------------------------------------------------------

    def write(self, tree: Tree) -> None:
        self._tree = tree
        if self.pmbus:
            self._write_pmbus(tree)
        if not self.use_pty:
            self._unsent += b"".join(self._out)
            self._out.clear()
            return
        if self.plugged and self._master is None:
            self._open_pty(tree)
        if self._master is None:
            self._out.clear()
            return
        self._answer_host()
        # Like the firmware (firmware/rigmon_rm1, send()): never wait for the host. A line goes out
        # whole, a piece at a time as the port takes it; a line that comes while the previous one is
        # still going out is dropped, and the next record carries the overrun flag (8). Cutting a
        # line short instead lost data that no flag told the host about.
        self._flush()
        for line in self._out:
            if self._pending:
                # The record is lost, not the under-voltage alert it latched (flag 4): the next
                # record carries it beside the overrun flag, as the firmware does.
                self._flags |= 8 | (_line_flags(line) & 4)
                continue
            self._pending = line
            self._flush()
        self._out.clear()

    def _flush(self) -> None:
        """Write as much of the pending line as the pty takes now."""
        assert self._master is not None
        while self._pending:
            try:
                sent = os.write(self._master, self._pending)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno != errno.EIO:
                    raise
                self._pending = b""  # the port went away under the line: it is lost
                self._flags |= 8
                return
            if sent == 0:
                return
            self._pending = self._pending[sent:]

    def _answer_host(self) -> None:
        assert self._master is not None
        try:
            received = os.read(self._master, 4096)
        except (BlockingIOError, OSError):
            return
        for command in received.replace(b"\r", b"\n").split(b"\n"):
            command = command.strip()
            if command == b"?":
                self._out.insert(0, self._identity_line().encode() + b"\r\n")
            elif command.startswith(b"W=") and command[2:].isdigit():
                self.win_ms = min(max(int(command[2:]), 50), 60000)
                self._out.insert(0, self._identity_line().encode() + b"\r\n")

    def _open_pty(self, tree: Tree) -> None:
        master, slave = os.openpty()
        # Raw mode before anything is written: a cooked pty would echo our own lines back.
        tty.setraw(slave)
        os.set_blocking(master, False)
        self._master, self._slave = master, slave
        tree.symlink(self.link, os.ttyname(slave))

    def unplug(self) -> None:
        """Pull the USB cable: the pty and its by-id link go away."""
        self.plugged = False
        self._close_pty()

    def hang(self) -> None:
        """The MCU's firmware stops (a sensor bus lock-up, a stack overflow): the port stays, silent."""
        self.hung = True

    def reset(self) -> None:
        """Its watchdog (or someone) resets the MCU: it boots again and sends its identity."""
        if self.hung:
            self.hung = False
            self._boot()

    def replug(self) -> None:
        """Plug it back: a new pty (maybe another /dev/pts number); the MCU boots again."""
        if self.plugged:
            return
        self.plugged = True
        self._boot()

    def _close_pty(self) -> None:
        if self._tree is not None:
            self._tree.remove(self.link)
        for fd in (self._master, self._slave):
            if fd is not None:
                os.close(fd)
        self._master = self._slave = None

    @property
    def slave_path(self) -> str | None:
        """The pty's /dev/pts path while plugged (tests)."""
        return None if self._slave is None else os.ttyname(self._slave)

    def close(self) -> None:
        self._close_pty()


def psu_rail_of(node: SimNode) -> SimPsuRail:
    """The node's simulated rail (scenarios drive it).

    Raises:
        LookupError: the node has none.
    """
    for device in node.devices:
        if isinstance(device, SimPsuRail):
            return device
    raise LookupError(f"{node.name} has no simulated PSU rail")
