"""The downsampled tiers: their bucket widths and how one bucket of min/mean/max is stored."""

from __future__ import annotations

import json
import math
import zlib

from rigmon.series import Stats

#: Bucket widths of the downsampled tiers, finest first; each is computed from the one before.
TIERS_S = (60, 900)
#: A history answer aims at no more points per series than this; the tier is chosen for it.
MAX_POINTS = 1500
#: Buckets one maintenance pass computes per tier (keeps the writer responsive after a gap).
MAX_BUCKETS_PER_PASS = 240


def encode_bucket(stats: dict[str, Stats]) -> bytes:
    rows = {name: [s[0], float(f"{s[1] / s[3]:.7g}"), s[2], int(s[3])] for name, s in sorted(stats.items())}
    return zlib.compress(json.dumps(rows, separators=(",", ":")).encode(), 6)


def decode_bucket(body: bytes) -> dict[str, Stats]:
    rows: dict[str, list[float]] = json.loads(zlib.decompress(body))
    return {name: [lo, mean * count, hi, float(count)] for name, (lo, mean, hi, count) in rows.items()}


def floor_to(t: float, step: int) -> float:
    return float(math.floor(t / step) * step)

