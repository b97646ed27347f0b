"""udev's matching of one rule line against a tty in a fake sysfs tree, as systemd-udevd does it (udev(7)):
``SUBSYSTEM``/``KERNEL`` test the device itself; ``KERNELS``, ``SUBSYSTEMS``, ``DRIVERS`` and ``ATTRS{...}``
search the device and its parents, and all of them must match on the same one."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

_KEY = re.compile(r'\s*([A-Z_]+)(?:\{([^}]*)\})?\s*(==|!=|\+=|:=|=)\s*"([^"]*)"\s*(?:,|$)')
PARENT_KEYS = ("KERNELS", "SUBSYSTEMS", "DRIVERS", "ATTRS")


def parse_rule(line: str) -> list[tuple[str, str | None, str, str]]:
    """(key, attribute, operator, value) of each ``KEY{attr}=="value"`` of a rule line."""
    line = line.strip()
    keys, pos = [], 0
    while pos < len(line):
        m = _KEY.match(line, pos)
        assert m is not None, f"cannot parse the rule from {line[pos:]!r}"
        keys.append((m.group(1), m.group(2), m.group(3), m.group(4)))
        pos = m.end()
    return keys


def _chain(root: Path, tty: str) -> list[Path]:
    """The tty class device and its parents up to (not including) ``/sys/devices``."""
    dev = (root / "sys/class/tty" / tty).resolve()
    stop = (root / "sys/devices").resolve()
    out = []
    while dev != stop and stop in dev.parents:
        out.append(dev)
        dev = dev.parent
    return out


def _attr(dev: Path, name: str) -> str | None:
    path = dev / name
    return path.read_text().rstrip("\n") if path.is_file() else None


def _parent_matches(dev: Path, key: str, attr: str | None, value: str) -> bool:
    if key == "KERNELS":
        return fnmatch.fnmatchcase(dev.name, value)
    if key == "ATTRS":
        held = _attr(dev, attr or "")
        return held is not None and fnmatch.fnmatchcase(held.strip(), value)
    link = dev / ("subsystem" if key == "SUBSYSTEMS" else "driver")
    return link.is_symlink() and fnmatch.fnmatchcase(Path(link.readlink()).name, value)


def rule_matches(line: str, root: Path, tty: str) -> bool:
    """Whether the rule line's match keys all match ``/sys/class/tty/TTY`` below ``root``."""
    keys = [k for k in parse_rule(line) if k[2] in ("==", "!=")]
    chain = _chain(root, tty)
    for key, _, op, value in keys:
        if key == "SUBSYSTEM" and (value == "tty") != (op == "=="):
            return False
        if key == "KERNEL" and fnmatch.fnmatchcase(tty, value) != (op == "=="):
            return False
    parent = [k for k in keys if k[0] in PARENT_KEYS]
    return not parent or any(all(_parent_matches(dev, key, attr, value) for key, attr, _, value in parent)
                             for dev in chain)


def symlinks(line: str) -> list[str]:
    """The names a rule line gives (``SYMLINK+=``)."""
    return [v for k, _, op, v in parse_rule(line) if k == "SYMLINK" and op in ("+=", "=")]
