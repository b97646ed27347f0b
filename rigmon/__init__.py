"""rigmon: cluster and power monitor for home-built deep-learning rigs."""

from __future__ import annotations

__version__ = "0.1.0"
