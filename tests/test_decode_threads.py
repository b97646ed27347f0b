"""Threads decoding their first frames at once must not crash the process.

msgspec works out how to decode a Struct class on the class's first use; two threads doing it
at once for the same class crashed the interpreter (a segfault, seen with two agents' journal
threads in one process). Each run is a fresh interpreter, where no class has been used yet,
with a tiny switch interval so the threads interleave inside msgspec's work. Before the fix
(`rigmon.schema.frame._decoder` built under a lock) about half of such runs crashed.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SCRIPT = """
import gzip, json, sys, threading
from pathlib import Path
from rigmon.schema import Frame, decode, decode_data

lines = []
for path in sorted(Path(sys.argv[1]).glob("*.jsonl.gz")):
    lines += gzip.decompress(path.read_bytes()).splitlines()
raw = lines[-1]
data = json.loads(raw)
sys.setswitchinterval(1e-6)
barrier = threading.Barrier(4)

def work(n):
    barrier.wait()
    for _ in range(20):
        decode(Frame, raw) if n % 2 else decode_data(Frame, data)

threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("ok")
"""


@pytest.mark.parametrize("run", range(6))
def test_four_threads_decode_their_first_frames_at_once(run: int) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(REPO / "tests" / "fixtures" / "frames")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


#: Where rigmon may build a typed msgspec decoder (a ``Decoder``, ``convert``, or ``decode(type=)``):
#: `rigmon.schema.frame`, under its lock; and decoders of a module's own private classes, built
#: once at import, which no other decoder shares: the journal store's, and the snapshot pull's
#: (a /v1/samples answer with its frames kept raw, and a frame's seq and time).
ALLOWED_TYPED_DECODERS = {"rigmon/schema/frame.py", "rigmon/agent/journal/store.py", "rigmon/snapshot/pull.py"}


def test_typed_msgspec_decoders_are_built_only_where_the_lock_covers_them() -> None:
    found = set()
    for path in sorted((REPO / "rigmon").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            name = node.func.attr
            base = ast.unparse(node.func.value)
            if not base.startswith("msgspec"):
                continue
            if name in ("Decoder", "convert") or (name == "decode" and any(k.arg == "type" for k in node.keywords)):
                found.add(str(path.relative_to(REPO)))
    assert found <= ALLOWED_TYPED_DECODERS, sorted(found - ALLOWED_TYPED_DECODERS)
    assert "rigmon/schema/frame.py" in found  # the scan sees them
