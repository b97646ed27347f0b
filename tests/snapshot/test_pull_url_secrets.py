"""An agent URL given with a user and password (an agent behind a proxy that asks for them) keeps them out of the
bundle: its manifest and REPORT.md name the agent by scheme, host and port, as the redaction of URLs does."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import httpx

from rigmon.snapshot.command import pull_parts, write_snapshot
from rigmon.snapshot.failures import failure_line
from rigmon.snapshot.progress import Progress
from rigmon.snapshot.pull import pull_agent
from tests.snapshot.test_pull_retry import journaled_agent
from tests.test_cli import free_port


def _bundle_text(path: Path) -> str:
    with tarfile.open(path) as tar:
        return "".join((tar.extractfile(m) or io.BytesIO()).read().decode("utf-8", "replace")
                       for m in tar if m.isfile() and not m.name.endswith(".gz"))


async def test_a_password_in_an_agent_url_is_in_no_file_of_the_bundle(tmp_path: Path) -> None:
    agent, _ = journaled_agent(tmp_path)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app())) as client:
        part = await pull_agent(client, "http://bob:hunter2@agent:9871", 1001.0, Progress(4, io.StringIO()))
    assert part.info is not None and part.frame_count
    # As every URL that leaves a node: the user part replaced (`rigmon.redact.redact_urls`).
    assert part.source == "http://<redacted>@agent:9871"
    text = _bundle_text(write_snapshot([part], 1001.0, tmp_path / "b.tar.gz"))
    assert "@agent:9871" in text and "hunter2" not in text and "bob" not in text


def test_nor_in_what_is_said_of_an_agent_that_cannot_be_pulled() -> None:
    url = f"http://bob:hunter2@127.0.0.1:{free_port()}"
    stream = io.StringIO()
    (part,) = pull_parts([url], [], 60.0, stream=stream)
    said = stream.getvalue() + failure_line(part) + part.node + part.source
    assert part.error is not None and "connection refused" in part.error
    assert "hunter2" not in said and "bob" not in said, said
