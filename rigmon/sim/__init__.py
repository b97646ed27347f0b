"""Simulated rigs: fake hardware (file trees, NVML, ADC pty, kernel log) that the real collectors read."""

from __future__ import annotations

from rigmon.sim.tree import Tree, write_tree

__all__ = ["Tree", "write_tree"]
