"""A fake NVMe drive: its PCIe link, its reads and writes, its heat and throttling, its hwmon device."""

from __future__ import annotations

from dataclasses import dataclass, field

from rigmon.sim.hwmon import SimHwmon


SECTOR_BYTES = 512
KIB = 1024
#: Bytes per request the fake drives complete (large sequential reads).
REQUEST_BYTES = 128 * KIB
#: Payload share of the line code: 8b/10b up to PCIe gen 2 (5 GT/s), 128b/130b from gen 3.
PCIE_ENCODING = ((5.0, 8 / 10), (float("inf"), 128 / 130))
#: Payload share of what the line code leaves: the drive writes what it reads into host memory
#: in 256-byte TLPs, each with 4 bytes of framing, a 16-byte header and a 4-byte LCRC, and acks
#: and flow-control DLLPs take a few per cent more. A Gen3 x4 link carries ~3.5 GB/s of reads
#: (the 3.94 GB/s of its line rate never reach the host), Gen4 x4 ~7.0 GB/s.
PCIE_PAYLOAD_SHARE = 0.89
BITS_PER_BYTE = 8
#: What an NVMe controller's hwmon device holds besides its temperature (``temp1_max``: the warning
#: threshold, ``temp1_crit``: the critical one).
NVME_HWMON_FILES = {"name": "nvme\n", "temp1_label": "Composite\n", "temp1_max": "81850\n", "temp1_crit": "84850\n"}
#: Where a drive's one partition starts (sectors: the 1 MiB alignment of parted, fdisk and sgdisk) and
#: what GPT keeps after it at the end of the drive (its backup header and table: 33 sectors).
PARTITION_START_SECTORS = 2048
GPT_BACKUP_SECTORS = 33
#: The composite temperature's warning threshold (WCTEMP, ``temp1_max``) of the fake drives, in °C.
NVME_WCTEMP_C = 81.85
#: Air around the drives inside their enclosure or case, and how far above it a drive sits idle
#: and at full load with the enclosure's fan moving air (°C).
AMBIENT_C = 30.0
IDLE_RISE_C = 6.0
LOAD_RISE_C = 30.0
#: How fast a drive's temperature follows its heat (first order, time constant in seconds).
THERMAL_TAU_S = 30.0
#: A drive throttles its reads to this share of what it can do while its composite temperature
#: is at or over WCTEMP, and stops once it is this far below again (the controller's hysteresis).
THROTTLE_SHARE = 0.06
THROTTLE_HYSTERESIS_C = 2.0


@dataclass
class SimNvmeDrive:
    """One NVMe controller with one namespace, behind a PCIe link (and maybe a USB4 tunnel).

    Attributes:
        ctrl: controller instance (``nvme<ctrl>``); the namespace is ``nvme<ctrl>n1``.
        router: Thunderbolt router whose tunnel carries it, ``None`` when on the board.
        max_bytes_per_s: what the drive itself can read.
        partitioned: the namespace holds one GPT partition over the whole drive (``nvme<ctrl>n1p1``),
            as drives are partitioned before ``mdadm --create``: the partition is what an array
            holds, and all the drive's I/O goes through it.
    """

    ctrl: int
    model: str = "Samsung SSD 990 PRO 2TB"
    serial: str = "S6Z2NF0W000000A"
    firmware: str = "4B2QJXD7"
    address: str = "0000:64:00.0"
    link_gts: str = "16.0 GT/s PCIe"
    link_width: int = 4
    max_link_gts: str = "16.0 GT/s PCIe"
    max_link_width: int = 4
    router: str | None = None
    max_bytes_per_s: float = 6.5e9
    size_kib: int = 1953514584
    temp_c: float = 38.0
    #: How well the air around it carries its heat away: 1.0 with the enclosure's fan running,
    #: less with the fan stopped or the vents blocked (its rise above ambient grows as 1/cooling).
    cooling: float = 1.0
    #: Whether the controller throttles (composite temperature reached WCTEMP, see `THROTTLE_SHARE`).
    throttling: bool = False
    present: bool = True
    partitioned: bool = False
    reads: int = 0
    read_sectors: int = 0
    read_ms: int = 0
    writes: int = 0
    write_sectors: int = 0
    write_ms: int = 0
    io_ms: float = 0.0
    flushes: int = 0
    #: Its hwmon device (``nvme<ctrl>/hwmon<ctrl + 2>``): a controller reset registers it again
    #: (`SimHwmon.reregister`).
    hwmon: SimHwmon = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.hwmon = SimHwmon(parent=f"/sys/class/nvme/nvme{self.ctrl}", number=self.ctrl + 2)

    @property
    def ns(self) -> str:
        """The namespace's block device name."""
        return f"nvme{self.ctrl}n1"

    @property
    def part(self) -> str | None:
        """The partition's block device name (``nvme0n1p1``), ``None`` when the drive is not partitioned."""
        return f"{self.ns}p1" if self.partitioned else None

    @property
    def member(self) -> str:
        """The block device an md array holds of this drive: its partition, else its namespace."""
        return self.part or self.ns

    @property
    def member_dir(self) -> str:
        """That block device's directory under /sys/block (a partition's is its disk's child: ``nvme0n1/nvme0n1p1``)."""
        return f"{self.ns}/{self.part}" if self.part else self.ns

    @property
    def part_sectors(self) -> int:
        """The partition's size in 512-byte sectors: the drive after the alignment, less GPT's backup."""
        return self.size_kib * 2 - PARTITION_START_SECTORS - GPT_BACKUP_SECTORS

    @property
    def member_kib(self) -> int:
        """What an array gets of this drive, in KiB: its partition, else the whole namespace."""
        return self.part_sectors // 2 if self.partitioned else self.size_kib

    @property
    def pcie_bytes_per_s(self) -> float:
        """Payload the trained PCIe link carries: lanes x transfer rate x line-code share x TLP payload share;
        nothing over a lost link (``Unknown``: the drive fell off the bus, see `retrain`)."""
        if not self.link_gts[:1].isdigit():
            return 0.0
        gts = float(self.link_gts.split()[0])
        share = next(s for top, s in PCIE_ENCODING if gts <= top)
        return gts * 1e9 * self.link_width * share * PCIE_PAYLOAD_SHARE / BITS_PER_BYTE

    @property
    def composite_millideg(self) -> int:
        """The composite temperature as the kernel gives it (``temp1_input``): Kelvin from the SMART
        log, converted to m°C (K x 1000 - 273150, so it ends in ...850)."""
        return int(self.temp_c * 1000) - 150

    @property
    def read_cap_bytes_per_s(self) -> float:
        """What the drive reads at most now: its maximum, a small share of it while throttling."""
        return self.max_bytes_per_s * (THROTTLE_SHARE if self.throttling else 1.0)

    def retrain(self, link_gts: str, link_width: int) -> None:
        """Train the PCIe link again at ``link_gts`` (``"8.0 GT/s PCIe"``) x ``link_width``; ``"Unknown"`` x 63
        is a link lost (config space reading all ones)."""
        self.link_gts = link_gts
        self.link_width = link_width

    def do_io(self, read_bytes: float, write_bytes: float, dt_s: float) -> None:
        """Complete ``read_bytes`` and ``write_bytes`` over ``dt_s`` seconds."""
        if dt_s <= 0 or not self.present:
            return
        util = min(1.0, (read_bytes + write_bytes) / dt_s / self.max_bytes_per_s * 1.6)
        nr = int(read_bytes // REQUEST_BYTES)
        nw = int(write_bytes // REQUEST_BYTES)
        latency_ms = 0.15 + 0.6 * util
        self.reads += nr
        self.writes += nw
        self.read_sectors += int(read_bytes // SECTOR_BYTES)
        self.write_sectors += int(write_bytes // SECTOR_BYTES)
        self.read_ms += int(nr * latency_ms)
        self.write_ms += int(nw * latency_ms * 1.2)
        self.io_ms += dt_s * 1000.0 * util
        self.flushes += nw // 64
        target = AMBIENT_C + (IDLE_RISE_C + LOAD_RISE_C * util) / self.cooling
        self.temp_c += (target - self.temp_c) * min(1.0, dt_s / THERMAL_TAU_S)
        # The controller's thermal management: past WCTEMP it slows itself down until it cools.
        if self.composite_millideg >= round(NVME_WCTEMP_C * 1000):
            self.throttling = True
        elif self.composite_millideg < round((NVME_WCTEMP_C - THROTTLE_HYSTERESIS_C) * 1000):
            self.throttling = False

    def stats(self) -> list[int]:
        """The 17 diskstats counters."""
        return [self.reads, 0, self.read_sectors, self.read_ms, self.writes, 0, self.write_sectors,
                self.write_ms, 0, int(self.io_ms), self.read_ms + self.write_ms, 0, 0, 0, 0,
                self.flushes, self.flushes // 4]


def partition_stats(disk: list[int]) -> list[int]:
    """The diskstats counters of a drive's one partition, from the drive's (``disk``): a partition's I/O
    counts on it and on its disk alike, but flushes are not tracked for partitions (always 0)."""
    return [*disk[:15], 0, 0]
