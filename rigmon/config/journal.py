"""``[journal]``: the flight recorder's retention."""

from __future__ import annotations

import msgspec

from rigmon.config.common import check_ranges


class JournalSection(msgspec.Struct, frozen=True, gc=False):
    """``[journal]``: the flight recorder's retention (SQLite in the agent's state directory).

    Whole frames are kept for ``frames_keep_h``; per-series min/mean/max in 1-minute
    buckets for ``minute_keep_h`` and in 15-minute buckets for ``quarter_keep_h``. When
    the file grows past ``max_mb`` the oldest frames go first, then the oldest buckets.
    """

    enabled: bool = True
    frames_keep_h: float = 48.0
    minute_keep_h: float = 24.0 * 30
    quarter_keep_h: float = 24.0 * 400
    max_mb: float = 2048.0
    commit_interval_s: float = 0.5
    """Longest time a frame waits in memory before it is committed."""
    queue_frames: int = 600
    """Frames waiting for the writer thread; beyond this new frames are dropped (and reported)."""

    def __post_init__(self) -> None:
        if self.commit_interval_s > 1.0:
            raise ValueError("commit_interval_s must be at most 1 (a crash may lose only about a second)")
        check_ranges(self, {
            "frames_keep_h": (0.01, 24.0 * 3660), "minute_keep_h": (0.01, 24.0 * 3660),
            "quarter_keep_h": (0.01, 24.0 * 3660), "max_mb": (1.0, 1024.0 * 1024),
            "commit_interval_s": (0.001, 1.0), "queue_frames": (1, 1_000_000),
        })
