"""Whether the agent's service can reach this installation of rigmon: paths it cannot see or read."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

#: Where the unit's sandbox hides files from the service, and which of its settings does.
HIDDEN_BY = {
    "/root/": "ProtectHome=yes", "/home/": "ProtectHome=yes", "/run/user/": "ProtectHome=yes",
    # PrivateTmp=yes gives the service an empty /tmp and /var/tmp of its own: a venv made there
    # (python -m venv /tmp/...) is not found, and the unit fails at every start.
    "/tmp/": "PrivateTmp=yes: the service has an empty /tmp of its own",
    "/var/tmp/": "PrivateTmp=yes: the service has an empty /var/tmp of its own",
}
HIDDEN_PREFIXES = tuple(HIDDEN_BY)
#: The shell that tests access as the service's user (`test -r` asks the kernel, ACLs included).
SHELL = "/bin/sh"
#: Runs ``test FLAG PATH`` for each pair of arguments; prints the first path that fails and exits 1.
_ACCESS_SCRIPT = 'while [ "$#" -gt 1 ]; do test "$1" "$2" || { printf "%s" "$2"; exit 1; }; shift 2; done'
#: How long the access check as the service's user may take (a shell and a few ``access`` calls).
ACCESS_TIMEOUT_S = 10.0


def hidden_from_service(exec_start: tuple[str, ...], interpreter: str | None = None) -> str | None:
    """A path the service needs but cannot reach (under /root, /home or /tmp: `HIDDEN_BY`), or None.

    The script, the package, and the interpreter behind the venv's ``python`` symlink (a
    pipx venv made with a pyenv Python under /root runs that Python).
    """
    import rigmon

    real_python = os.path.realpath(interpreter or sys.executable)
    for path in (exec_start[0], str(Path(rigmon.__file__).parent), real_python):
        if path.startswith(HIDDEN_PREFIXES):
            return path
    return None


def hidden_because(path: str) -> str:
    """Which setting of the unit hides ``path`` (one `hidden_from_service` returned) from the service."""
    return next((why for prefix, why in HIDDEN_BY.items() if path.startswith(prefix)), "")


def _needs(exec_start: tuple[str, ...], interpreter: str | None,
           module: str | None) -> list[tuple[str, str]]:
    """Each (path, ``test`` flags) the service needs, every directory above a file first (searched).

    The script must be read and run, the package's modules read, the interpreter (behind the venv's
    ``python`` symlink) run. Paths that are not there are left out: nothing to say about them here.
    """
    import rigmon

    out: list[tuple[str, str]] = []
    for path, flags in ((exec_start[0], "-r -x"), (module or rigmon.__file__, "-r"),
                        (os.path.realpath(interpreter or sys.executable), "-x")):
        if not os.path.exists(path):
            continue
        out += [(str(directory), "-x") for directory in reversed(Path(path).parents)]
        out.append((path, flags))
    return out


def unreadable_by_service(exec_start: tuple[str, ...], interpreter: str | None = None,
                          module: str | None = None, user: str | None = None) -> tuple[str, int] | None:
    """A path of this installation that the service's user cannot reach, with its mode, or None.

    An installation made under a umask of 027 or 077 (hardened hosts) cannot be read by the
    service's user: the unit then fails at every start while set-up said it was done. When that
    user exists and this runs as root, the check runs as that user (its groups, and the files'
    ACLs, count as the kernel counts them); otherwise the user is one set-up has yet to create,
    which owns none of the files and is in none of their groups, so the bits for others decide.

    Args:
        module: a module of the installed package (default: this ``rigmon/__init__.py``).
        user: the service's user.
    """
    needs = _needs(exec_start, interpreter, module)
    account = _account(user)
    if account is not None and os.geteuid() == 0:
        failed = _first_denied_as(account, needs)
    else:
        failed = _first_denied_to_others(needs)
    if failed is None:
        return None
    return failed, stat.S_IMODE(os.stat(failed).st_mode)


def _account(user: str | None) -> pwd.struct_passwd | None:
    if not user:
        return None
    try:
        return pwd.getpwnam(user)
    except KeyError:
        return None


def _first_denied_to_others(needs: list[tuple[str, str]]) -> str | None:
    """The first path whose bits for others lack what is needed."""
    bits = {"-r": stat.S_IROTH, "-x": stat.S_IXOTH}
    for path, flags in needs:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue
        if any(not mode & bits[flag] for flag in flags.split()):
            return path
    return None


def _first_denied_as(account: pwd.struct_passwd, needs: list[tuple[str, str]]) -> str | None:
    """The first path the user cannot use as needed, asked of the kernel in a shell run as that user."""
    args = [arg for path, flags in needs for flag in flags.split() for arg in (flag, path)]
    try:
        done = subprocess.run([SHELL, "-c", _ACCESS_SCRIPT, "sh", *args], user=account.pw_uid,
                              group=account.pw_gid, extra_groups=os.getgrouplist(account.pw_name, account.pw_gid),
                              capture_output=True, text=True, timeout=ACCESS_TIMEOUT_S, cwd="/", check=False)
    except (OSError, subprocess.SubprocessError):
        return _first_denied_to_others(needs)  # no shell to ask: the bits for others, as for a new user
    if done.returncode == 0:
        return None
    failed = done.stdout
    return failed if any(failed == path for path, _ in needs) else _first_denied_to_others(needs)
