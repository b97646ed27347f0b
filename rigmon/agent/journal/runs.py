"""Agent runs as the journal records them, and the message about a run that did not stop cleanly."""

from __future__ import annotations

import time

import msgspec

#: Seconds before the last frame of a crashed run that its summary covers.
FINAL_WINDOW_S = 5.0
#: A voltage series whose highest value lies in this band is taken for the 12 V rail (a PSU's
#: output, a board's 12 V input), not for a CPU core, 3.3 V or 5 V, or a 230 V input.
RAIL_BAND_VOLTS = (10.0, 14.0)


def rail_rank(name: str, highest: float) -> int:
    """How surely a ``*_volts`` series is the 12 V rail the GPUs hang on (lower: surer).

    0: the ADC's minimum (``psu_rail...min_volts``, what the rail alarms read); 1: a series whose
    highest value is in `RAIL_BAND_VOLTS`; 2: anything else. The ADC's means and maxima, and a
    Super I/O's limits (``hwmon_volts[...].min_volts``/``.max_volts``: settings, not readings),
    are 2 as well. Chosen by the lowest minimum alone, a board's CPU core (0.9 V) or a limit of
    0 V took the place of the rail.
    """
    if name.startswith("psu_rail."):
        return 0 if name.endswith("min_volts") else 2
    if name.startswith("hwmon_volts[") and name.endswith((".min_volts", ".max_volts")):
        return 2
    return 1 if RAIL_BAND_VOLTS[0] <= highest <= RAIL_BAND_VOLTS[1] else 2


# A frozen msgspec Struct, not a dataclass (cheaper to define at the agent's start); gc=False:
# frozen, holding only plain values and frozen records, it cannot be part of a reference cycle.
class RunRecord(msgspec.Struct, frozen=True, gc=False):
    """One agent run as the journal knows it.

    ``info`` and ``config`` are the JSON texts of /v1/info and the redacted configuration
    at the run's start; ``clean`` is ``None`` while the run is (or was last seen) running.
    """

    run_id: str
    node: str
    started_at: float
    stopped_at: float | None
    clean: bool | None
    info: str | None
    config: str | None


class UncleanRun(msgspec.Struct, frozen=True, gc=False):
    """A previous run that never recorded a clean stop, and its last readings.

    Attributes:
        run_id: the crashed run.
        node: its node name.
        started_at: when it started (Unix seconds).
        last_frame_at: its last frame's ``taken_at``, ``None`` when it wrote none.
        final: per series, the minimum and maximum over the last `FINAL_WINDOW_S` seconds.
        unreadable: its frames could not be read (its journal was damaged and set aside).
    """

    run_id: str
    node: str
    started_at: float
    last_frame_at: float | None
    final: dict[str, tuple[float, float]]
    unreadable: bool = False


def unclean_message(run: UncleanRun, started_at: float) -> tuple[str, dict[str, str | int | float | bool | None]]:
    """Message and data of the ``unclean_shutdown`` event for a crashed run."""
    data: dict[str, str | int | float | bool | None] = {
        "previous_run_id": run.run_id, "previous_started_at": run.started_at, "last_frame_at": run.last_frame_at,
    }
    if run.unreadable:
        return ("node restarted unexpectedly; the previous run's last frames could not be read (its journal "
                "was damaged and set aside)"), data
    if run.last_frame_at is None:
        return "node restarted unexpectedly; the previous run recorded no frame", data
    gap_s = started_at - run.last_frame_at
    data["gap_s"] = round(gap_s, 3)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(run.last_frame_at))
    parts = [f"node restarted unexpectedly; last frame {stamp} UTC, {_fmt_duration(gap_s)} before this start"]
    volts = sorted((rail_rank(name, hi), lo, name) for name, (lo, hi) in run.final.items() if name.endswith("_volts"))
    if volts and volts[0][0] < 2:
        volts = [v for v in volts if v[0] < 2]
    watts = sorted(((hi, name) for name, (_, hi) in run.final.items()
                    if name.endswith("_w") and "limit" not in name), reverse=True)
    # Volts to the millivolt, the ADC's own resolution: three significant digits made a rail
    # minimum of 11.977 V read "12 V" and 11.46 V read "11.5 V" (not below the critical threshold).
    details = [f"{name} min {lo:.3f} V" for _, lo, name in volts[:2]]
    details += [f"{name} max {hi:.4g} W" for hi, name in watts[:3]]
    if details:
        parts.append(f"final {FINAL_WINDOW_S:g} s: " + ", ".join(details))
    ranked = sorted(run.final.items(), key=lambda kv: (not kv[0].endswith(("_volts", "_w", "_c", "_amps")), kv[0]))
    for name, (lo, hi) in ranked[:40]:
        data[f"min:{name}"] = lo
        data[f"max:{name}"] = hi
    return "; ".join(parts), data


def _fmt_duration(seconds: float) -> str:
    if abs(seconds) < 120:
        return f"{seconds:.1f} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
