"""hwmon registrations: how the collectors that read hwmon devices tell one registration from the next, find a
device's hwmon directory, and see that a chip's directory lacks an input it should have."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from rigmon.collectors.device_facts import DeviceFacts
from rigmon.hw.root import HostRoot

HWMON = "/sys/class/hwmon"

#: One hwmon device as `HostRoot.listdir_inodes` lists ``/sys/class/hwmon``: its ``hwmonN`` and the
#: inode number of its registration. The kernel gives ``hwmonN`` to the next device registered once
#: it is free (a driver reloaded, a PSU's I2C client instantiated again, an NVMe controller reset,
#: between two ticks); the inode number is new for each registration, so the pair names one
#: registration of one device.
HwmonChip = tuple[str, int]

#: The kinds of hwmon channel that have an ``<kind><N>_input`` reading.
INPUT_KINDS = ("in", "curr", "power", "temp", "fan")
#: Files that describe a channel's input: a chip that lists one of them without the input has not
#: created the input yet (a driver that adds its files after its device appears) or hides it for now.
INPUT_TRAITS = ("_label", "_min", "_max")
#: A reading file of a chip; ``power1_average`` is the reading of a chip without ``power1_input`` (amdgpu).
READING_SUFFIXES = ("_input", "_average")


def hwmon_registrations(root: HostRoot) -> list[HwmonChip]:
    """The hwmon devices registered now, sorted (listed once per read scope, see `HwmonChip`).

    A collector that holds facts about hwmon directories reads them again when this changes: a
    device registered again may have another ``hwmonN``, and its old ``hwmonN`` another device.
    """
    return root.listdir_inodes(HWMON)


def parse_missing_inputs(entries: Sequence[str]) -> tuple[str, ...]:
    """The channels (``in1``) of a chip directory listing described (label, limits) without a reading."""
    # in1_label and in1_max listed, in1_input not (yet)
    present = set(entries)
    missing = set()
    for entry in entries:
        channel, sep, trait = entry.partition("_")
        kind = channel.rstrip("0123456789")
        if not sep or f"_{trait}" not in INPUT_TRAITS or kind not in INPUT_KINDS or kind == channel:
            continue
        if not any(f"{channel}{suffix}" in present for suffix in READING_SUFFIXES):
            missing.add(channel)
    return tuple(sorted(missing))


def chip_incomplete(entries: Sequence[str]) -> bool:
    """Whether a chip directory listing lacks an input its other files describe
    (`parse_missing_inputs`), or any reading at all (its driver is still creating its files)."""
    return bool(parse_missing_inputs(entries)) or not any(e.endswith(READING_SUFFIXES) for e in entries)


@dataclass(frozen=True, slots=True)
class ChipListing:
    """One listing of an hwmon chip's directory, for the read of its facts."""

    entries: list[str]
    present: frozenset[str]
    #: Every reading (``*_input``) and alarm file listed at some read of this registration's facts.
    seen: frozenset[str]
    #: Whether the chip lacks a file it should have: one it listed before in this registration, an
    #: input its other files describe (`parse_missing_inputs`), or any reading at all (its driver is
    #: still creating its files). Its facts are read again soon (`DeviceFacts.recheck`).
    incomplete: bool


class ChipFacts(Protocol):
    """Facts of an hwmon chip that remember the files its registration has shown (`ChipListing.seen`)."""

    @property
    def seen(self) -> frozenset[str]:
        """`ChipListing.seen` of the read that made them."""
        ...


F = TypeVar("F", bound=ChipFacts)
V = TypeVar("V")


def list_chip(root: HostRoot, facts: DeviceFacts[HwmonChip, F], chip: HwmonChip) -> tuple[F | None, ChipListing]:
    """List the directory of registration ``chip`` for the read of its facts, held in ``facts``.

    Returns:
        The facts the registration had before (`DeviceFacts.previous`, ``None`` for a new one) and
        the listing. When it is `ChipListing.incomplete`, the facts are read again soon, backing off
        (`DeviceFacts.recheck`): what comes a moment late is read the next tick, and what a driver
        hides for good costs a listing now and then, not a failed open every tick.
    """
    before = facts.previous(chip)
    seen_before = frozenset() if before is None else before.seen
    entries = root.listdir(f"{HWMON}/{chip[0]}")
    present = frozenset(entries)
    listed = frozenset(e for e in entries if e.endswith(("_input", "_alarm")))
    incomplete = not seen_before <= present or chip_incomplete(entries)
    if incomplete:
        facts.recheck(chip)
    return before, ChipListing(entries=entries, present=present, seen=seen_before | listed, incomplete=incomplete)


def chip_of(chips: Sequence[HwmonChip], path: str) -> HwmonChip | None:
    """The registration among ``chips`` whose directory holds ``path`` (``/sys/class/hwmon/hwmon3/temp1_input``)."""
    hwmon = path.removeprefix(f"{HWMON}/").partition("/")[0]
    return next((chip for chip in chips if chip[0] == hwmon), None)


def read_chip_input(root: HostRoot, facts: DeviceFacts[HwmonChip, V], chip: HwmonChip, path: str) -> str | None:
    """Registration ``chip``'s reading file ``path`` (an ``_input`` its facts planned), read every tick.

    ``None`` when it does not read (a sensor that failed this tick is read again at the next). A file
    that is gone (`HostRoot.read_present`: a driver removed the input) has the chip's facts read again
    at the next tick (`DeviceFacts.reread`): `list_chip` finds the chip lacking it and backs off
    (`DeviceFacts.recheck`), and the facts leave it out, so it is not opened (and failed) every tick
    until the next refresh.
    """
    try:
        return root.read_present(path)
    except FileNotFoundError:
        facts.reread(chip)
        return None


def device_hwmon_dirs(root: HostRoot, device: str, entries: Sequence[str] | None = None) -> list[str]:
    """The hwmon directories a device's sysfs directory ``device`` (listed as ``entries``, or now)
    holds: ``device/hwmonN`` (an NVMe controller's since 5.6), then ``device/hwmon/hwmonN`` (most drivers)."""
    if entries is None:
        entries = root.listdir(device)
    found = [f"{device}/{e}" for e in entries if e.startswith("hwmon") and e[5:].isdigit()]
    return found + [f"{device}/hwmon/{e}" for e in root.listdir(f"{device}/hwmon") if e.startswith("hwmon")]
