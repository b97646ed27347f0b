"""Training-load profiles that scenarios drive their nodes with."""

from __future__ import annotations

import math


def training_load(t_s: float, start_s: float = 10.0, step_s: float = 1.2, eval_every_s: float = 600.0) -> float:
    """Load of a data-parallel training job at simulated time ``t_s`` (0 idle .. 1 full).

    Idle until ``start_s``; then every step runs at full load with a short dip between steps
    (gradient all-reduce and data loading); every ``eval_every_s`` a 30 s evaluation runs at
    half load.
    """
    if t_s < start_s:
        return 0.03
    since = t_s - start_s
    if since % eval_every_s > eval_every_s - 30.0:
        return 0.5
    phase = (since % step_s) / step_s
    return 0.35 if phase > 0.85 else 1.0


def diurnal(t_s: float, amplitude: float = 1.0) -> float:
    """A day-long sine wave between -amplitude and +amplitude (ambient temperature)."""
    return amplitude * math.sin(2 * math.pi * t_s / 86400.0)
