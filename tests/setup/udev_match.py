"""udev's matching of one rule line against a tty in a fake sysfs tree, as systemd-udevd does it (udev(7)):
``SUBSYSTEM``/``KERNEL`` test the device itself; ``KERNELS``, ``SUBSYSTEMS``, ``DRIVERS`` and ``ATTRS{...}``
search the device and its parents, and all of them must match on the same one."""

from __future__ import annotations

import re
from pathlib import Path

# A value runs to the first `"` that no backslash precedes: newer udev (systemd 247+) reads `\\"` as a quote in it.
_KEY = re.compile(r'\s*([A-Z_]+)(?:\{([^}]*)\})?\s*(==|!=|\+=|:=|=)\s*"((?:\\"|[^"])*)"\s*(?:,|$)')
PARENT_KEYS = ("KERNELS", "SUBSYSTEMS", "DRIVERS", "ATTRS")


def parse_rule(line: str) -> list[tuple[str, str | None, str, str]]:
    """(key, attribute, operator, value) of each ``KEY{attr}=="value"`` of a rule line."""
    line = line.strip()
    keys, pos = [], 0
    while pos < len(line):
        m = _KEY.match(line, pos)
        assert m is not None, f"cannot parse the rule from {line[pos:]!r}"
        keys.append((m.group(1), m.group(2), m.group(3), m.group(4).replace('\\"', '"')))
        pos = m.end()
    return keys


def _glob(pattern: str) -> re.Pattern[str]:
    """C fnmatch(3) without flags, as udev calls it: ``*``, ``?``, ``[...]`` (``!`` negates), and a backslash
    making the next character literal (Python's fnmatch has no escape)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1:i + 2] in ("!", "]") else i + 1)
            if end > 0:
                body = pattern[i + 1:end]
                negate = body.startswith("!")
                chars = "".join(re.escape(x) if x != "-" else "-" for x in body[negate:])
                out.append(f"[{'^' if negate else ''}{chars}]")
                i = end + 1
                continue
        out.append(".*" if c == "*" else "." if c == "?" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def udev_value_matches(value: str, held: str) -> bool:
    """Whether a rule's match value matches ``held`` as udev does: ``|`` separates alternative patterns, and
    one without ``*``, ``?`` or ``[`` is compared as it is (a backslash in it is itself)."""
    return any(_glob(alternative).fullmatch(held) if any(c in alternative for c in "*?[") else alternative == held
               for alternative in value.split("|"))


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
        return udev_value_matches(value, dev.name)
    if key == "ATTRS":
        held = _attr(dev, attr or "")
        return held is not None and udev_value_matches(value, held.strip())
    link = dev / ("subsystem" if key == "SUBSYSTEMS" else "driver")
    return link.is_symlink() and udev_value_matches(value, Path(link.readlink()).name)


def rule_matches(line: str, root: Path, tty: str) -> bool:
    """Whether the rule line's match keys all match ``/sys/class/tty/TTY`` below ``root``."""
    keys = [k for k in parse_rule(line) if k[2] in ("==", "!=")]
    chain = _chain(root, tty)
    for key, _, op, value in keys:
        if key == "SUBSYSTEM" and (value == "tty") != (op == "=="):
            return False
        if key == "KERNEL" and udev_value_matches(value, tty) != (op == "=="):
            return False
    parent = [k for k in keys if k[0] in PARENT_KEYS]
    return not parent or any(all(_parent_matches(dev, key, attr, value) for key, attr, _, value in parent)
                             for dev in chain)


def symlinks(line: str) -> list[str]:
    """The names a rule line gives (``SYMLINK+=``)."""
    return [v for k, _, op, v in parse_rule(line) if k == "SYMLINK" and op in ("+=", "=")]
