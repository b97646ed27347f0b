"""Logging for the long-running commands: journald-friendly lines on stderr, or a file for the dashboard."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from rigmon.schema import Frame

LEVELS = ("debug", "info", "warning", "error", "critical")

#: syslog priorities journald reads from a ``<N>`` line prefix (sd-daemon(3)).
_SYSLOG_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}

log = logging.getLogger("rigmon")


def stream_is_journal(stream: IO[str], environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``stream`` is connected to the systemd journal.

    systemd sets ``JOURNAL_STREAM=DEV:INODE`` for a service whose output goes to the journal;
    the stream is the journal when its descriptor has that device and inode (a child whose
    stderr was redirected inherits the variable but not the stream).
    """
    env = os.environ if environ is None else environ
    dev_ino = env.get("JOURNAL_STREAM", "")
    dev, _, ino = dev_ino.partition(":")
    if not dev.isdigit() or not ino.isdigit():
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


class JournalFormatter(logging.Formatter):
    """``<4>rigmon.agent: message``: the journal adds the time and reads the priority prefix."""

    def format(self, record: logging.LogRecord) -> str:
        priority = _SYSLOG_PRIORITY.get(record.levelno, 6 if record.levelno < logging.WARNING else 3)
        text = f"{record.name}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        # Each line of a multi-line record gets the prefix, so journald files them all at the right priority.
        return "\n".join(f"<{priority}>{line}" for line in text.splitlines())


def level_for(default: str, verbose: int, level: str | None) -> int:
    """The logging level: ``level`` if given, else ``default`` lowered one step per ``-v``."""
    if level:
        return int(getattr(logging, level.upper()))
    index = max(0, LEVELS.index(default) - verbose)
    return int(getattr(logging, LEVELS[index].upper()))


def configure_logging(level: int, log_file: str | Path | None = None, stream: IO[str] | None = None,
                      environ: Mapping[str, str] | None = None) -> logging.Handler:
    """Send rigmon's (and uvicorn's) log records at ``level`` and above to one place.

    Args:
        level: the least severe level shown.
        log_file: append to this file instead of the stream (the dashboard: stderr is its screen).
        stream: where to write otherwise (default stderr). When it is the systemd journal the
            lines carry a ``<N>`` priority prefix and no time stamp; else a time stamp and the level name.
        environ: environment for ``JOURNAL_STREAM`` (default ``os.environ``).

    Returns:
        The handler installed on the root logger (replacing any earlier one of ours).
    """
    handler: logging.Handler
    if log_file is not None:
        path = Path(log_file).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        out = stream if stream is not None else sys.stderr
        handler = logging.StreamHandler(out)
        if stream_is_journal(out, environ):
            handler.setFormatter(JournalFormatter())
        else:
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.set_name("rigmon")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "rigmon"]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level)
    return handler


_EVENT_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "critical": logging.CRITICAL}


class FrameLog:
    """A frame listener that logs what an agent does: its collectors' states on the first
    frame, then every event (a collector failing or recovering, alarms, GPUs lost, links
    retrained, journal trouble) at a level from its severity."""

    def __init__(self, node: str, logger: logging.Logger | None = None) -> None:
        self.node = node
        self.log = logger or logging.getLogger("rigmon.agent")
        self._first = True

    def __call__(self, frame: Frame) -> None:
        if self._first:
            self._first = False
            groups: dict[str, list[str]] = {}
            for name, status in frame.collectors.items():
                groups.setdefault(status.state, []).append(name)
            self.log.info("%s: collectors %s", self.node,
                          "; ".join(f"{state}: {', '.join(names)}" for state, names in sorted(groups.items())))
            # A collector failing from the start has its ``collector_failed`` event in this frame, logged
            # below with the same error: one line for it, not two.
            announced = {e.subject.removeprefix("collector:") for e in frame.events if e.kind == "collector_failed"}
            for name, status in frame.collectors.items():
                if name in announced:
                    continue
                if status.state == "absent" and status.error:
                    self.log.debug("%s: %s absent: %s", self.node, name, status.error)
                elif status.state == "pending" and status.error:
                    # Why it is not read yet ("NVML starting: nvmlInit has not returned for 2.0 s").
                    self.log.info("%s: collector %s pending: %s", self.node, name, status.error)
                elif status.state not in ("ok", "absent", "pending"):
                    self.log.warning("%s: collector %s %s: %s", self.node, name, status.state, status.error)
        for event in frame.events:
            self.log.log(_EVENT_LEVELS.get(event.severity, logging.INFO), "%s: %s %s: %s", self.node, event.kind,
                         event.subject, event.message)
