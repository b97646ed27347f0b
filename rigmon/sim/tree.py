"""Tree: writes a fake machine's files (/proc, /sys, /dev) below a root directory."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path


class TreeGone(FileNotFoundError):
    """The tree's root directory was removed (its rig's temporary directory, at the rig's end): a
    writer stops here instead of creating the root again, with files no one will remove."""


class Tree:
    """A directory standing for ``/`` of a simulated machine.

    Files are replaced atomically (write a temporary file, then rename), so a collector
    reading concurrently sees the old or the new content, never half of it. Never in place,
    not even with content of the same length: `rigmon.hw.root.HostRoot` keeps descriptors of
    these files open and reads them with ``pread``, as it does sysfs attributes on a real node,
    and tells a replaced file by its lost name (``st_nlink == 0``); a ``pwrite`` into the file
    it reads would not be atomic against that ``pread`` (ext4 and tmpfs reads take no inode
    lock). Removed files are unlinked (a directory with everything below it). A file whose
    content is what this tree last wrote there, and which still exists, is left alone: a
    simulated node rewrites a few hundred files ten times a second and most of them (model
    names, limits, link speeds) do not change, and the rename is most of a step's cost.

    The root is created once, here; a write never creates it again: once it is removed, every
    write raises `TreeGone` (directories below the root are created as needed).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._written: dict[str, bytes] = {}

    def path(self, rel: str) -> Path:
        """Real path of ``rel`` (``/proc/stat`` -> ``ROOT/proc/stat``)."""
        return self.root / rel.lstrip("/")

    def write(self, rel: str, content: str | bytes) -> None:
        """Create or replace one file."""
        data = content.encode() if isinstance(content, str) else content
        target = self.path(rel)
        key = str(target)
        if self._written.get(key) == data and os.path.exists(key):
            return
        with self._below_root():
            self._make_dir(target.parent)
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
        self._written[key] = data

    def append(self, rel: str, content: str) -> None:
        """Append to a file (kernel log), creating it if needed."""
        target = self.path(rel)
        self._written.pop(str(target), None)
        with self._below_root():
            self._make_dir(target.parent)
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(content)

    def remove(self, rel: str) -> None:
        """Remove a file or a whole directory (a device unplugged); absent is fine."""
        target = self.path(rel)
        self._forget_below(target)
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)

    def renew_dir(self, rel: str) -> None:
        """Replace directory ``rel`` (if any) by a new, empty one, as the kernel registers a device
        again under a name it gave out before (a driver reloaded: ``hwmonN`` again): a new directory
        with a new inode number, never the old one emptied. The old one is moved out of the tree
        before the new one is made, so the two never share an inode number, then removed."""
        target = self.path(rel)
        self._forget_below(target)
        with self._below_root():
            self._make_dir(target.parent)
            if target.is_dir() and not target.is_symlink():
                graveyard = tempfile.mkdtemp(prefix=".unregistered-", dir=self.root)
                os.rename(target, os.path.join(graveyard, target.name))
                target.mkdir()
                shutil.rmtree(graveyard)
                return
            if target.is_symlink() or target.exists():
                target.unlink()
            target.mkdir()

    def symlink(self, rel: str, target: str) -> None:
        """Create or replace a symlink (sysfs ``device`` links). A replaced link is replaced by a
        rename, as files are: a reader sees the old link or the new one, and the new one never
        has the old one's inode number (a ``/sys/class/hwmon`` entry registered again)."""
        link = self.path(rel)
        self._written.pop(str(link), None)
        with self._below_root():
            self._make_dir(link.parent)
            tmp = link.with_name(f".{link.name}.tmp")
            if tmp.is_symlink() or tmp.exists():
                tmp.unlink()
            os.symlink(target, tmp)
            os.replace(tmp, link)

    def _forget_below(self, target: Path) -> None:
        """Forget what this tree wrote at ``target`` and below it (about to be removed)."""
        prefix = f"{target}{os.sep}"
        for key in [k for k in self._written if k == str(target) or k.startswith(prefix)]:
            del self._written[key]

    def _make_dir(self, path: Path) -> None:
        """Create directory ``path`` and the missing ones above it, up to the root but never the root.

        Raises:
            FileNotFoundError: the root does not exist (any more).
        """
        if path == self.root:
            if not path.is_dir():
                raise FileNotFoundError(f"{path} does not exist")
            return
        try:
            path.mkdir()
        except FileExistsError:
            return
        except FileNotFoundError:
            self._make_dir(path.parent)
            path.mkdir(exist_ok=True)

    @contextlib.contextmanager
    def _below_root(self) -> Iterator[None]:
        """Turn a missing file or directory into `TreeGone` when it is missing because the root is."""
        try:
            yield
        except FileNotFoundError as exc:
            if isinstance(exc, TreeGone) or self.root.is_dir():
                raise
            raise TreeGone(f"{self.root} was removed") from None


def write_tree(root: str | os.PathLike[str], files: Mapping[str, str | bytes]) -> Tree:
    """Write a small fake machine for a test: ``{"/proc/loadavg": "0.1 0.2 0.3 1/2 3\\n"}``."""
    tree = Tree(root)
    for rel, content in files.items():
        tree.write(rel, content)
    return tree
