"""`rigmon.lazy_re`: a module-level pattern compiled on first use, answering like the compiled one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from rigmon.lazy_re import LazyPattern, lazy_compile

REPO = Path(__file__).resolve().parents[1]


def test_compiles_on_first_use_and_answers_like_re_compile() -> None:
    lazy = lazy_compile(r"^(?P<name>md\d+) : (?P<rest>.*)$", re.DOTALL)
    assert isinstance(lazy, LazyPattern) and "match" not in vars(lazy)
    real = re.compile(r"^(?P<name>md\d+) : (?P<rest>.*)$", re.DOTALL)
    line = "md0 : active raid0\nnvme0n1[0]"
    assert lazy.match(line).groupdict() == real.match(line).groupdict()  # type: ignore[union-attr]
    # Compiled once; its methods are the object's own attributes from then on.
    assert "match" in vars(lazy) and "search" in vars(lazy)
    assert lazy.pattern == real.pattern and lazy.flags == real.flags and lazy.groupindex == real.groupindex
    assert lazy.sub("x", line) == real.sub("x", line) and lazy.fullmatch("md1") is None
    assert [m.group("name") for m in lazy.finditer(line)] == ["md0"]
    assert lazy.scanner(line).match() is not None  # an attribute not copied still reaches the pattern


def test_bad_pattern_fails_on_first_use() -> None:
    lazy = lazy_compile(r"(unclosed")
    try:
        lazy.match("x")
    except re.error:
        pass
    else:
        raise AssertionError("a bad pattern must raise re.error")


COLLECTOR_PARSERS = ("amd_gpu", "infiniband", "kernel_log_formats", "kernel_messages", "mdstat", "nvme", "psu_lines",
                     "psu_text", "thunderbolt")


def test_collector_modules_compile_no_pattern_at_import() -> None:
    # The parsers of hardware a machine may not have: their patterns wait for a line to parse.
    code = f"""
import importlib, json, re
from rigmon.lazy_re import LazyPattern
found = {{"lazy": 0, "compiled": []}}
for name in {COLLECTOR_PARSERS!r}:
    module = importlib.import_module("rigmon.collectors." + name)
    for key, value in vars(module).items():
        for p in value if isinstance(value, tuple) else (value,):
            if isinstance(p, re.Pattern) or (isinstance(p, LazyPattern) and "match" in vars(p)):
                found["compiled"].append(name + "." + key)
            elif isinstance(p, LazyPattern):
                found["lazy"] += 1
print(json.dumps(found))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["compiled"] == [] and found["lazy"] > 40
