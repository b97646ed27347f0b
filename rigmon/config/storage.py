"""``[storage]``: disks, md arrays, NVMe, Thunderbolt/USB4 and network links."""

from __future__ import annotations

import msgspec

from rigmon.config.common import check_ranges


class StorageSection(msgspec.Struct, frozen=True, gc=False):
    """``[storage]``: disks, md arrays, NVMe, Thunderbolt/USB4 and network links."""

    udev: bool = True
    """Re-read at once on udev events (polling stays the ground truth; no udev is quiet)."""
    thunderbolt_expected_gbps: dict[str, float] = msgspec.field(default_factory=dict)
    """Expected bandwidth per direction (Gb/s, speed x lanes) per link, keyed by router name
    (``0-1``) or ``unique_id``; unlisted links expect their generation's nominal rate."""
    infiniband_expected_gbps: dict[str, float] = msgspec.field(default_factory=dict)
    """Expected rate (Gb/s) per RDMA port, keyed ``<device>/<port>`` (``mlx5_0/1``) or by device
    (every port of it); unlisted ports expect the best rate seen since the agent started."""
    balance_min_bytes_per_s: float = 50e6
    """Below this read+write rate an array or member counts as idle for balance figures."""
    net_stall_after_s: float = 5.0
    """A thunderbolt-net link that is up but moved no packet for this long, after traffic, is stalled."""

    def __post_init__(self) -> None:
        for key, gbps in self.thunderbolt_expected_gbps.items():
            if gbps <= 0:
                raise ValueError(f"thunderbolt_expected_gbps.{key} must be positive")
        if self.balance_min_bytes_per_s < 0:
            raise ValueError("balance_min_bytes_per_s must not be negative")
        if self.net_stall_after_s <= 0:
            raise ValueError("net_stall_after_s must be positive")
        check_ranges(self, {"balance_min_bytes_per_s": (0.0, 1e13), "net_stall_after_s": (0.1, 86400.0)})
        for key, gbps in self.thunderbolt_expected_gbps.items():
            if not gbps <= 1000:
                raise ValueError(f"thunderbolt_expected_gbps.{key} must be at most 1000, got {gbps!r}")
        for key, gbps in self.infiniband_expected_gbps.items():
            if not 0 < gbps <= 10_000:
                raise ValueError(f"infiniband_expected_gbps.{key} must be above 0 and at most 10000, got {gbps!r}")
