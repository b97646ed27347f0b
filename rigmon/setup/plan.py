"""Applying set-up steps below a root: files written only when they change, commands only on the real system."""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path


class Installer:
    """Writes, removes and runs, saying what it did, with ``--dry-run`` and ``--root`` semantics.

    Args:
        root: directory standing for ``/``; every path is below it. Not ``/`` (a test, a
            package build): commands (useradd, systemctl, udevadm) are not run, only listed,
            and files keep the invoking user as owner.
        dry_run: say what would happen; change nothing.
    """

    def __init__(self, root: str | os.PathLike[str] = "/", dry_run: bool = False) -> None:
        self.root = Path(root)
        self.real = self.root.resolve() == Path("/")
        self.dry_run = dry_run
        self.lines: list[str] = []
        self.previews: list[tuple[str, str]] = []
        """In a dry run: (path, text) of the configuration files that would be written."""
        self.failed = False
        self.changed = False
        self.warnings = 0
        """How many ``warning:`` lines were said: done, but something needs the operator's attention."""

    def path(self, rel: str) -> Path:
        """Where ``rel`` (an absolute path on the node) is below the root."""
        return self.root / rel.lstrip("/")

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` is in place (a symbolic link counts); True, said once, when this user cannot tell
        (a dry run by a user that cannot enter a private directory such as a tightened /etc/rigmon)."""
        path = self.path(rel)
        try:
            return path.exists() or path.is_symlink()
        except OSError as exc:
            line = f"cannot tell whether {rel} is in place: this user cannot reach it ({exc.strerror or exc})"
            if line not in self.lines:
                self.say(line)
            return True

    def say(self, text: str) -> None:
        """Record one line of the report."""
        self.lines.append(text)

    def warn(self, text: str) -> None:
        """Record a ``warning:`` line: the step is done, but its result needs the operator's attention."""
        self.say(f"warning: {text}")
        self.warnings += 1

    def _owner(self, path: Path, user: str | None) -> None:
        if user and self.real:
            entry = pwd.getpwnam(user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def mkdir(self, rel: str, mode: int = 0o755) -> None:
        """Create a directory (and parents) unless it exists."""
        path = self.path(rel)
        if path.is_dir():
            return
        self.changed = True
        if self.dry_run:
            self.say(f"would create {rel}/")
            return
        path.mkdir(parents=True, mode=mode)
        path.chmod(mode)
        self.say(f"created {rel}/")

    def write(self, rel: str, content: bytes, mode: int, owner: str | None = None, keep: bool = False,
              what: str = "") -> bool:
        """Write a file unless it already holds ``content``; with ``keep``, never replace one.

        The file is written to a temporary name and renamed, with its mode (and owner) set
        before the rename, so a secret is never readable by others, even for a moment.

        Returns:
            Whether the file is (or would be) written.
        """
        path = self.path(rel)
        label = f"{rel}{f' ({what})' if what else ''}"
        try:
            exists = path.exists()
            held = path.read_bytes() if exists else None
        except OSError as exc:
            # A dry run by a user who cannot read root's secrets (mode 600) still shows the plan.
            return self._unreadable(rel, label, mode, owner, keep, exc)
        if held is not None and (keep or held == content):
            if not keep:
                self._fix_mode(path, rel, mode, owner)
            self.say(f"kept {label}" if keep and held != content else f"unchanged {label}")
            return False
        self.changed = True
        verb = "updated" if exists else "created"
        if self.dry_run:
            self.say(f"would {'update' if exists else 'create'} {label}, mode {mode:o}"
                     + (f", owner {owner}" if owner else ""))
            if mode & 0o044:
                self.previews.append((rel, content.decode(errors="replace")))
            return True
        tmp = path.with_name(f".{path.name}.rigmon-setup")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, content)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            self._owner(tmp, owner)
            os.replace(tmp, path)
        except OSError as exc:
            self.say(f"FAILED: write {label}: {exc.strerror or exc}")
            self.failed = True
            return False
        self.say(f"{verb} {label}, mode {mode:o}" + (f", owner {owner}" if owner and self.real else ""))
        return True

    def _unreadable(self, rel: str, label: str, mode: int, owner: str | None, keep: bool, exc: OSError) -> bool:
        """Say what happens to a file in place that this user cannot read; a real run fails there."""
        why = exc.strerror or str(exc)
        if not self.dry_run:
            self.say(f"FAILED: cannot read {rel}: {why}")
            self.failed = True
            return False
        if keep:
            self.say(f"kept {label}: this user cannot read it ({why})")
            return False
        self.changed = True
        self.say(f"would update {label} if it differs, mode {mode:o}" + (f", owner {owner}" if owner else "")
                 + f": this user cannot read it ({why})")
        return True

    def _fix_mode(self, path: Path, rel: str, mode: int, owner: str | None) -> None:
        if self.dry_run:
            return
        if (path.stat().st_mode & 0o7777) != mode:
            path.chmod(mode)
            self.say(f"set mode {mode:o} on {rel}")
        self._owner(path, owner)

    def keep_private(self, rel: str, owner: str | None) -> None:
        """Make an existing secret mode 600 and owned by ``owner`` (a re-run repairs them)."""
        path = self.path(rel)
        if not self.dry_run and path.exists():
            self._fix_mode(path, rel, 0o600, owner)

    def remove(self, rel: str) -> None:
        """Remove a file (or an empty directory) if it is there."""
        path = self.path(rel)
        if not self.exists(rel):
            return
        self.changed = True
        if self.dry_run:
            self.say(f"would remove {rel}")
            return
        if path.is_dir() and not path.is_symlink():
            try:
                path.rmdir()
            except OSError:
                left = ", ".join(sorted(p.name for p in path.iterdir()))
                self.say(f"kept {rel}/ (not empty: {left})")
                return
        else:
            path.unlink()
        self.say(f"removed {rel}")

    def remove_tree(self, rel: str) -> None:
        """Remove a directory and everything in it (the state directory, with --purge)."""
        import shutil

        path = self.path(rel)
        if not self.exists(rel):
            return
        self.changed = True
        if self.dry_run:
            self.say(f"would remove {rel}/ and everything in it")
            return
        shutil.rmtree(path)
        self.say(f"removed {rel}/ and everything in it")

    def run(self, argv: Sequence[str], why: str = "", check: bool = True) -> bool:
        """Run a command on the real system (never below another root, never in a dry run).

        Returns:
            Whether it ran and succeeded (``True`` when it is only listed).
        """
        text = shlex.join(argv)
        if not self.real:
            self.say(f"not run (--root {self.root}): {text}")
            return True
        if self.dry_run:
            self.say(f"would run: {text}")
            return True
        try:
            result = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._run_failed(check, f"{text}: {exc}{'; ' + why if why else ''}")
            return False
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            self._run_failed(check, f"{text}: {detail[-1] if detail else f'exit {result.returncode}'}"
                             + (f"; {why}" if why else ""))
            return False
        self.say(f"ran: {text}")
        return True

    def _run_failed(self, check: bool, said: str) -> None:
        """A command that failed: the setup fails with ``check``; else it goes on, with a warning."""
        if check:
            self.say(f"FAILED: {said}")
            self.failed = True
        else:
            self.warn(f"failed: {said}")
