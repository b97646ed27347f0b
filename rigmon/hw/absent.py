"""Which read errors mean "absent right now", and a non-blocking open that returns ``None`` for them."""

from __future__ import annotations

import errno
import os

# Errors that mean "this attribute is not available right now" rather than a bug:
# the file vanished (device unplugged), the device is gone (ENODEV/ENXIO), the driver
# cannot answer without blocking (EAGAIN), or refuses the read for this device (EINVAL,
# EIO, EOPNOTSUPP are common for hwmon and PCIe attributes of a dying device).
ABSENT_ERRNOS = frozenset({
    errno.ENOENT,
    errno.ENOTDIR,
    errno.ENODEV,
    errno.ENXIO,
    errno.EAGAIN,
    errno.EINVAL,
    errno.EIO,
    errno.EOPNOTSUPP,
    errno.ENODATA,
    # A /proc/PID file of a process that was reaped while its file was open.
    errno.ESRCH,
    # Drivers refusing a read for now: a PMBus PSU's I2C client that does not answer
    # (EREMOTEIO, common on paralleled server PSUs), amdgpu's hwmon files while the GPU is
    # runtime-suspended or in reset (EPERM), a NIC's firmware behind ``speed`` (ETIMEDOUT,
    # EBUSY), md's attributes of an array being stopped (EBUSY).
    errno.EREMOTEIO,
    errno.EPERM,
    errno.ETIMEDOUT,
    errno.EBUSY,
    # Not permitted to this user, at the open or (a driver's show() refusing) at the read.
    errno.EACCES,
    # Not a file any more: a directory where an attribute was (a driver rebound with another
    # layout, a tree written half-way), or a symlink that leads round in a loop.
    errno.EISDIR,
    errno.ELOOP,
    # A name built from a value read from the hardware, longer than a file name may be.
    errno.ENAMETOOLONG,
})


def open_or_none(path: str) -> int | None:
    """A read-only, non-blocking descriptor of ``path``; ``None`` when it is absent or not readable.

    Raises:
        OSError: for an error not in `ABSENT_ERRNOS` (a bug, or the process out of descriptors).
    """
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in ABSENT_ERRNOS:
            return None
        raise
    except ValueError:
        # A NUL in the path: a name built from a value read from the hardware (an NVMe
        # controller's ``address`` with a NUL in it) names no file.
        return None
