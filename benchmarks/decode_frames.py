"""Decode cost of wire frames: what a dashboard pays per frame it receives.

    python benchmarks/decode_frames.py [--rounds 5] [--smoke]

Decodes the recorded frames of real collectors on simulator trees (tests/fixtures/frames:
V100 nodes with 4-8 GPUs and the rail, md arrays, Thunderbolt, AMD) with
`rigmon.schema.decode_data`, and reports the best of several rounds in CPU time per frame.
Then the whole way from wire bytes, as the dashboard's client does it
(`rigmon.cluster.sanitise.decode_agent`: the check for terminal control characters, JSON,
validation) against `rigmon.schema.decode` without the check, and with every frame carrying
an escaped ESC in one string, which makes the sanitiser walk the frame's strings. Last, the
agent's side: `rigmon.schema.encode` of the same frames (what the journal, /v1/latest and SSE
share through `rigmon.agent.frame_json`). And the summary stream's records
(`rigmon.summary.SummaryRecord`, ``/v1/stream?view=summary``: what an agent sends for a node the
dashboard does not show), built from the same frames as the agent builds them and decoded as the
dashboard's client does: the SSE event's data text through `decode_agent` and `check_record`.
Every kind of decode is checked once against the records it started from; a mismatch exits 1.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rigmon.cluster.agent_answers import check_record  # noqa: E402
from rigmon.cluster.sanitise import decode_agent  # noqa: E402
from rigmon.schema import Frame, decode, decode_data, encode  # noqa: E402
from rigmon.summary import SummaryRecord, summary_record  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one round (CI)")
    args = parser.parse_args()
    rounds = 1 if args.smoke else args.rounds
    lines: list[bytes] = []
    for path in sorted((REPO / "tests" / "fixtures" / "frames").glob("*.jsonl.gz")):
        lines += gzip.decompress(path.read_bytes()).splitlines()
    datas = [json.loads(line) for line in lines]
    sizes = sorted(len(line) for line in lines)
    best = _best(rounds, lambda: [decode_data(Frame, data) for data in datas]) / len(datas)
    plain = _best(rounds, lambda: [decode(Frame, line) for line in lines]) / len(lines)
    checked = _best(rounds, lambda: [decode_agent(Frame, line) for line in lines]) / len(lines)
    # One control character in a collector's status, as a hostile agent might send it.
    dirty = [line.replace(b'"state":"ok"', b'"state":"ok","error":"x\\u001b[2J"', 1) for line in lines]
    frames = [decode(Frame, line) for line in lines]
    encoded = _best(rounds, lambda: [encode(frame) for frame in frames]) / len(frames)
    walked = _best(rounds, lambda: [decode_agent(Frame, line) for line in dirty]) / len(dirty)
    # The summary stream: each frame's record as the agent encodes it (`frame_json.summary_json`),
    # received as an SSE event's data (text, `rigmon.cluster.sse`).
    records = [summary_record(frame) for frame in frames]
    events = [encode(record).decode() for record in records]
    summarized = _best(rounds, lambda: [check_record(decode_agent(SummaryRecord, data)) for data in events]) / len(events)
    failures = _self_check(lines, frames, records, events)
    for failure in failures:
        print(f"SELF-CHECK FAILED: {failure}", file=sys.stderr)
    summary_sizes = sorted(len(data.encode()) for data in events)
    print(f"frames: {len(datas)} (JSON {sizes[0]}-{sizes[-1]} bytes, median {sizes[len(sizes) // 2]}); "
          f"their summary records: JSON {summary_sizes[0]}-{summary_sizes[-1]} bytes, "
          f"median {summary_sizes[len(summary_sizes) // 2]}")
    print("| figure | value |")
    print("|---|---:|")
    print(f"| decode CPU ms per frame (best of {rounds}) | {best * 1000:.3f} |")
    print(f"| frames per CPU second | {1 / best:.0f} |")
    print(f"| wire bytes to frame, schema decode, CPU ms per frame | {plain * 1000:.3f} |")
    print(f"| wire bytes to frame, dashboard decode (text check), CPU ms per frame | {checked * 1000:.3f} |")
    print(f"| same, every frame with an escaped ESC (strings walked), CPU ms per frame | {walked * 1000:.3f} |")
    print(f"| agent side: frame to wire bytes (`schema.encode`), CPU ms per frame | {encoded * 1000:.3f} |")
    print(f"| summary record (`view=summary` SSE data) to record, dashboard decode, CPU ms per record "
          f"| {summarized * 1000:.3f} |")
    return 1 if failures else 0


def _self_check(lines: list[bytes], frames: list[Frame], records: list[SummaryRecord], events: list[str]) -> list[str]:
    """What the timed decodes got wrong: each must give back the record its input was made from."""
    failures: list[str] = []
    for line, frame, record, data in zip(lines, frames, records, events):
        where = f"{frame.node} seq {frame.seq}"
        if decode_agent(Frame, line) != frame or decode_data(Frame, json.loads(line)) != frame:
            failures.append(f"{where}: the frame decodes differently by another way")
        if check_record(decode_agent(SummaryRecord, data)) != record:
            failures.append(f"{where}: its summary record does not decode to what the agent built")
        if record.frame.seq != frame.seq or record.summary.seq != frame.seq:
            failures.append(f"{where}: its summary record is of another frame")
    return failures


def _best(rounds: int, work: Callable[[], object]) -> float:
    """Least CPU seconds ``work`` took over ``rounds`` runs."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        work()
        best = min(best, time.process_time() - t0)
    return best


if __name__ == "__main__":
    sys.exit(main())
