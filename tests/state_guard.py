"""The machine's real rigmon state, fingerprinted, so the suite can prove it left it alone.

`tests/conftest.py` points every agent the suite starts at temporary directories and compares
a fingerprint of the real default paths taken before the run with one taken after it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

#: One entry of a fingerprint: file type, mode, size, modification time (ns), inode.
Entry = tuple[str, int, int, int, int]


def real_default_paths(environ: Mapping[str, str], repo: Path) -> list[Path]:
    """Where rigmon keeps state on a real machine for the user running the suite.

    The system-wide state and configuration, the user's rigmon config, data and state
    directories (as the environment names them before the suite redirects it), and the
    export files the dashboard once dropped into the current directory (the checkout).
    """
    home = Path(environ.get("HOME") or Path.home())

    def xdg(var: str, default: str) -> Path:
        return Path(environ.get(var) or home / default) / "rigmon"

    return [
        Path("/var/lib/rigmon"),
        Path("/etc/rigmon"),
        Path("/etc/systemd/system/rigmon-agent.service"),
        Path("/etc/udev/rules.d/99-rigmon-adc.rules"),
        xdg("XDG_CONFIG_HOME", ".config"),
        xdg("XDG_DATA_HOME", ".local/share"),
        xdg("XDG_STATE_HOME", ".local/state"),
        repo / "rigmon-dash-*",
    ]


def _entry(st: os.stat_result) -> Entry:
    kind = "dir" if stat.S_ISDIR(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "file"
    # A directory's size and mtime change whenever an entry is added or removed, which the
    # entries themselves show; its mode and inode still count.
    if kind == "dir":
        return (kind, stat.S_IMODE(st.st_mode), 0, 0, st.st_ino)
    return (kind, stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino)


def fingerprint(paths: Iterable[Path]) -> dict[str, Entry]:
    """Every file and directory under ``paths`` (absent ones are simply not listed).

    Symbolic links are recorded, not followed. A glob pattern among ``paths`` (``*``) lists
    what matches it now, so files that appear later show as new.
    """
    out: dict[str, Entry] = {}
    for path in paths:
        matches = sorted(path.parent.glob(path.name)) if "*" in path.name else [path]
        for top in matches:
            try:
                st = top.lstat()
            except OSError:
                continue
            out[str(top)] = _entry(st)
            if not stat.S_ISDIR(st.st_mode):
                continue
            for base, dirs, files in os.walk(top):
                for name in [*dirs, *files]:
                    full = os.path.join(base, name)
                    try:
                        out[full] = _entry(os.lstat(full))
                    except OSError:
                        continue
    return out


def differences(before: Mapping[str, Entry], after: Mapping[str, Entry]) -> list[str]:
    """Lines saying what appeared, disappeared or changed between two fingerprints."""
    lines = [f"created  {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"removed  {p}" for p in sorted(before.keys() - after.keys())]
    lines += [f"modified {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return lines
