"""One thread's kept-open descriptors of files read every tick (see `rigmon.hw.root.HostRoot`)."""

from __future__ import annotations

import os

#: Descriptors of kernel-generated files one thread keeps open (see `HostRoot`); a node reads a
#: few hundred attributes a tick. Also at most an eighth of the process's descriptor limit.
MAX_KEPT_FDS = 256
#: Stands for the descriptor of a tree file that was replaced while kept: opened for every read.
CHURNS = -1


class KeptFds(dict[str, tuple[int, bool]]):
    """One thread's kept-open descriptors by real path, oldest first; closed with the thread.

    Each value is the descriptor (or `CHURNS`) and whether its file must be checked for
    replacement after each read (a regular file of a tree, see `HostRoot`); a kernel-generated
    file need not be."""

    def __del__(self) -> None:
        for fd, _ in self.values():
            if fd == CHURNS:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        self.clear()
