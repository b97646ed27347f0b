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
