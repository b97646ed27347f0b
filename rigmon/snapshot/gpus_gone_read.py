"""The frames and events `rigmon.snapshot.gpus_gone` compares, read from a journal on disk or asked of a running
agent (`/v1/history`): each agent run's first and last frame within the journal's span, and its GPU events."""

from __future__ import annotations

import math
from typing import Any

import httpx

from rigmon.agent.journal import JournalReader
from rigmon.agent.journal.reader_runs import events_of_kinds, run_edge_frames, run_spans
from rigmon.schema import Event, Frame, History, decode
from rigmon.snapshot.gpus_gone import GPU_EVENT_KINDS, GoneGpu, gpus_gone

#: Runs whose frames are looked at, the latest first (a crash loop of hundreds of restarts is bounded).
MAX_RUNS = 16
#: The journal's default ``frames_keep_h``: how far back an agent is asked when its configuration does not say.
DEFAULT_FRAMES_KEEP_H = 48.0
#: Longest frames window asked for around a run's start or end: an agent does not count one of up to
#: 300 s as an export (it is bounded), and a few frames are enough.
EDGE_WINDOW_MAX_S = 300.0
#: Frames' worth of time asked for around a run's edge (times the agent's interval), and at least this many s.
EDGE_FRAMES = 10
EDGE_WINDOW_MIN_S = 5.0
#: A series name no agent has: the events of a long span are asked for without its series.
NO_SERIES = "rigmon-snapshot-events-only"


def gone_from_journal(reader: JournalReader, latest: Frame | None,
                      interval_s: float) -> tuple[list[GoneGpu], float | None]:
    """The GPUs gone by ``latest`` over the whole journal, and where its frames begin (``None``: none held).

    Read: each run's first and last frame (the latest `MAX_RUNS` runs), the GPU events, and the last frame
    before each loss; ``interval_s`` is the agent's frame interval.
    """
    if latest is None:
        return [], None
    runs = run_spans(reader)
    events = events_of_kinds(reader, GPU_EVENT_KINDS)
    frames = run_edge_frames(reader, runs[-MAX_RUNS:])
    window_s = _edge_window_s(interval_s)
    for at in _loss_times(events):
        # The last frame before each loss: when the GPU was last on the bus.
        before = reader.frames_json(at - window_s, math.nextafter(at, -math.inf))
        frames += [decode(Frame, before[-1])] if before else []
    return gpus_gone(latest, frames, events), runs[0][1] if runs else None


def _edge_window_s(interval_s: float) -> float:
    return min(EDGE_WINDOW_MAX_S, max(EDGE_WINDOW_MIN_S, EDGE_FRAMES * interval_s))


def _loss_times(events: list[Event]) -> list[float]:
    """The times of the ``gpu_lost`` events that name their GPU, the latest `MAX_RUNS`."""
    return [e.at for e in events if e.kind == "gpu_lost" and (e.data.get("uuid") or e.data.get("pci_bus_id"))][-MAX_RUNS:]


def frames_keep_s(config: dict[str, Any] | None) -> float:
    """The agent's frame retention (its ``journal.frames_keep_h``) in seconds, else the default."""
    journal = config.get("journal") if isinstance(config, dict) else None
    hours = journal.get("frames_keep_h") if isinstance(journal, dict) else None
    if isinstance(hours, (int, float)) and not isinstance(hours, bool) and math.isfinite(hours) and hours > 0:
        return float(hours) * 3600.0
    return DEFAULT_FRAMES_KEEP_H * 3600.0


async def gone_from_agent(client: httpx.AsyncClient, url: str, latest: Frame | None, to_at: float,
                          interval_s: float, config: dict[str, Any] | None) -> tuple[list[GoneGpu], float]:
    """The GPUs gone by ``latest`` over the agent's journal (its frame retention before ``to_at``), and from when.

    Asked of the agent: the span's events (without series), then a few frames at each run's start and end
    (its ``agent_started`` events, and an ``unclean_shutdown``'s last frame), at most `MAX_RUNS` runs.

    Raises:
        httpx.HTTPError: the agent did not answer; ValueError: it answered something else than a history.
    """
    from_at = to_at - frames_keep_s(config)
    if latest is None:
        return [], from_at
    resp = await client.get(f"{url}/v1/history", params={"from": repr(from_at), "to": repr(to_at),
                                                         "series": NO_SERIES})
    resp.raise_for_status()
    events = decode(History, resp.content).events
    window_s = _edge_window_s(interval_s)
    starts = [e.at for e in events if e.kind == "agent_started"][-MAX_RUNS:]
    crashes = [at for e in events if e.kind == "unclean_shutdown"
               and isinstance(at := e.data.get("last_frame_at"), (int, float)) and not isinstance(at, bool)]
    frames: list[Frame] = []
    # The span's first frames (a run started before it), each run's first, and the frames before each start
    # (the previous run's last when the agent was only restarted) and at each crash's last frame.
    for lo, hi, last in ([(from_at, from_at + window_s, False)] + [(t, t + window_s, False) for t in starts]
                         + [(t - window_s, math.nextafter(t, -math.inf), True) for t in starts]
                         + [(float(t), float(t), True) for t in crashes[-MAX_RUNS:]]
                         + [(t - window_s, math.nextafter(t, -math.inf), True) for t in _loss_times(list(events))]):
        found = await _edge_frames(client, url, lo, hi)
        if found:
            frames.append(found[-1] if last else found[0])
    gpu_events: list[Event] = [e for e in events if e.kind in GPU_EVENT_KINDS]
    # From the first frame the journal held (the span asked for reaches back to its retention, not its start).
    return gpus_gone(latest, frames, gpu_events), min((f.taken_at for f in frames), default=from_at)


async def _edge_frames(client: httpx.AsyncClient, url: str, from_at: float, to_at: float) -> list[Frame]:
    """The frames of a short window (JSON lines: the history line, then one frame a line)."""
    resp = await client.get(f"{url}/v1/history", params={"from": repr(from_at), "to": repr(to_at), "frames": "1"},
                            headers={"Accept": "application/x-ndjson"})
    resp.raise_for_status()
    lines = [line for line in resp.content.splitlines()[1:] if line]
    return [decode(Frame, line) for line in (lines[:1] + lines[-1:] if len(lines) > 1 else lines)]
