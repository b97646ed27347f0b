"""Decode cost of wire frames: what a dashboard pays per frame it receives.

    python benchmarks/decode_frames.py [--rounds 5] [--smoke]

Decodes the recorded frames of real collectors on simulator trees (tests/fixtures/frames:
V100 nodes with 4-8 GPUs and the rail, md arrays, Thunderbolt, AMD) with
`rigmon.schema.decode_data`, and reports the best of several rounds in CPU time per frame.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rigmon.schema import Frame, decode_data  # noqa: E402


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
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for data in datas:
            decode_data(Frame, data)
        best = min(best, (time.process_time() - t0) / len(datas))
    print(f"frames: {len(datas)} (JSON {sizes[0]}-{sizes[-1]} bytes, median {sizes[len(sizes) // 2]})")
    print("| figure | value |")
    print("|---|---:|")
    print(f"| decode CPU ms per frame (best of {rounds}) | {best * 1000:.3f} |")
    print(f"| frames per CPU second | {1 / best:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
