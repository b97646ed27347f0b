"""``rigmon check``'s human-readable report, one line per item or wrapped to a terminal's width."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rigmon.agent.check import CheckReport

_SEVERITIES = ("info", "warning", "critical")
#: Indent of a wrapped line's continuation when its own column would leave too little room.
CONTINUATION_INDENT = 6
#: Narrowest room for text a continuation keeps: below it, the text goes under the line instead.
MIN_TEXT_WIDTH = 30


def _below(rows: list[tuple[str, str]], width: int | None) -> bool:
    """Whether a block's texts all go below their heads: one of them does not fit and the text column
    leaves less than `MIN_TEXT_WIDTH` (all of them, so the block keeps one layout)."""
    if width is None or not rows:
        return False
    return width - len(rows[0][0]) < MIN_TEXT_WIDTH and any(len(f"{h}{t}".rstrip()) > width for h, t in rows)


def _fit(head: str, text: str, width: int | None, below: bool = False) -> list[str]:
    """``head`` followed by ``text``, wrapped to ``width`` with the continuation under ``text``'s column.

    When that column leaves less than `MIN_TEXT_WIDTH` (or ``below``), ``head`` stands alone and ``text``
    follows below it, indented by `CONTINUATION_INDENT`. Words are never split (a device path stays whole
    and may pass the width); ``width`` ``None`` keeps every item on one line (for grep).
    """
    line = f"{head}{text}".rstrip()
    if width is None or not text or (len(line) <= width and not below):
        return [line]
    if width - len(head) >= MIN_TEXT_WIDTH and not below:
        return textwrap.wrap(text, width, initial_indent=head, subsequent_indent=" " * len(head),
                             break_long_words=False, break_on_hyphens=False)
    indent = " " * CONTINUATION_INDENT
    return [head.rstrip(), *textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent,
                                          break_long_words=False, break_on_hyphens=False)]


def _fit_prose(line: str, width: int | None) -> list[str]:
    """A sentence-like line (the header, a note, the guard's line) wrapped with a two-space continuation."""
    if width is None or len(line) <= width:
        return [line]
    return textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


def format_report(report: CheckReport, width: int | None = None) -> str:
    """The human-readable report.

    Args:
        report: what the check found.
        width: columns of the terminal it is shown on: longer lines wrap under their message
            column. ``None`` (output to a pipe or a file): one line per collector, finding and note.
    """
    lines = _fit_prose(f"rigmon check: node {report.node}, root {report.root}", width)
    lines.append("collectors:")
    name_w = max((len(n) for n in report.collectors), default=4)
    for name, st in report.collectors.items():
        took = f"{st.duration_s * 1000:.0f} ms" if st.duration_s is not None else ""
        why = st.error if st.error and st.state != "ok" else ""
        lines.extend(_fit(f"  {name:<{name_w}}  {st.state:<7} {took}  ", why, width))
    if report.findings:
        lines.append("findings:")
        rule_w = max(len(a.rule) for a in report.findings)
        subj_w = max(len(a.subject) for a in report.findings)
        rows = [(f"  {a.severity.upper():<8}  {a.rule:<{rule_w}}  {a.subject:<{subj_w}}  ", a.message)
                for a in sorted(report.findings, key=lambda a: (-_SEVERITIES.index(a.severity), a.rule, a.subject))]
        below = _below(rows, width)
        for head, message in rows:
            lines.extend(_fit(head, message, width, below))
    for note in report.notes:
        lines.extend(_fit_prose(f"note: {note}", width))
    if report.guard is not None:
        lines.extend(_fit_prose(f"guard: {report.guard}", width))
    counts = {s: sum(1 for a in report.findings if a.severity == s) for s in ("critical", "warning")}
    if report.status == "ok":
        lines.append(f"result: healthy ({len(report.rules)} rules, {len(report.collectors)} collector"
                     f"{'' if len(report.collectors) == 1 else 's'})")
    else:
        warnings = "warning" if counts["warning"] == 1 else "warnings"
        lines.append(f"result: {report.status.upper()} ({counts['critical']} critical, {counts['warning']} {warnings})")
    return "\n".join(lines)
