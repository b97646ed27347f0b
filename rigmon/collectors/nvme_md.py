"""The md arrays holding an NVMe drive's namespaces or their partitions: listed from their holders links,
again when /proc/mdstat's arrays change."""

from __future__ import annotations

from collections.abc import Iterable

from rigmon.collectors.device_facts import DeviceFacts
from rigmon.hw.root import HostRoot

#: One md array as /proc/mdstat lists it: its name and the block devices it holds, sorted.
MdClaim = tuple[str, tuple[str, ...]]


def parse_md_claims(text: str) -> tuple[MdClaim, ...]:
    """The md arrays of /proc/mdstat with the block devices each holds, in the file's order.

    Only the array lines are read (not the status lines under them, which change every second
    while an array resyncs), and nothing raises: a line that is not one is skipped (the raid
    collector judges the file; here it only tells when the arrays' claims on devices change).
    """
    claims = []
    for line in text.splitlines():
        # md127 : active raid0 nvme1n1[1] nvme0n1[0]
        if not line.startswith("md"):
            continue
        name, sep, rest = line.partition(" : ")
        if sep:
            claims.append((name.strip(), tuple(sorted(w.partition("[")[0] for w in rest.split() if "[" in w))))
    return tuple(claims)


def is_partition_of(device: str, disk: str) -> bool:
    """Whether block device ``device`` is a partition of ``disk`` (``nvme0n1p1`` of ``nvme0n1``).

    The kernel names a partition after its disk, with a ``p`` between when the disk's name ends in a
    digit (block/partitions/core.c ``bdev_add_partition``: ``nvme0n1p1``, ``sda1``), as an NVMe
    namespace's always does.
    """
    number = device.removeprefix(f"{disk}p" if disk[-1:].isdigit() else disk)
    return number != device and number.isascii() and number.isdigit()


def on_namespace(device: str, namespaces: tuple[str, ...]) -> bool:
    """Whether block device ``device`` is one of ``namespaces`` or a partition of one."""
    return any(device == ns or is_partition_of(device, ns) for ns in namespaces)


def arrays_holding(claims: Iterable[MdClaim], namespaces: tuple[str, ...]) -> frozenset[str]:
    """The arrays among ``claims`` that hold any of ``namespaces``, whole or through a partition
    (``md127 : active raid0 nvme1n1p1[1] nvme0n1p1[0]`` holds ``nvme0n1``)."""
    return frozenset(name for name, members in claims if any(on_namespace(m, namespaces) for m in members))


class MdHolders:
    """Per NVMe controller, the md arrays that claim any of its namespaces, sorted, from the holders
    links md makes when it claims a member: the namespace's own (``/sys/block/nvme0n1/holders/md127``),
    or, for a drive partitioned before ``mdadm --create`` (as the mdadm man page and most guides do),
    a partition's (``/sys/block/nvme0n1/nvme0n1p1/holders/md127``): the drive is in md127 either way.

    An array assembled or stopped sends the controller no udev event, so the links are not left to
    the controller's other facts (read again every `device_facts.REFRESH_EVERY` reads): they are
    listed again when the controller's namespaces change and when the arrays /proc/mdstat lists, or
    the devices they hold, change (a new array, one stopped, a member added or removed). Each read of
    the controllers reads /proc/mdstat, which the raid collector reads in the same tick (the read
    scope reads it once) and whose parse here is reused while it reads the same; the holders
    directories are listed only on a change. md lists a member a moment before it links its holder
    (and unlinks it a moment before it drops it): a controller whose links disagree with /proc/mdstat
    is listed again soon, backing off (`DeviceFacts.recheck`: a tree copied without its links costs a
    listing now and then). Not thread-safe: the collector holds its lock.

    Args:
        root: the machine's files.
    """

    def __init__(self, root: HostRoot) -> None:
        self.root = root
        #: Per controller, its namespaces and the md arrays holding them.
        self._held: DeviceFacts[str, tuple[tuple[str, ...], tuple[str, ...]]] = DeviceFacts()
        #: /proc/mdstat's arrays at the last read (``None``: no /proc/mdstat, md not loaded).
        self._claims: tuple[MdClaim, ...] | None = None

    def begin(self, names: list[str]) -> None:
        """Start a read of controllers ``names``: drop what is held when /proc/mdstat's arrays changed."""
        claims = self.root.read_parsed("/proc/mdstat", parse_md_claims, errors="surrogateescape")
        if claims is not self._claims and claims != self._claims:
            self._claims = claims
            self._held.invalidate()
        self._held.begin(names)

    def invalidate(self) -> None:
        """List every controller's holders again at its next `arrays` (a udev event)."""
        self._held.invalidate()

    def forget(self, name: str) -> None:
        """List controller ``name``'s holders again at its next `arrays` (its state changed)."""
        self._held.forget(name)

    def arrays(self, name: str, namespaces: tuple[str, ...]) -> tuple[str, ...]:
        """The md arrays holding any of controller ``name``'s ``namespaces``, sorted."""
        held = self._held.get(name, lambda _: (namespaces, self._list(name, namespaces)))
        if held[0] != namespaces:
            self._held.forget(name)
            held = self._held.get(name, lambda _: (namespaces, self._list(name, namespaces)))
        return held[1]

    def _list(self, name: str, namespaces: tuple[str, ...]) -> tuple[str, ...]:
        found = tuple(sorted({h for ns in namespaces for device in self._devices(ns)
                              for h in self.root.listdir(f"/sys/block/{device}/holders") if h.startswith("md")}))
        if self._claims is not None and arrays_holding(self._claims, namespaces) != frozenset(found):
            self._held.recheck(name)
        return found

    def _devices(self, ns: str) -> list[str]:
        """Namespace ``ns`` and its partitions as paths under /sys/block (``nvme0n1``,
        ``nvme0n1/nvme0n1p1``): a partition's directory is its disk's child, not an entry of /sys/block."""
        return [ns, *(f"{ns}/{e}" for e in self.root.listdir(f"/sys/block/{ns}") if is_partition_of(e, ns))]
