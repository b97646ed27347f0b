"""Pure parser of /proc/mdstat and the array-health rules that read it (no I/O).

The collector that reads the file and md sysfs is `rigmon.collectors.raid.RaidCollector`.
Every line of the file is one of the shapes drivers/md/md.c ``md_seq_show`` prints (with the
personalities' ``status`` callbacks, ``status_resync`` and the bitmap status); anything else
is not mdstat and raises `MdstatError` naming the line, so made-up text never becomes an
array with made-up readings.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from rigmon.collectors.sysfs_values import U64_DIGITS, U64_MAX
from rigmon.lazy_re import lazy_compile

#: Levels without redundancy: no sync files, no degraded count; a lost member breaks the array.
STRIPED_LEVELS = frozenset({"raid0", "linear"})
#: Personalities the kernel registers (drivers/md: linear, raid0, raid1, raid10, raid456,
#: multipath, faulty); the file's own ``Personalities :`` line may name more.
KNOWN_PERSONALITIES = frozenset(
    {"linear", "raid0", "raid1", "raid4", "raid5", "raid6", "raid10", "multipath", "faulty"})
#: State words of the header: ``active``/``inactive`` (``"%sactive"``), ``broken`` (MD_BROKEN, 5.x+).
STATES = frozenset({"active", "inactive", "broken"})
#: Member flags md_seq_show prints: write-mostly, journal, faulty, spare, replacement.
MEMBER_FLAGS = frozenset({"W", "J", "F", "S", "R"})
#: /proc/mdstat's progress word -> the sysfs ``sync_action`` word, so both sources agree.
MDSTAT_ACTIONS = {"recovery": "recover", "resync": "resync", "check": "check", "reshape": "reshape",
                  "repair": "repair"}


class MdstatError(ValueError):
    """Text that is not /proc/mdstat; the message quotes the offending line."""


@dataclass(frozen=True, slots=True)
class MdstatMember:
    """A member as /proc/mdstat lists it: kernel name, descriptor number (``[n]``) and flags.

    ``rebuilding`` is not printed by md: it is what the array's lines say of the member (see
    `rebuilding_members`). ``name`` is the kernel's, as read (a byte that is not UTF-8 as a
    ``surrogateescape`` surrogate), so that it names the member's sysfs paths.
    """

    name: str
    desc_nr: int
    write_mostly: bool = False
    journal: bool = False
    faulty: bool = False
    spare: bool = False
    replacement: bool = False
    rebuilding: bool = False


@dataclass(frozen=True, slots=True)
class MdstatArray:
    """One array block of /proc/mdstat.

    ``raid_disks``/``working_disks`` are the kernel's ``[n/m]`` (``m`` is raid_disks minus
    degraded); ``layout_copies`` the near x far copies of a raid10 status. ``sync_*`` come
    from the progress line of redundant levels (``sync_finish_min`` and
    ``sync_speed_kib_per_s`` are the kernel's own estimate); ``sync_pending`` is
    ``DELAYED``/``PENDING``/``REMOTE`` when a resync waits.
    """

    name: str
    state: str
    read_only: str | None
    level: str | None
    members: tuple[MdstatMember, ...]
    blocks_kib: int | None = None
    metadata: str | None = None
    chunk_kib: int | None = None
    raid_disks: int | None = None
    working_disks: int | None = None
    member_status: str | None = None
    near_copies: int = 1
    far_copies: int = 1
    sync_action: str | None = None
    sync_pending: str | None = None
    sync_pct: float | None = None
    sync_done_kib: int | None = None
    sync_total_kib: int | None = None
    sync_finish_min: float | None = None
    sync_speed_kib_per_s: int | None = None


# md127 : active (auto-read-only) raid1 nvme1n1[1](W) nvme0n1[0](F)
# (a name given in bytes that are not UTF-8, read with surrogateescape: U+DC80..U+DCFF for them)
_HEADER = lazy_compile(r"^(?P<name>md[\w.!\udc80-\udcff-]*) : ?(?P<rest>.*)$")
# nvme0n1[0](W)(F)
_MEMBER = lazy_compile(r"^(?P<name>[^\[\]\s()]+)\[(?P<nr>\d+)\](?P<flags>(?:\([A-Z]\))*)$")
_MEMBER_LIKE = lazy_compile(r"^[^\[\s]+\[")
_FLAG = lazy_compile(r"\(([A-Z])\)")
#       3906764800 blocks super 1.2 512k chunks
_BLOCKS = lazy_compile(r"^(?P<blocks>\d+) blocks\b(?P<rest>.*)$")
_SUPER = lazy_compile(r"\bsuper (?P<super>\S+)")
_CHUNK = lazy_compile(r"\b(?P<kib>\d+)[kK] chunks?\b")
_DISKS = lazy_compile(r"\[(?P<raid>\d+)/(?P<working>\d+)\] \[(?P<status>[U_]*)\]")
_DISKS_LIKE = lazy_compile(r"\[\d*/")
_NEAR = lazy_compile(r"\b(?P<n>\d+) near-copies\b")
_FAR = lazy_compile(r"\b(?P<n>\d+) (?:far|offset)-copies\b")
#       [==>..................]  recovery = 12.6% (246300416/1953382400) finish=137.1min speed=207456K/sec
_PROGRESS = lazy_compile(
    r"^(?:\[[=>.]*\]\s+)?(?P<action>[a-z]+)\s*=\s*(?P<pct>\d+(?:\.\d+)?)% \((?P<done>\d+)/(?P<total>\d+)\)"
    r"(?: finish=(?P<finish>\d+(?:\.\d+)?)min)?(?: speed=(?P<speed>\d+)K/sec)?"
)
#       resync=DELAYED
_PENDING = lazy_compile(r"^(?P<action>resync|recovery|reshape|check|repair)=(?P<why>DELAYED|PENDING|REMOTE)$")
#       bitmap: 3/15 pages [12KB], 65536KB chunk[, file: /path]
_BITMAP = lazy_compile(r"^bitmap: \d+/\d+ pages \[\d+KB\], \d+KB chunk")
# Personalities : [raid0] [raid1]
_PERSONALITIES = lazy_compile(r"^Personalities :(?P<names>(?: \[[\w-]+\])*) ?$")
# read_ahead 1024 sectors   (2.4 kernels, after the personalities)
_READ_AHEAD = lazy_compile(r"^read_ahead (?:\d+ sectors|not set)$")


def _error(line: str, why: str) -> MdstatError:
    return MdstatError(f"not /proc/mdstat ({why}): {line.strip()[:120]!r}")


def _count(digits: str, line: str) -> int:
    """A whole number of the line (``digits`` matched by the caller's pattern); past 64 bits the
    line is garbled, not md's: int() would fail beyond 4300 digits, a frame cannot carry it."""
    # md prints its counts and sizes as 64-bit numbers at most (sector_t, unsigned long long).
    if len(digits) > U64_DIGITS or int(digits) > U64_MAX:
        raise _error(line, f"number of {len(digits)} digits")
    return int(digits)


def _decimal(digits: str, line: str) -> float:
    """A decimal of the line (a percentage, minutes); a garbled one that is no finite float is an error."""
    value = float(digits)
    if not math.isfinite(value):
        raise _error(line, f"number of {len(digits)} digits")
    return value


def _parse_member(token: str, line: str) -> MdstatMember:
    m = _MEMBER.match(token)
    if m is None:
        raise _error(line, f"member {token!r} is not name[index](flags)")
    flags = _FLAG.findall(m["flags"])
    unknown = [f for f in flags if f not in MEMBER_FLAGS]
    if unknown:
        raise _error(line, f"member flag ({unknown[0]}) is none of the kernel's (F) (S) (W) (R) (J)")
    return MdstatMember(
        name=m["name"], desc_nr=_count(m["nr"], line),
        write_mostly="W" in flags, journal="J" in flags, faulty="F" in flags,
        spare="S" in flags, replacement="R" in flags,
    )


def _status_updates(text: str, line: str) -> dict[str, object]:
    """Fields from a status text: ``[N blocks] [super X.Y] <personality status> [n/m] [UU_]``."""
    updates: dict[str, object] = {}
    rest = text
    if (b := _BLOCKS.match(text.strip())) is not None:
        updates["blocks_kib"] = _count(b["blocks"], line)
        rest = b["rest"]
    if (s := _SUPER.search(rest)) is not None:
        updates["metadata"] = s["super"]
    if (c := _CHUNK.search(rest)) is not None:
        updates["chunk_kib"] = _count(c["kib"], line)
    if (n := _NEAR.search(rest)) is not None:
        updates["near_copies"] = _count(n["n"], line)
    if (f := _FAR.search(rest)) is not None:
        updates["far_copies"] = _count(f["n"], line)
    d = _DISKS.search(rest)
    if d is None and _DISKS_LIKE.search(rest):
        raise _error(line, "disk status is not [n/m] [U_]")
    if d is not None:
        raid, working, status = _count(d["raid"], line), _count(d["working"], line), d["status"]
        if working > raid or len(status) != raid:
            raise _error(line, f"[{raid}/{working}] [{status}] does not add up")
        updates.update(raid_disks=raid, working_disks=working, member_status=status)
    return updates


def _parse_header(line: str, personalities: frozenset[str]) -> MdstatArray:
    # md127 : active raid0 nvme1n1[1] nvme0n1[0]
    # md1 : active raid5 super 1.2 level 5, 512k chunk, algorithm 2 [4/0] [____]
    #   (an array without members: md_seq_show prints no blocks line, so the status
    #    follows the personality on the header line itself)
    m = _HEADER.match(line)
    if m is None:
        raise _error(line, "array header is not 'mdN : state ...'")
    tokens = m["rest"].split()
    if not tokens:
        raise _error(line, "truncated header: no state")
    state = tokens.pop(0)
    if state not in STATES:
        raise _error(line, f"state {state!r} is none of active, inactive, broken")
    read_only = None
    if tokens and tokens[0] in ("(read-only)", "(auto-read-only)"):
        read_only = tokens.pop(0)[1:-1]
    level = None
    if tokens and not _MEMBER_LIKE.match(tokens[0]):
        # Active arrays name their personality; inactive ones have none (no ->pers).
        word = tokens[0]
        if word in personalities or word in KNOWN_PERSONALITIES:
            level = tokens.pop(0)
        elif state != "inactive":
            raise _error(line, f"personality {word!r} does not exist")
    if state != "inactive" and level is None:
        raise _error(line, "truncated header: an active array without a personality")
    members = []
    while tokens and _MEMBER_LIKE.match(tokens[0]):
        members.append(_parse_member(tokens.pop(0), line))
    array = MdstatArray(name=m["name"], state=state, read_only=read_only, level=level, members=tuple(members))
    tail = " ".join(tokens)
    if tail:
        if any(_MEMBER_LIKE.match(t) for t in tokens):
            raise _error(line, "member after the status")
        updates = _status_updates(tail, line)
        if not updates:
            raise _error(line, f"unexpected {tail[:40]!r} after the members")
        array = dataclasses.replace(array, **updates)  # type: ignore[arg-type]
    return array


def _with_detail(array: MdstatArray, line: str) -> MdstatArray:
    """Fold one line below the header (sizes, disk status, progress, bitmap) into ``array``."""
    text = line.strip()
    updates: dict[str, object] = {}
    if _BLOCKS.match(text):
        updates = _status_updates(text, line)
    elif (p := _PROGRESS.match(text)) is not None:
        if p["action"] not in MDSTAT_ACTIONS:
            raise _error(line, f"sync action {p['action']!r} is not one md reports")
        updates = {
            "sync_action": MDSTAT_ACTIONS[p["action"]],
            "sync_pct": _decimal(p["pct"], line),
            "sync_done_kib": _count(p["done"], line),
            "sync_total_kib": _count(p["total"], line),
            "sync_finish_min": _decimal(p["finish"], line) if p["finish"] else None,
            "sync_speed_kib_per_s": _count(p["speed"], line) if p["speed"] else None,
        }
    elif (q := _PENDING.match(text)) is not None:
        updates = {"sync_action": MDSTAT_ACTIONS[q["action"]], "sync_pending": q["why"]}
    elif _BITMAP.match(text):
        return array
    else:
        raise _error(line, "not a status, progress or bitmap line")
    return dataclasses.replace(array, **updates)  # type: ignore[arg-type]


def _is_detail(text: str) -> bool:
    """Whether a stripped line is one of the lines below an array header."""
    return bool(_BLOCKS.match(text) or _PROGRESS.match(text) or _PENDING.match(text) or _BITMAP.match(text))


def parse_mdstat(text: str) -> list[MdstatArray]:
    """Parse /proc/mdstat into its arrays.

    Handles active, inactive and broken arrays, read-only flags, member flags (W, J, F, S,
    R), RAID0 chunk lines (no progress line), [n/m] [UU_] status, resync / recovery /
    check / reshape progress or ``resync=DELAYED``/``PENDING``, and the status of an array
    without members printed on its header line. Indentation is not required: text pasted
    into a mail or a bug report loses it, and a ``N blocks`` line is still the status of
    the array above it.

    Raises:
        MdstatError: a line md does not print (an unknown state, personality or member
            flag, a non-numeric member index, a truncated header, anything else).
    """
    arrays: list[MdstatArray] = []
    current: MdstatArray | None = None
    personalities: frozenset[str] = frozenset()
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("Personalities"):
            # Personalities : [raid0] [raid1] [raid6] [raid5] [raid4]
            p = _PERSONALITIES.match(stripped)
            if p is None:
                raise _error(line, "personalities are not '[name]' words")
            personalities = frozenset(re.findall(r"\[([\w-]+)\]", p["names"]))
            current = None
            continue
        if stripped.startswith("unused devices:") or _READ_AHEAD.match(stripped):
            current = None
            continue
        if _HEADER.match(stripped):
            current = _parse_header(stripped, personalities)
            arrays.append(current)
            continue
        if current is None:
            if _is_detail(stripped):
                raise _error(line, "status line without an array header above it")
            raise _error(line, "not an array header")
        arrays[-1] = current = _with_detail(current, line)
    return [_with_rebuilding(a) for a in arrays]


def rebuilding_members(array: MdstatArray) -> frozenset[int]:
    """Which members (indices into ``array.members``) mdstat shows being rebuilt.

    During ``recovery =`` md rebuilds the members it gave a slot that are not in sync yet:
    such a member has no ``(S)`` (md prints it for a member without a slot: a spare not picked
    up yet) and no ``(F)``, and its slot reads ``_`` in ``[U_]``, which counts only the members
    in sync. So the members without a flag are the ``U`` of the status plus those rebuilt. The
    ``[n]`` of a member is its role index in the superblock, which is its slot only for a
    member the array was created with (one added later gets the next free index, ``n`` or
    above): a member is called rebuilding when its index is a ``_`` of the status or past its
    end, and only when the members so found are as many as the slots rebuilt; else mdstat
    alone does not say which they are (none is called rebuilding).
    """
    status = array.member_status
    if array.sync_action != "recover" or array.sync_pending is not None or status is None:
        return frozenset()
    slotted = [i for i, m in enumerate(array.members)
               if not (m.spare or m.faulty or m.journal or m.replacement)]
    rebuilt = len(slotted) - status.count("U")
    if rebuilt <= 0:
        return frozenset()
    found = frozenset(i for i in slotted
                      if array.members[i].desc_nr >= len(status) or status[array.members[i].desc_nr] == "_")
    return found if len(found) == rebuilt else frozenset()


def _with_rebuilding(array: MdstatArray) -> MdstatArray:
    """``array`` with its members being rebuilt marked (see `rebuilding_members`)."""
    if array.sync_action != "recover":
        return array  # the usual case: nothing to look at
    found = rebuilding_members(array)
    if not found:
        return array
    members = tuple(dataclasses.replace(m, rebuilding=True) if i in found else m
                    for i, m in enumerate(array.members))
    return dataclasses.replace(array, members=members)


def is_container(level: str | None, metadata: str | None) -> bool:
    """Whether an md device is an external-metadata container (Intel RST/IMSM, DDF), not an array.

    A container holds the member disks and their metadata and is never started: mdstat shows
    it ``inactive`` for good, sysfs ``level`` reads ``container``. Its volumes are arrays of
    their own, whose metadata names the container (``super external:/md127/0``; ``-`` instead
    of ``/`` while mdmon holds the volume read-only).

    Args:
        level: sysfs ``level`` (``None`` when unknown).
        metadata: the ``super`` word of /proc/mdstat (``external:imsm``), ``None`` when absent.
    """
    if level == "container":
        return True
    if metadata is None or not metadata.startswith("external:"):
        return False
    return not metadata[len("external:"):].startswith(("/", "-"))


def parse_sync_completed(text: str | None) -> tuple[int, int] | None:
    """Parse ``sync_completed`` (``"1234 / 5678"`` sectors; ``none``/``delayed`` -> ``None``)."""
    if text is None:
        return None
    done, sep, total = text.partition("/")
    try:
        return (int(done), int(total)) if sep else None
    except ValueError:
        return None


def raid10_enough(status: str, near_copies: int, far_copies: int) -> bool:
    """Whether a raid10 with per-slot status ``status`` (``U``/``_``) still holds every block.

    The kernel's ``_enough`` (drivers/md/raid10.c): every group of ``near x far`` adjacent
    slots, starting at multiples of the near copies and wrapping round, must keep one
    working member.
    """
    disks = len(status)
    copies = max(1, near_copies * far_copies)
    if disks == 0:
        return False
    first = 0
    while True:
        if all(status[(first + k) % disks] != "U" for k in range(copies)):
            return False
        first = (first + max(1, near_copies)) % disks
        if first == 0:
            return True


def can_serve_data(level: str | None, raid_disks: int | None, working: int | None, status: str | None,
                   near_copies: int = 1, far_copies: int = 1) -> bool | None:
    """Whether a redundant array still has enough members to serve every block.

    ``None`` when the level or the counts are unknown. raid1 needs one member, raid4/5 all
    but one, raid6 all but two, raid10 one member of every copy set.
    """
    if level is None or raid_disks is None or working is None or raid_disks <= 0:
        return None
    if working <= 0:
        return False
    if level == "raid1":
        return True
    if level in ("raid4", "raid5"):
        return working >= raid_disks - 1
    if level == "raid6":
        return working >= raid_disks - 2
    if level == "raid10" and status is not None and len(status) == raid_disks:
        return raid10_enough(status, near_copies, far_copies)
    return None
