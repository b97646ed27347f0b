"""Logging of the long-running commands: levels, the journal's format, events of frames."""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path

import pytest

from rigmon.logs import FrameLog, JournalFormatter, configure_logging, level_for, stream_is_journal
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Event, Frame, Readings


def captured(name: str) -> tuple[logging.Logger, io.StringIO]:
    """A logger of its own (not propagating) and what it writes, one ``LEVEL message`` a line."""
    stream = io.StringIO()
    logger = logging.getLogger(name)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    return logger, stream


def test_levels_from_verbose_and_log_level() -> None:
    assert level_for("warning", 0, None) == logging.WARNING
    assert level_for("warning", 1, None) == logging.INFO
    assert level_for("info", 5, None) == logging.DEBUG
    assert level_for("info", 2, "error") == logging.ERROR


def test_the_journal_is_recognised_by_device_and_inode(tmp_path: Path) -> None:
    with open(tmp_path / "a", "w") as a, open(tmp_path / "b", "w") as b:
        st = os.fstat(a.fileno())
        env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        assert stream_is_journal(a, env)
        # A child whose stderr was redirected inherits the variable, not the stream.
        assert not stream_is_journal(b, env)
        assert not stream_is_journal(a, {})
        assert not stream_is_journal(a, {"JOURNAL_STREAM": "junk"})


def test_journal_lines_carry_the_priority_and_no_time() -> None:
    formatter = JournalFormatter()
    record = logging.LogRecord("rigmon.agent", logging.WARNING, __file__, 1, "rail %s\nsecond line", ("low",), None)
    assert formatter.format(record) == "<4>rigmon.agent: rail low\n<4>second line"
    record.levelno = logging.CRITICAL
    assert formatter.format(record).startswith("<2>")


def test_configure_logging_writes_a_file_not_the_screen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    old_level = root.level
    handler = configure_logging(logging.INFO, tmp_path / "sub" / "dash.log")
    try:
        logging.getLogger("rigmon.cluster").warning("node %s unreachable", "rig1")
        handler.flush()
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(old_level)
    assert "WARNING rigmon.cluster: node rig1 unreachable" in (tmp_path / "sub" / "dash.log").read_text()
    assert capsys.readouterr().err == ""


def frame(events: tuple[Event, ...], states: dict[str, str]) -> Frame:
    return Frame(schema=SCHEMA_VERSION, node="n1", run_id="r", seq=1, taken_at=1.0, agent_start=0.0,
                 collectors={k: CollectorStatus(state=v, ok=v in ("ok", "absent"),  # type: ignore[arg-type]
                                                error="no driver" if v == "absent" else "boom" if v == "error"
                                                else None)
                             for k, v in states.items()},
                 readings=Readings(), events=events)


def test_frame_log_says_collectors_once_and_every_event() -> None:
    logger, stream = captured("rigmon.test-frame-log")
    log = FrameLog("n1", logger)
    gpu_lost = Event(id="e1", at=1.0, kind="gpu_lost", severity="critical", subject="gpu:3", message="GPU 3 lost")
    log(frame((), {"host": "ok", "gpu": "absent", "psu": "error"}))
    log(frame((gpu_lost,), {"host": "ok", "gpu": "absent", "psu": "error"}))
    lines = stream.getvalue().splitlines()
    assert lines == ["INFO n1: collectors absent: gpu; error: psu; ok: host",
                     "DEBUG n1: gpu absent: no driver",
                     "WARNING n1: collector psu error: boom",
                     "CRITICAL n1: gpu_lost gpu:3: GPU 3 lost"]


def test_frame_log_says_why_a_collector_is_pending() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("rigmon.test-frame-log-pending")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    starting = "NVML starting: nvmlInit has not returned for 2.0 s"
    first = frame((), {"host": "ok"})
    first.collectors["gpu"] = CollectorStatus(state="pending", ok=False, error=starting)
    FrameLog("n1", logger)(first)
    assert stream.getvalue().splitlines() == ["INFO n1: collectors ok: host; pending: gpu",
                                              f"INFO n1: collector gpu pending: {starting}"]


def test_a_collector_failing_from_the_start_is_logged_once() -> None:
    # The start-up summary said "collector psu error: ..." and the frame's collector_failed event the same.
    logger, stream = captured("rigmon.test-frame-log-failed")
    failed = Event(id="e1", at=1.0, kind="collector_failed", severity="warning", subject="collector:psu",
                   message="collector psu error: boom", data={"state": "error"})
    FrameLog("n1", logger)(frame((failed,), {"host": "error", "psu": "error"}))
    assert stream.getvalue().splitlines() == ["INFO n1: collectors error: host, psu",
                                              "WARNING n1: collector host error: boom",
                                              "WARNING n1: collector_failed collector:psu: collector psu error: boom"]
