"""Wire records of storage: /proc/diskstats, /proc/mdstat, md sysfs, NVMe sysfs."""

from __future__ import annotations

from typing import Final, Literal, get_args

from rigmon.schema.record import Record

#: An md array's ``health`` (and ``mdstat_state``, and its members' ``role``) while /proc/mdstat cannot be
#: read (`rigmon.collectors.raid_unread`): nothing of now is known. One word for every reader of it.
RAID_UNKNOWN: Final = "unknown"
RaidHealth = Literal["ok", "degraded", "recovering", "broken", "inactive", "unknown"]
RaidMemberRole = Literal["in_sync", "rebuilding", "faulty", "spare", "journal", "missing", "unknown"]
NvmeLinkState = Literal["ok", "degraded", "lost", "unknown"]


class DiskReading(Record, frozen=True):
    """One whole block device (NVMe namespace, md array, SATA disk) from /proc/diskstats.

    Rates are ``None`` on the first sample and after a counter reset (device re-created);
    ``util_pct`` is the share of the interval the device had I/O in flight (iostat %util);
    ``*_await_ms`` is the mean time per completed request during the interval (iostat
    r_await/w_await), ``None`` when no request completed. ``discards_total`` is ``None`` on
    kernels before 4.18 and ``flushes_total`` before 5.5 (shorter diskstats lines).
    """

    name: str
    major: int
    minor: int
    reads_total: int
    writes_total: int
    read_bytes_total: int
    write_bytes_total: int
    in_flight: int
    discards_total: int | None
    flushes_total: int | None
    read_bytes_per_s: float | None
    write_bytes_per_s: float | None
    read_iops: float | None
    write_iops: float | None
    util_pct: float | None
    read_await_ms: float | None
    write_await_ms: float | None


class RaidMemberReading(Record, frozen=True):
    """One member of an md array.

    ``slot`` is the member's slot in the array (``dev-*/slot`` in sysfs), ``None`` when it has none
    (a spare, a faulty member) or sysfs does not say (no ``dev-*`` directory): the ``[n]`` of
    /proc/mdstat is ``device``, not the slot;
    ``flags`` are the raw words of ``dev-*/state`` (``in_sync``, ``faulty``, ``write_error``...);
    ``present`` is false when the member's block device is gone (enclosure unplugged) while
    md still lists it. Rates come from the member's own block counters.
    ``device`` is the member's device number in the array's superblock (``nvme0n1[0]`` in
    /proc/mdstat, mdadm's ``Number``): written on the drive, it stays when the kernel name
    changes (NVMe enumeration order at boot, an enclosure re-plugged) and, unlike ``slot``,
    when the member fails (a faulty member leaves its slot: ``none``); with the array's
    ``uuid`` it names the member for good. ``None`` when mdstat does not list the member.
    """

    name: str
    slot: int | None
    role: RaidMemberRole
    present: bool
    write_mostly: bool
    replacement: bool
    flags: tuple[str, ...]
    errors_total: int | None
    read_bytes_per_s: float | None
    write_bytes_per_s: float | None
    # Added for stable member alarms (additive).
    device: int | None = None


class RaidArrayReading(Record, frozen=True):
    """One md array from /proc/mdstat and /sys/block/mdX/md.

    ``md_name`` is the /dev/md/NAME handle behind the kernel name (``raid0n0`` for md127).
    ``mdstat_state`` is the word of /proc/mdstat (``active``, ``inactive``, ``broken``);
    ``array_state`` the sysfs word (``clean``, ``active``, ``broken``, ``inactive``...).
    ``health`` is ``unknown`` (`RAID_UNKNOWN`) while /proc/mdstat cannot be read: the array is listed as
    last read, every reading of now ``null``, and ``health_last_read`` is the health it had then (an agent
    of the round before said ``mdstat_state`` ``unknown`` and kept the last health in ``health``:
    `raid_unknown` tells both). ``degraded``, ``sync_*`` exist only for levels with redundancy (``None`` for RAID0 and
    linear). ``sync_progress_pct``, ``sync_speed_bytes_per_s`` and ``sync_eta_s`` describe
    a running resync/recovery/check/reshape. ``member_imbalance_pct`` is how far the slowest
    busy member lags the fastest ((max - min) / max of read+write bytes/s), ``None`` when
    the array is idle; ``vs_fastest_array_pct`` is this array's throughput as a share of the
    fastest array loaded at the same time, ``None`` unless at least two arrays are busy.
    """

    name: str
    md_name: str | None
    level: str | None
    health: RaidHealth
    mdstat_state: str
    array_state: str | None
    read_only: bool
    raid_disks: int | None
    working_disks: int | None
    degraded: int | None
    sync_action: str | None
    sync_progress_pct: float | None
    sync_speed_bytes_per_s: float | None
    sync_eta_s: float | None
    size_bytes: int | None
    chunk_bytes: int | None
    uuid: str | None
    members: tuple[RaidMemberReading, ...]
    read_bytes_per_s: float | None
    write_bytes_per_s: float | None
    member_imbalance_pct: float | None
    vs_fastest_array_pct: float | None
    # Added for arrays md cannot read now (additive: ``null`` while md is read). Every field is in the JSON
    # (the journal's roll-up reads a record as a plain object of its fields: `rigmon.agent.journal.rollup`).
    health_last_read: RaidHealth | None = None


#: Every md health this version knows; a newer agent's other word is kept as text (`rigmon.schema.tolerant`).
RAID_HEALTHS: Final = frozenset(get_args(RaidHealth))


def raid_unknown(array: RaidArrayReading) -> bool:
    """Whether ``array``'s state is not known now (/proc/mdstat gone or unreadable): listed as last read.
    Also when its health is a word of a newer agent that this version does not know: neither healthy nor
    failed here."""
    return array.health == RAID_UNKNOWN or array.mdstat_state == RAID_UNKNOWN or array.health not in RAID_HEALTHS


def raid_last_health(array: RaidArrayReading) -> str:
    """The health ``array`` had when md was last read: ``health_last_read`` of an array not known now,
    (an older agent's) ``health`` otherwise."""
    return array.health_last_read or array.health


class NvmeReading(Record, frozen=True):
    """One NVMe controller from /sys/class/nvme/nvmeX, its PCIe link and its hwmon sensor.

    ``model``, ``serial`` and ``firmware`` are stripped of the kernel's space padding.
    Link speeds are per lane in GT/s (``8.0`` for gen 3); ``link_lost`` is true when the
    function reads ``Unknown`` speed (fell off the bus); ``namespaces`` are the visible
    block devices (``nvme0n1``), mapped through the controller, never by name arithmetic.
    ``port_max_*`` are the maximum of the PCIe port upstream of the drive (``None`` when
    it is not known); a link trains at most at the lower of both ends' maxima.
    ``link_state`` is ``degraded`` when the link runs below that (a Gen4 drive trained at
    Gen3, or x2 of x4), ``lost`` with ``link_lost``, ``unknown`` without link files;
    ``link_degraded_reason`` says how it falls short.
    ``temp_c`` is the composite temperature (hwmon ``temp1_input``), ``temp_max_c`` its warning
    threshold (``temp1_max``: WCTEMP, where the controller starts to throttle) and ``temp_crit_c``
    the critical one (``temp1_crit``: CCTEMP). ``temp_alarm`` is the drive's own critical warning
    temperature bit (``temp1_alarm``); ``temp_over_max`` whether the drive is at or over its warning
    threshold (composite at or above ``temp_max_c``, or ``temp_alarm`` set), ``None`` when neither
    can be told; ``temp_warning_reason`` says it in words while it is so (``82.05 °C, at or over its
    warning limit 81.85 °C (critical 84.85 °C), in md127``). ``md_arrays`` are the md arrays holding
    its namespaces, whole or through a partition (``/sys/block/<ns>/holders``,
    ``/sys/block/<ns>/<ns>p1/holders``).
    """

    name: str
    model: str | None
    serial: str | None
    firmware: str | None
    state: str | None
    transport: str | None
    address: str | None
    namespaces: tuple[str, ...]
    link_speed_gts: float | None
    link_width: int | None
    max_link_speed_gts: float | None
    max_link_width: int | None
    link_gen: int | None
    max_link_gen: int | None
    link_lost: bool
    temp_c: float | None
    temp_max_c: float | None
    temp_crit_c: float | None
    # Added by issue 22 (additive).
    port_max_link_speed_gts: float | None = None
    port_max_link_width: int | None = None
    link_state: NvmeLinkState = "unknown"
    link_degraded_reason: str | None = None
    # Added for incident 6's thermally throttling enclosure (additive).
    temp_alarm: bool | None = None
    temp_over_max: bool | None = None
    md_arrays: tuple[str, ...] = ()
    temp_warning_reason: str | None = None
