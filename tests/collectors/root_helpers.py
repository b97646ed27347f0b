"""Test roots that note what a collector does with the tree."""

from __future__ import annotations

from pathlib import Path

from rigmon.hw.root import HostRoot


class ListLog(HostRoot):
    """A root that notes every directory listed through it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.listed: list[str] = []

    def listdir(self, rel: str) -> list[str]:
        self.listed.append(rel)
        return super().listdir(rel)

    def listdir_inodes(self, rel: str) -> list[tuple[str, int]]:
        self.listed.append(rel)
        return super().listdir_inodes(rel)


class ReadLog(ListLog):
    """A root that notes every directory listed and every file read through it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.read: list[str] = []

    def _read(self, rel: str, max_bytes: int, whole_below: int) -> bytes | None:
        self.read.append(rel)
        return super()._read(rel, max_bytes, whole_below)


def write_byte_tree(root: Path, files: dict[bytes, bytes]) -> None:
    """Files at paths given in bytes (a name the kernel gave in bytes that are not UTF-8), each
    path relative to ``root``; a value that starts with ``-> `` makes a symlink to the rest."""
    import os

    base = os.fsencode(root)
    for rel, content in files.items():
        path = os.path.join(base, rel.lstrip(b"/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if content.startswith(b"-> "):
            os.symlink(content[3:], path)
            continue
        with open(path, "wb") as fh:
            fh.write(content)
