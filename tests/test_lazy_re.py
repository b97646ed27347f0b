"""`rigmon.lazy_re`, a pattern compiled on first use; and no module of rigmon compiling one at import unless listed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

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


#: Modules that compile patterns at import, and why each may. Every other module of the package
#: waits for first use (`lazy_compile`, or a compile inside the function that needs it); an entry
#: whose module no longer compiles at import fails too, so the list stays true.
COMPILED_AT_IMPORT = {
    # The agent's import path:
    "rigmon.schema.frame": "one pattern, searched on every frame an agent encodes (the first comes at once)",
    "rigmon.alarms.selector_text": "two patterns, used by every rule's selector when the rules load",
    # The dashboard's:
    "rigmon.cluster.sanitise": "one pattern, over every string an agent sends the dashboard",
    "rigmon.cluster.agent_answers": "one pattern, splitting every stream an agent sends",
    "rigmon.tui.widgets.rail_group": "one pattern, over every rail's device name drawn",
}

#: Imports every module of the rigmon package (``__main__`` would run the command line) with
#: ``re._compile`` watched: the one function ``re.compile``, ``re.match``, ``re.sub``... and a
#: `LazyPattern`'s first use all go through. A compile is charged to the rigmon code that asked
#: for it; one asked for by another library (Textual's CSS, tomllib) is that library's.
SCAN = r"""
import importlib, json, pkgutil, re, sys
import rigmon
from rigmon.lazy_re import LazyPattern
rigmon.__path__.extend(sys.argv[1:])  # tests: modules in a temporary directory, scanned as rigmon's
OURS = ("re", "rigmon.lazy_re")
compiled, lazy, modules = {}, 0, []
real_compile = re._compile

def watched(pattern, flags):
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") in OURS:
        frame = frame.f_back
    name = "" if frame is None else str(frame.f_globals.get("__name__"))
    if name.split(".")[0] == "rigmon":
        compiled.setdefault(name, []).append(f"line {frame.f_lineno}: {pattern!r}"[:120])
    return real_compile(pattern, flags)

re._compile = watched

def failed(name):
    raise ImportError(f"cannot import {name}")

for info in pkgutil.walk_packages(rigmon.__path__, "rigmon.", onerror=failed):
    if info.name != "rigmon.__main__":
        importlib.import_module(info.name)
        modules.append(info.name)
for name in modules:
    for key, value in vars(sys.modules[name]).items():
        for p in value if isinstance(value, tuple) else (value,):
            if isinstance(p, LazyPattern):
                if "match" in vars(p):
                    compiled.setdefault(name, []).append(f"{key}: a lazy pattern used at import")
                else:
                    lazy += 1
print(json.dumps({"compiled": compiled, "lazy": lazy, "modules": modules}))
"""


def scan(tmp_path: Path, *extra: Path) -> dict[str, Any]:
    """What `SCAN` finds in the package (and in the directories ``extra``, as rigmon modules)."""
    (tmp_path / "home").mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-c", SCAN, *map(str, extra)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


#: Parsers of hardware a machine may not have: their patterns wait for a line to parse.
COLLECTOR_PARSERS = ("amd_gpu", "infiniband", "kernel_log_formats", "kernel_messages", "mdstat", "nvme", "psu_lines",
                     "psu_text", "thunderbolt")


def unlisted(found: dict[str, Any]) -> dict[str, list[str]]:
    """Modules the scan found compiling at import that `COMPILED_AT_IMPORT` does not allow."""
    return {name: at for name, at in found["compiled"].items() if name not in COMPILED_AT_IMPORT}


def test_no_module_compiles_a_pattern_at_import_unless_listed(tmp_path: Path) -> None:
    found = scan(tmp_path)
    # The walk reached the whole package, the parsers among it (and their ~50 lazy patterns).
    assert {f"rigmon.collectors.{name}" for name in COLLECTOR_PARSERS} <= set(found["modules"])
    assert len(found["modules"]) > 200 and found["lazy"] > 40
    assert unlisted(found) == {}, "compiled at import (use rigmon.lazy_re.lazy_compile)"
    assert sorted(set(COMPILED_AT_IMPORT) - set(found["compiled"])) == [], "no longer compiled at import: drop them"


#: Stand-ins for new modules of the package (a parser the agent imports), by what they do at import.
NEW_MODULES = {
    "eager_parser": r"""
        import re
        _LINE = re.compile(r"^(\w+): (\d+)$")
    """,
    "parser_helper": r"""
        import re

        def _pattern(word):
            return re.compile(word + r"\s+(\d+)")

        _SPEED = _pattern("speed")
    """,
    "used_at_import": r"""
        from rigmon.lazy_re import lazy_compile
        _HEAD = lazy_compile(r"^md\d+")
        FIRST = _HEAD.match("md0")
    """,
    "lazy_parser": r"""
        import re
        from rigmon.lazy_re import lazy_compile
        _LINE = lazy_compile(r"^(\w+)$")

        def parse(text):
            return re.compile(r"x").match(text), _LINE.match(text)
    """,
}


def test_a_new_module_that_compiles_at_import_is_caught(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    for name, source in NEW_MODULES.items():
        (extra / f"{name}.py").write_text(textwrap.dedent(source))
    found = scan(tmp_path, extra)
    assert {"rigmon.eager_parser", "rigmon.lazy_parser"} <= set(found["modules"])
    # What the test above would refuse: the three that compile at import, the lazy one not.
    assert sorted(unlisted(found)) == ["rigmon.eager_parser", "rigmon.parser_helper", "rigmon.used_at_import"]
    assert found["compiled"]["rigmon.parser_helper"][0].startswith("line 5: ")  # inside the helper
