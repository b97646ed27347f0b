"""How the last agent run a journal recorded ended, for a bundle read from that journal.

A bundle pulled from a running agent needs no such line: the agent answered. One read from a
journal is made after a crash, a power cut or a ``kill -9`` as often as after a clean stop, and the
events of the window cannot tell them apart: the ``unclean_shutdown`` event is written only by the
next run, which a dead node never starts. The journal's run record can: a clean stop records its
time, a run that died records none. So the reader of REPORT.md learns whether the recording ends
because the agent stopped or because the node went down, and what its final seconds read.
"""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from pathlib import Path

from rigmon.agent.journal import JournalReader
from rigmon.agent.journal.layout import read_error
from rigmon.agent.journal.runs import FINAL_WINDOW_S, RunRecord, rail_rank
from rigmon.series import frame_series

#: Rail series and power series named in the summary of a run's final seconds.
RAIL_NAMED = 2
#: The rail's minimum over a window (the ADC's envelope), and the series of its channels one by one.
RAIL_SERIES = "psu_rail.volts.min_volts"
CHANNEL_PREFIX = "psu_rail.channels_volts."
POWER_NAMED = 3


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def final_summary(final: dict[str, tuple[float, float]]) -> str | None:
    """The rail minimum and the highest power of a run's final seconds, ``None`` without either.

    Args:
        final: per series, its minimum and maximum over the final seconds (`JournalReader.final_readings`).

    Returns:
        e.g. ``"psu_rail.volts.min_volts min 11.255 V, gpus[0].power_w max 310 W"``: volts to the
        millivolt (the ADC's resolution), the 12 V rail alone when the node has one (`rail_rank`).
    """
    volts = sorted((rail_rank(name, hi), lo, name) for name, (lo, hi) in final.items() if name.endswith("_volts"))
    # A one-channel ADC's channel is the rail itself: the same minimum twice under two names said nothing more.
    rail = final.get(RAIL_SERIES)
    if rail is not None:
        volts = [v for v in volts if not (v[2].startswith(CHANNEL_PREFIX) and v[1] == rail[0])]
    if volts and volts[0][0] < 2:
        volts = [v for v in volts if v[0] < 2]
    watts = sorted(((hi, name) for name, (_, hi) in final.items()
                    if name.endswith("_w") and "limit" not in name), reverse=True)
    details = [f"{name} min {lo:.3f} V" for _, lo, name in volts[:RAIL_NAMED]]
    details += [f"{name} max {hi:.4g} W" for hi, name in watts[:POWER_NAMED]]
    return ", ".join(details) or None


def run_end(reader: JournalReader, run: RunRecord, source: Path | None = None, running: bool = False) -> str:
    """One sentence on how ``run`` (the journal's last) ended: stopped cleanly, or not, with its last frame.

    Args:
        reader: the journal the run is recorded in.
        run: its last run record.
        source: the journal file named when its frames cannot be read (default: the reader's; a salvaged
            copy's reader is given the journal it was salvaged from).
        running: the agent of the run holds its state directory's lock now (`rigmon.agent.state_lock.agent_holds`):
            the run has not ended, it was still going when the journal was read.

    Returns:
        The sentence, times in UTC on the node's clock.
    """
    started = f"The agent's last run ({run.run_id}, started {_stamp(run.started_at)})"
    if run.clean:
        stopped = f" at {_stamp(run.stopped_at)}" if run.stopped_at is not None else ""
        return f"{started} stopped cleanly{stopped}."
    # clean is None while the run is (or was last seen) running: the journal cannot tell a run killed
    # from one still going, so both are named; False is a run a later start found dead (not the last).
    said = (f"{started} did not stop cleanly: its journal records no stop (the agent was killed, crashed or "
            "the node lost power; or the agent is still running)")
    if running:
        said = f"{started} was still running when the journal was read (its agent holds the state directory)"
    try:
        last_at, final = reader.final_readings(run.run_id)
    except (sqlite3.DatabaseError, zlib.error, ValueError) as exc:
        # A damaged journal: the bundle still says how the run ended, and the node's error what was lost.
        return f"{said}; its last frames could not be read ({read_error(source or reader.path, exc)})."
    if last_at is None:
        return f"{said}; it recorded no frame."
    summary = final_summary(final)
    tail = f"; final {FINAL_WINDOW_S:g} s: {summary}" if summary else ""
    lowest = _rail_lowest(reader, final, last_at)
    return f"{said}. Its last frame: {_stamp(last_at)}{tail}{lowest}."


def _rail_lowest(reader: JournalReader, final: dict[str, tuple[float, float]], last_at: float) -> str:
    """``"; the rail's lowest, 11.255 V, 0.8 s before the last frame"``: when in the final seconds the 12 V rail
    (`final_summary`'s first) read its minimum; a sag just before a node reset is incident 3's evidence.
    ``""`` without a rail series, or when its frames cannot be read again."""
    rails = sorted((rail_rank(name, hi), lo, name) for name, (lo, hi) in final.items() if name.endswith("_volts"))
    if not rails or rails[0][0] >= 2:
        return ""
    _, lowest, name = rails[0]
    try:
        frames = reader.frames_json(last_at - FINAL_WINDOW_S, last_at)
    except (sqlite3.DatabaseError, zlib.error, ValueError):
        return ""
    for raw in frames:
        data = json.loads(raw)
        if frame_series(data).get(name) == lowest and isinstance(at := data.get("taken_at"), (int, float)):
            return f"; the rail's lowest, {lowest:.3f} V, {last_at - at:.1f} s before the last frame"
    return ""
