"""Reads a driver refuses: an errno at the read of a file (below `HostRoot`), as the kernel answers
for an attribute whose driver cannot give it now (amdgpu suspended: EPERM; a PMBus PSU's I2C client
that NAKs: EREMOTEIO; md stopping an array: EBUSY)."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest


def refuse_reads(monkeypatch: pytest.MonkeyPatch, refusal: Callable[[str], int | None]) -> None:
    """Make every read of a file for which ``refusal(path)`` gives an errno fail with it, each time
    the file is read (open still succeeds, as for a sysfs attribute)."""
    real_open, real_read, real_pread = os.open, os.read, os.pread
    refused: dict[int, int] = {}

    def opening(path: str | bytes | os.PathLike[str], flags: int, *args: int) -> int:
        fd = real_open(path, flags, *args)
        code = refusal(os.fsdecode(path))
        if code:
            refused[fd] = code
        else:
            refused.pop(fd, None)  # a number a refused file had before it was closed
        return fd

    def check(fd: int) -> None:
        code = refused.get(fd)
        if code:
            raise OSError(code, os.strerror(code))

    def reading(fd: int, size: int) -> bytes:
        check(fd)
        return real_read(fd, size)

    def preading(fd: int, size: int, offset: int) -> bytes:
        check(fd)
        return real_pread(fd, size, offset)

    monkeypatch.setattr(os, "open", opening)
    monkeypatch.setattr(os, "read", reading)
    monkeypatch.setattr(os, "pread", preading)
