"""What setup wrote of the files an operator may edit, so that an uninstall keeps the edited ones.

Debian keeps a package's conffiles' checksums for the same reason: setup records the SHA-256 of each
such file it wrote (or found holding what it would write), in ``sha256sum`` form, and an uninstall
without ``--purge`` removes a file only when it still holds what was recorded. The record is its own
file, not a comparison with what setup would render now: the rendering depends on the hardware found,
the flags and rigmon's version, all of which may differ at uninstall time.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rigmon.setup.render import CONFIG_DIR, CONFIG_FILE, UDEV_FILE

if TYPE_CHECKING:
    from rigmon.setup.plan import Installer

#: The record: one ``SHA256  /path`` line per file (``sha256sum -c`` it to see which you changed).
RECORD = f"{CONFIG_DIR}/setup-written.sha256"
#: The files setup writes that an operator edits: its configuration, the udev rule with a line uncommented.
CONFFILES = (CONFIG_FILE, UDEV_FILE)


def digest(content: bytes) -> str:
    """The SHA-256 of ``content``, in hex."""
    return hashlib.sha256(content).hexdigest()


def parse_record(text: str) -> dict[str, str]:
    """The ``path -> sha256`` of a record's text (pure); lines that are not ``HEX  /path`` are left out."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        hexdigest, _, path = line.partition("  ")
        if len(hexdigest) == 64 and path.startswith("/") and all(c in "0123456789abcdef" for c in hexdigest):
            out[path] = hexdigest
    return out


def format_record(records: dict[str, str]) -> str:
    """The text of a record (pure): ``sha256sum`` lines, sorted by path."""
    return "".join(f"{records[path]}  {path}\n" for path in sorted(records))


def read_record(installer: Installer) -> dict[str, str] | None:
    """The record in place; empty when there is none (an installation by an older rigmon), ``None`` when
    this user cannot read it (a dry run by a user who cannot enter a private /etc/rigmon)."""
    try:
        return parse_record(installer.path(RECORD).read_text(errors="replace"))
    except FileNotFoundError:
        return {}
    except OSError:
        return None


def write_record(installer: Installer, records: dict[str, str]) -> None:
    """Replace the record with ``records`` (none left: remove it). Not in a dry run; says nothing unless it fails."""
    if installer.dry_run:
        return
    path = installer.path(RECORD)
    try:
        if not records:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_name(f".{path.name}.rigmon-setup")
        tmp.write_text(format_record(records))
        tmp.chmod(0o644)
        os.replace(tmp, path)
    except OSError as exc:
        installer.warn(f"cannot record what setup wrote in {RECORD} ({exc.strerror or exc}): "
                       "`--uninstall` will keep the files it cannot tell you did not change")


def record_written(installer: Installer, written: dict[str, bytes]) -> None:
    """After an install: record each file of ``written`` (path -> what setup rendered) that holds that content.

    A kept file that differs (the operator's) keeps the record of what setup wrote before, if any.
    """
    before = read_record(installer)
    records = dict(before or {})
    for rel, content in written.items():
        try:
            held = installer.path(rel).read_bytes()
        except OSError:
            continue
        if held == content:
            records[rel] = digest(content)
    if records != before:
        write_record(installer, records)


def changed_since_written(path: Path, recorded: str | None) -> bool | None:
    """Whether the file at ``path`` differs from what setup recorded writing; ``None`` without a record.

    Raises:
        OSError: the file cannot be read.
    """
    held = path.read_bytes()
    if recorded is None:
        return None
    return digest(held) != recorded
