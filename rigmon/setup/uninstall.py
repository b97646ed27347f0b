"""``rigmon setup agent --uninstall``: remove what setup wrote, keeping what is the operator's until ``--purge``."""

from __future__ import annotations

import pwd

from rigmon.setup import render
from rigmon.setup.conffiles import (
    CONFFILES,
    RECORD,
    changed_since_written,
    read_record,
    write_record,
)
from rigmon.setup.plan import Installer
from rigmon.setup.udev_check import has_active_rules

#: The node's tokens and certificate: its dashboards and Prometheus hold copies (token files, ``ca_file``),
#: and a new `setup agent` keeps those in place, so an uninstall to reinstall leaves every client working.
#: Kept until ``--purge``, as Debian keeps a package's generated host keys until it is purged.
IDENTITY = (render.READ_TOKEN, render.CONTROL_TOKEN, render.TLS_CERT, render.TLS_KEY)
#: The unit's drop-in directory (``systemctl edit rigmon-agent``): the operator's changes to the unit, never
#: written by setup (which rewrites the unit itself on every run and says to keep changes here).
DROP_INS = render.UNIT_FILE + ".d"


def why_kept(installer: Installer, rel: str, records: dict[str, str] | None) -> str | None:
    """Why an uninstall without ``--purge`` keeps the conffile ``rel`` in place, or ``None`` to remove it.

    Args:
        records: the record of what setup wrote (`read_record`), ``None`` when this user cannot read it.
    """
    path = installer.path(rel)
    try:
        changed = changed_since_written(path, (records or {}).get(rel))
    except OSError as exc:
        return f"this user cannot read it to tell whether you changed it ({exc.strerror or exc})"
    if records is None:
        return f"this user cannot read {RECORD} to tell whether you changed it"
    if changed:
        return "changed since setup wrote it"
    if changed is False:
        return None
    # No record: written by a rigmon from before the record, or not by setup at all.
    if rel == render.UDEV_FILE:
        # What setup writes there is only comments: a line that is not one is the operator's.
        return "it has lines you uncommented" if has_active_rules(path) else None
    return f"setup has no record in {RECORD} of writing it as it is"


def uninstall(installer: Installer, user: str, purge: bool) -> None:
    """Stop the service and remove what `install` wrote.

    Without ``purge``, the configuration and udev rule an operator changed, the tokens and certificate,
    the journal and the user are kept, each said with why; with it, they go too.
    """
    if installer.exists(render.UNIT_FILE):
        installer.run(["systemctl", "disable", "--now", render.UNIT_NAME], check=False)
    installer.remove(render.UNIT_FILE)
    if installer.exists(DROP_INS):
        if purge:
            installer.remove_tree(DROP_INS)
        else:
            installer.say(f"kept {DROP_INS}/: your drop-ins for the unit (systemctl edit); a new setup agent uses "
                          "them again; --purge removes them")
    records = read_record(installer)
    kept = False
    for rel in CONFFILES:
        why = None if purge or not installer.exists(rel) else why_kept(installer, rel, records)
        if why is None:
            installer.remove(rel)
            if records is not None:
                records.pop(rel, None)
        else:
            installer.say(f"kept {rel}: {why}; --purge removes it")
            kept = True
    identity = [rel for rel in IDENTITY if installer.exists(rel)]
    if purge:
        for rel in identity:
            installer.remove(rel)
        installer.remove(RECORD)
    else:
        if records is not None:
            write_record(installer, records)
        if identity:
            installer.say(f"kept {', '.join(identity)}: the node's tokens and certificate, which its dashboards "
                          "and Prometheus hold; setup agent uses them again; --purge removes them")
            kept = True
    if not kept:
        installer.remove(render.CONFIG_DIR)
    if installer.changed:
        installer.run(["systemctl", "daemon-reload"], check=False)
        installer.run(["udevadm", "control", "--reload"], check=False)
    if purge:
        installer.remove_tree(render.STATE_DIR)
        try:
            exists = pwd.getpwnam(user) is not None if installer.real else True
        except KeyError:
            exists = False
        if exists:
            installer.run(["userdel", user])
    elif installer.exists(render.STATE_DIR):
        installer.say(f"kept {render.STATE_DIR}/ (the journal) and the user {user}: --purge removes them")
