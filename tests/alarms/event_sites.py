"""The places in rigmon/ that emit events, found in the source: each one's kind and the data keys it gives.

Used by `test_event_kinds` to hold `rigmon.schema.events.EVENT_KINDS` (what event rules are checked
against) to the code. A call emits an event when it is one of `EMITTERS` with a kind as its first
argument (or ``kind=``); the data is its fifth argument (``EventDraft``, ``emit_event``, a sampler's
``emit``), fourth (a journal's ``_emit``, a guard's ``event``, a PSU device's ``_event``), or ``data=``.
Data is followed through dict literals, ``**`` spreads, a local variable (its assignment, and the
``name["key"] = ...`` / ``name.update(key=...)`` statements before the call), and a helper of the same
module that returns a dict. What cannot be followed is reported as a site with ``keys = None``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "rigmon"
#: Callables that emit an event, with the position of their data argument.
EMITTERS = {"EventDraft": 4, "emit_event": 4, "emit": 4, "_emit": 3, "event": 3, "_event": 3, "_report": -1}
#: Event-emitting calls are looked for everywhere but in the dashboard and the simulator (which
#: emits no event of its own: it writes fake hardware that the collectors read).
SKIPPED = ("tui", "sim")


@dataclass(frozen=True)
class Site:
    """One call that emits an event."""

    where: str
    """``path:line`` of the call."""
    kind: str | None
    """The kind, when the source spells it (``None``: a variable, an argument passed on)."""
    kind_source: str
    """The kind's expression as written."""
    keys: frozenset[str] | None
    """The data keys the call gives (``None``: not followed); a key ending in ``:*`` is a prefix."""
    values: tuple[tuple[str, object], ...] = ()
    """Keys whose value is a constant in the source, with that value."""


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


class _Module:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.functions: dict[str, ast.FunctionDef] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.FunctionDef):
                self.functions.setdefault(node.name, node)

    def enclosing(self, node: ast.AST) -> ast.FunctionDef | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.FunctionDef):
                return node
        return None

    def keys(self, expr: ast.expr | None, func: ast.FunctionDef | None, at: ast.AST,
             depth: int = 0) -> tuple[set[str], dict[str, object]] | None:
        """Keys of the dict ``expr`` evaluates to, and constant values; ``None`` when it cannot be followed."""
        if expr is None or (isinstance(expr, ast.Constant) and expr.value is None):
            return set(), {}
        if depth > 4:
            return None
        if isinstance(expr, ast.Dict):
            keys: set[str] = set()
            values: dict[str, object] = {}
            for k, v in zip(expr.keys, expr.values):
                if k is None:
                    inner = self.keys(v, func, at, depth + 1)
                    if inner is None:
                        return None
                    keys |= inner[0]
                    values.update(inner[1])
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    keys.add(k.value)
                    if isinstance(v, ast.Constant):
                        values[k.value] = v.value
                elif isinstance(k, ast.JoinedStr) and isinstance(k.values[0], ast.Constant):
                    keys.add(f"{k.values[0].value}*")
                else:
                    return None
            return keys, values
        if isinstance(expr, ast.Call) and _name(expr.func) in self.functions:
            helper = self.functions[_name(expr.func)]
            returns = [n for n in ast.walk(helper) if isinstance(n, ast.Return)]
            if len(returns) == 1:
                return self.keys(returns[0].value, helper, returns[0], depth + 1)
            return None
        if isinstance(expr, ast.Name) and func is not None:
            return self._variable(expr.id, func, at, depth)
        return None

    def reaches(self, node: ast.AST, call: ast.AST) -> bool:
        """Whether the statement holding ``node`` is in a block the call is in (not another branch)."""
        while not isinstance(node, ast.stmt):
            node = self.parents[node]
        block = self.parents[node]
        while call in self.parents:
            call = self.parents[call]
            if call is block:
                return True
        return False

    def falls_through(self, node: ast.AST) -> bool:
        """Whether the block holding ``node`` goes on after it (no ``return`` in it: an ``if`` that adds a key)."""
        while not isinstance(node, ast.stmt):
            node = self.parents[node]
        block = self.parents[node]
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(block, field, [])
            if node in statements:
                return not any(isinstance(s, (ast.Return, ast.Continue, ast.Raise)) for s in statements)
        return False

    def kinds(self, expr: ast.expr, func: ast.FunctionDef | None, call: ast.AST) -> list[str] | None:
        """The kinds ``expr`` can be: a constant, a choice of constants, or a local variable set to one."""
        if isinstance(expr, ast.Constant):
            return [expr.value] if isinstance(expr.value, str) else None
        if isinstance(expr, ast.IfExp):
            a, b = self.kinds(expr.body, func, call), self.kinds(expr.orelse, func, call)
            return None if a is None or b is None else a + b
        if isinstance(expr, ast.Name) and func is not None:
            found = [n for n in ast.walk(func) if isinstance(n, ast.Assign) and n.lineno < call.lineno
                     and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets)
                     and self.reaches(n, call)]
            return self.kinds(found[-1].value, func, call) if len(found) == 1 else None
        return None

    def _variable(self, name: str, func: ast.FunctionDef, call: ast.AST,
                  depth: int) -> tuple[set[str], dict[str, object]] | None:
        found: tuple[set[str], dict[str, object]] | None = None
        for node in ast.walk(func):
            if getattr(node, "lineno", call.lineno) >= call.lineno:
                continue
            adds = isinstance(node, ast.Call) or (isinstance(node, ast.Assign)
                                                  and isinstance(node.targets[0], ast.Subscript))
            if not self.reaches(node, call) and not (adds and self.falls_through(node)):
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id == name:
                        found = self.keys(node.value, func, node, depth + 1)
                        if found is None:
                            return None
                    elif isinstance(target, ast.Subscript) and _name(target.value) == name:
                        key = target.slice
                        if found is None:
                            return None
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            found[0].add(key.value)
                        elif isinstance(key, ast.JoinedStr) and isinstance(key.values[0], ast.Constant):
                            found[0].add(f"{key.values[0].value}*")
                        else:
                            return None
                    elif isinstance(target, ast.Tuple) and any(
                            isinstance(t, ast.Name) and t.id == name for t in target.elts):
                        return None
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
                  and _name(node.func.value) == name):
                if found is None or node.args:
                    return None
                found[0].update(k.arg for k in node.keywords if k.arg is not None)
        return found


def event_sites() -> list[Site]:
    """Every call in rigmon/ (but the dashboard and simulator) that emits an event."""
    sites: list[Site] = []
    for path in sorted(ROOT.rglob("*.py")):
        if any(part in SKIPPED for part in path.relative_to(ROOT).parts):
            continue
        module = _Module(path)
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Call):
                continue
            name, args = _name(node.func), list(node.args)
            if name == "call_soon_threadsafe" and args and _name(args[0]) in EMITTERS:
                name, args = _name(args[0]), args[1:]
            if name not in EMITTERS or isinstance(node.func, ast.Name) and name == "event":
                continue
            kw = {k.arg: k.value for k in node.keywords}
            kind_expr = kw.get("kind", args[0] if args else None)
            if kind_expr is None:
                continue
            position = EMITTERS[name]
            data_expr = kw.get("data", args[position] if 0 <= position < len(args) else None)
            func = module.enclosing(node)
            kinds = module.kinds(kind_expr, func, node) or [None]
            where = f"{path.relative_to(ROOT.parent)}:{node.lineno}"
            found = module.keys(data_expr, func, node)
            for kind in kinds:
                sites.append(Site(where, kind, ast.unparse(kind_expr),
                                  None if found is None else frozenset(found[0]),
                                  () if found is None else tuple(sorted(found[1].items()))))
    return sites
