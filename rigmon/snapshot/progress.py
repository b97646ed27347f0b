"""Progress of a snapshot's pull over many nodes, on stderr: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
from typing import IO

from rigmon.cluster.sanitise import clean_text


class Progress:
    """Progress of a pull over many nodes on a stream (stderr).

    On a terminal a bar is redrawn in place; otherwise each finished step is a plain line,
    so logs and CI output stay readable.
    """

    def __init__(self, total: int, stream: IO[str] | None = None, width: int = 30) -> None:
        self.total = max(1, total)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def note(self, node: str, what: str) -> None:
        """Something worth saying about a node that is no step (a wait): a line of its own."""
        # On a terminal the bar's line is cleared first; the next step draws it again below.
        self.stream.write(("\r\x1b[K" if self.tty else "") + clean_text(f"{node}: {what}") + "\n")
        self.stream.flush()

    def step(self, node: str, what: str) -> None:
        """One step of one node finished."""
        self.done = min(self.total, self.done + 1)
        # The node's name and what it said come from the agent: text, never terminal control.
        node, what = clean_text(node), clean_text(what)
        if self.tty:
            filled = int(self.width * self.done / self.total)
            bar = "#" * filled + "-" * (self.width - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} {node}: {what}\x1b[K")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"[{self.done}/{self.total}] {node}: {what}\n")
        self.stream.flush()

    def skip(self, node: str, steps: int, what: str) -> None:
        """The last ``steps`` steps of a node, which it will not take (its pull failed): one line for them all."""
        if steps <= 0:
            return
        self.done = min(self.total, self.done + steps - 1)
        self.step(node, what)


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun`` in the number it takes: ``1 run``, ``2 runs`` (a noun ending in ``s`` stays: ``1 series``)."""
    return f"{n} {noun if n == 1 or noun.endswith('s') else noun + 's'}"


#: Steps each node reports: info, capture, history, frames.
STEPS_PER_NODE = 4
