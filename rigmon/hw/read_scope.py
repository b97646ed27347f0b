"""Read scopes: one sampler tick's file reads and directory listings, done once per tick."""

from __future__ import annotations

import threading
from types import TracebackType


class ThreadScope(threading.local):
    """The calling thread's open read scope (see `read_scope`): ``None`` outside one."""

    #: Bytes read in the scope (``None``: absent) and the read's limits, by real path.
    reads: dict[str, tuple[int, int, bytes | None]] | None = None
    #: Directory listings done in the scope, by real path.
    listings: dict[str, list[str]] | None = None
    #: Directory listings with inode numbers (`HostRoot.listdir_inodes`) done in the scope, by real path.
    inode_listings: dict[str, list[tuple[str, int]]] | None = None


#: The read scope of each thread, shared by every `HostRoot`.
SCOPE = ThreadScope()


class ReadScope:
    """A read scope on the calling thread, for every `HostRoot` (see `read_scope`).

    Inside it, a file read or a directory listing that was already done in the scope (by
    another collector of the same batch) is not done again: the first reading is returned
    (files by the same limits; an absent file stays absent until the scope ends). Outside a
    scope (udev re-reads, tests, other threads) every call reads afresh. Host and psu_hwmon both
    list ``/sys/class/hwmon`` and read the PSUs' ``temp1_input``; disks and raid both read
    ``/proc/diskstats``. The scope lives as long as the ``with`` block, never by age: a vanished
    file is absent at the next scope's first read. A scope opened inside another one is part of it.
    """

    __slots__ = ("_outer",)

    def __init__(self) -> None:
        self._outer = True

    def __enter__(self) -> None:
        self._outer = SCOPE.reads is None
        if self._outer:
            SCOPE.reads = {}
            SCOPE.listings = {}
            SCOPE.inode_listings = {}

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._outer:
            SCOPE.reads = None
            SCOPE.listings = None
            SCOPE.inode_listings = None


def read_scope() -> ReadScope:
    """A read scope for ``with``: one sampler tick's collectors (see `ReadScope`)."""
    return ReadScope()
