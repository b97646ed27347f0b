"""Bug-report bundles: round trip from real agents, --journal mode with no agent, secrets, report."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.journal import JournalReader
from rigmon.agent.server import make_server
from rigmon.config import AgentConfig, AgentSection, JournalSection
from rigmon.redact import REDACTED, redact
from rigmon.schema import Alarm, History, HistorySeries, SchemaError, decode, encode
from rigmon.sim.rig import running_rig
from rigmon.snapshot.bundle import BundleError, NodePart, read_bundle, write_bundle
from rigmon.snapshot.command import parse_duration, take_snapshot
from rigmon.snapshot.history_decode import decode_history
from rigmon.snapshot.progress import Progress
from rigmon.snapshot.report import CHARTS, chart_series, render_report
from tests.agent.helpers import listening_port
from tests.agent.test_api import Counter

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


async def wait_frames(agents: list[Agent], frames: int) -> None:
    for _ in range(2000):
        if all(a.journal is not None and a.journal.frames_written >= frames for a in agents):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("agents never journaled enough frames")


async def test_bundle_from_real_agents_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "snap.tar.gz"
    err = io.StringIO()
    async with running_rig("healthy", 2, base_port=0, speed=20, workdir=tmp_path / "sim", interval_s=0.1) as rr:
        await wait_frames(rr.agents, 15)
        path, parts = await asyncio.to_thread(take_snapshot, rr.urls, [], 600.0, out, None, err)
    bundle = read_bundle(path)
    assert [n["node"] for n in bundle.manifest["nodes"]] == ["node01", "node02"]
    assert bundle.manifest["format"] == 2 and all(n["error"] is None for n in bundle.manifest["nodes"])
    for node, entry in zip(bundle.nodes, bundle.manifest["nodes"]):
        with JournalReader(tmp_path / "sim" / "state" / node.node) as reader:
            assert node.frames, "no frames in the bundle"
            last = node.frames[-1].taken_at
            # Frames still in the writer's queue at pull time may be missing at the very end.
            assert node.frames == reader.frames(entry["from_at"], last)
            assert node.events == reader.events(entry["from_at"], entry["to_at"])
            assert node.history is not None
            expected = reader.history(node.node, entry["from_at"], entry["to_at"], 0.1)
        assert set(node.history.series) == set(expected.series)
        assert "host.cpu_pct" in node.history.series and "net[eth0].rx_bytes_per_s" in node.history.series
        assert node.info is not None and node.info.node == node.node
        assert node.inventory["readings"]["net"][0]["name"]
        assert "proc/net/dev" in node.files and "sys/class/net/eth0/speed" in node.files
        assert node.config["agent"]["node"] == node.node
    assert "## node01" in bundle.report and "Throughput" in bundle.report
    assert "\x1b[" not in bundle.report
    # Not a terminal: plain progress lines, one per step.
    assert err.getvalue().count("\n") == 8 and "[8/8]" in err.getvalue()


@contextlib.asynccontextmanager
async def agent_with_token(tmp_path: Path, token: str) -> AsyncIterator[tuple[Agent, str]]:
    token_file = tmp_path / "token"
    token_file.write_text(token)
    config = AgentConfig(agent=AgentSection(node="secretive", root=str(tmp_path), interval_s=0.05,
                                            state_dir=str(tmp_path / "state"), token_file=str(token_file)))
    agent = Agent(config, token=token, collectors={"counter": Counter()})
    server = make_server(agent, "127.0.0.1", 0)
    agent.start()
    task = asyncio.create_task(server.serve())
    port = await listening_port(server)
    try:
        yield agent, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await agent.stop()
        await task


async def test_secrets_never_appear_in_a_bundle(tmp_path: Path) -> None:
    token = "tok-6f1e0c9b-never-in-a-bundle"
    out = tmp_path / "snap.tar.gz"
    async with agent_with_token(tmp_path, token) as (agent, url):
        await wait_frames([agent], 5)
        path, parts = await asyncio.to_thread(take_snapshot, [url], [], 60.0, out, token, io.StringIO())
    assert parts[0].error is None and parts[0].frame_count == len(parts[0].frame_lines()) > 0
    assert parts[0].alarms == ()  # asked for, none active
    bundle = read_bundle(path)
    for name, content in bundle.members.items():
        assert token.encode() not in content, name
    assert token.encode() not in path.read_bytes()


async def test_a_wrong_token_is_an_error_not_a_crash(tmp_path: Path) -> None:
    async with agent_with_token(tmp_path, "right") as (agent, url):
        path, parts = await asyncio.to_thread(take_snapshot, [url], [], 60.0, tmp_path / "s.tar.gz", "wrong",
                                              io.StringIO())
    assert parts[0].error is not None and "401" in parts[0].error
    assert read_bundle(path).manifest["nodes"][0]["error"] == parts[0].error


async def test_a_refused_token_file_is_named_as_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``rigmon snapshot --token-file PATH`` refused: the sentence said ``check that --token-file FILE holds``."""
    from rigmon.cli import main

    wrong = tmp_path / "old.token"
    wrong.write_text("wrong\n")
    wrong.chmod(0o600)
    async with agent_with_token(tmp_path, "right") as (_, url):
        status = await asyncio.to_thread(main, ["snapshot", url, "--token-file", str(wrong), "--since", "1m",
                                                "-o", str(tmp_path / "s.tar.gz")])
    assert status == 3
    assert f"check that --token-file {wrong} holds" in capsys.readouterr().err


async def test_an_agent_without_a_journal_still_gives_the_frames_it_keeps_in_memory(tmp_path: Path) -> None:
    # [journal] enabled = false (or a journal that cannot be read): /v1/history says 404 (503). The
    # bundle held the latest frame alone; the ring buffer has the minutes before it.
    config = AgentConfig(agent=AgentSection(node="nojournal", root=str(tmp_path), interval_s=0.05,
                                            state_dir=str(tmp_path / "state")),
                         journal=JournalSection(enabled=False))
    agent = Agent(config, collectors={"counter": Counter()})
    server = make_server(agent, "127.0.0.1", 0)
    agent.start()
    task = asyncio.create_task(server.serve())
    try:
        port = await listening_port(server)
        url = f"http://127.0.0.1:{port}"
        while agent.buffer is None or agent.buffer.latest is None or agent.buffer.latest.seq < 20:
            await asyncio.sleep(0.02)
        err = io.StringIO()
        path, parts = await asyncio.to_thread(take_snapshot, [url], [], 60.0, tmp_path / "s.tar.gz", None, err)
    finally:
        server.should_exit = True
        await agent.stop()
        await task
    (part,) = parts
    assert part.error is not None and "no journal on the agent" in part.error and "in memory" in part.error
    (node,) = read_bundle(path).nodes
    seqs = [f.seq for f in node.frames]
    assert len(seqs) >= 20 and seqs == list(range(1, len(seqs) + 1)) and node.frames[-1] == part.latest
    assert node.history is not None and len(node.history.series["temperatures[c].temp_c"].at) == len(seqs)
    assert any(e.kind == "agent_started" for e in node.events)
    assert "[4/4]" in err.getvalue()


def test_redaction_of_tokens_and_webhook_urls() -> None:
    config = {
        "agent": {"token_file": "/etc/rigmon/token", "listen": "0.0.0.0:9871"},
        "notify": {
            "webhooks": [{"url": "https://user:pw@hooks.slack.com/services/T000/B000/XXXXSECRET"},
                         {"url": "https://ntfy.sh/secret-topic?auth=QUERYSECRET"}],
            "token": "BEARERSECRET",
            "headers": {"Authorization": "Bearer HEADERSECRET"},
            "command": "curl https://example.org/hook?key=CMDSECRET",
        },
    }
    red = redact(config)
    text = repr(red)
    for secret in ("pw", "XXXXSECRET", "secret-topic", "QUERYSECRET", "BEARERSECRET", "HEADERSECRET", "CMDSECRET"):
        assert secret not in text
    assert red["agent"] == config["agent"]
    assert red["notify"]["webhooks"][0]["url"] == f"https://{REDACTED}@hooks.slack.com/{REDACTED}"
    assert red["notify"]["token"] == REDACTED
    assert red["notify"]["command"] == f"curl https://example.org/{REDACTED}"


def test_journal_mode_needs_no_agent(tmp_path: Path) -> None:
    async def record() -> None:
        async with running_rig("healthy", 1, base_port=0, speed=10, workdir=tmp_path / "sim", interval_s=0.05) as rr:
            await wait_frames(rr.agents, 20)

    asyncio.run(record())
    state = tmp_path / "sim" / "state" / "node01"
    out = tmp_path / "crash.tar.gz"
    proc = subprocess.run([sys.executable, "-m", "rigmon", "snapshot", "--journal", str(state), "--since", "1h",
                           "-o", str(out)], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "[4/4] node01" in proc.stderr
    bundle = read_bundle(out)
    (node,) = bundle.nodes
    with JournalReader(state) as reader:
        span = reader.time_range()
        assert span is not None
        assert node.frames == reader.frames(span[1] - 3600, span[1])
        assert node.events == reader.events(span[1] - 3600, span[1])
    assert node.node == "node01" and node.info is not None and node.config["agent"]["node"] == "node01"
    assert bundle.manifest["nodes"][0]["source"].startswith("journal:")
    assert "no live capture" in node.files["ERRORS.txt"]


def test_snapshot_command_errors() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "rigmon", "snapshot", *args], capture_output=True, text=True,
                              env=ENV, cwd=REPO, timeout=60)

    assert "at least one agent URL or --journal" in run("-o", "x.tar.gz").stderr
    assert "--since" in run("--journal", "/nonexistent", "--since", "soon", "-o", "x.tar.gz").stderr


@pytest.mark.parametrize("text, seconds", [("90", 90), ("30s", 30), ("10m", 600), ("1h30m", 5400), ("2d", 172800)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "1x", "h", "-5m", "10m junk"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_report_charts_series_by_unit_suffix() -> None:
    at = tuple(1000.0 + 60 * i for i in range(30))

    def series(values: list[float]) -> HistorySeries:
        return HistorySeries(at=at, min=tuple(v - 0.2 for v in values), mean=tuple(values), max=tuple(v + 5 for v in values))

    history = History(schema=1, node="v100", from_at=1000.0, to_at=2800.0, tier="60s", step_s=60.0, series={
        "psu[/dev/ttyACM0].volts.min_volts": series([12.0 - 0.01 * i for i in range(30)]),
        "gpus[0].power_w": series([250.0 + i for i in range(30)]),
        "gpus[0].power_limit_w": series([300.0] * 30),
        "host.cpu_pct": series([50.0] * 30),
    })
    report = render_report([NodePart(node="v100", source="x", history=history)], 1800.0, 2800.0)
    assert "### Rail voltage (minimum per point)" in report and "### Power (maximum per point)" in report
    assert "psu[/dev/ttyACM0].volts.min_volts" in report and "gpus[0].power_w" in report
    assert "power_limit_w" not in report and "cpu_pct" not in report and "Throughput" not in report
    assert "11.5" in report  # the voltage axis reaches down to the minimum (11.71 - 0.2)
    assert "\x1b[" not in report


def test_report_charts_the_12v_rail_not_a_boards_lowest_voltages() -> None:
    # A server board's Super I/O reports its CPU core (0.9 V), 3.3 V and 5 V and their limits (0 V):
    # chosen by the lowest minimum they took every line of the rail chart and the ADC's sag was not in it.
    at = tuple(1000.0 + i for i in range(30))

    def flat(v: float) -> HistorySeries:
        return HistorySeries(at=at, min=(v,) * 30, mean=(v,) * 30, max=(v,) * 30)

    sag = tuple(11.3 if i == 20 else 11.95 for i in range(30))
    series = {f"hwmon_volts[hwmon2/in{i}].{key}": flat(v) for i, base in enumerate((0.9, 1.05, 1.2, 1.8, 3.3, 5.0))
              for key, v in (("volts", base), ("min_volts", 0.0), ("max_volts", base * 1.1))}
    series["psu_rail.volts.min_volts"] = HistorySeries(at=at, min=sag, mean=sag, max=sag)
    series["psu_rail.volts.max_volts"] = flat(12.1)  # the ADC's maximum: not a minimum to chart
    series["pmbus_psus[hwmon20].vout_volts"] = flat(12.02)
    series["pmbus_psus[hwmon20].vin_volts"] = flat(230.0)
    history = History(schema=1, node="v100", from_at=1000.0, to_at=1029.0, tier="frames", step_s=1.0, series=series)
    chosen = [name for name, _ in chart_series(history, CHARTS[0])]
    assert chosen == ["psu_rail.volts.min_volts", "pmbus_psus[hwmon20].vout_volts"]
    report = render_report([NodePart(node="v100", source="x", history=history)], 30.0, 1030.0)
    assert "psu_rail.volts.min_volts" in report and "hwmon_volts" not in report


def test_report_chart_shows_a_sag_at_the_start_and_names_its_worst_point() -> None:
    # The legend was drawn inside the plot, over its left part: a sag early in the window was under it.
    at = tuple(1000.0 + i for i in range(60))
    names = ["psu_rail.volts.min_volts", "psu_rail.channels_volts.v.min_volts", "psu_rail.channels_volts.vpsu.min_volts",
             "psu_rail.volts.mean_volts", "psu_rail.volts.max_volts", "pmbus_psus[hwmon20].vout_volts"]
    series = {}
    for k, name in enumerate(names):
        values = tuple(11.3 if (i == 3 and k == 0) else 11.95 + 0.01 * k for i in range(60))
        series[name] = HistorySeries(at=at, min=values, mean=values, max=values)
    history = History(schema=1, node="v100", from_at=1000.0, to_at=1059.0, tier="frames", step_s=1.0, series=series)
    report = render_report([NodePart(node="v100", source="x", history=history)], 60.0, 1060.0)
    chart = report.split("### Rail voltage (minimum per point)")[1].split("```")[1]
    bottom = next(line for line in chart.splitlines() if "┤" in line and line.split("┤")[0].strip().startswith("11.3"))
    plot = bottom.split("┤", 1)[1]
    assert any(c in "▀▄▌▐▖▗▘▝▚▞▛▜▟▙█" for c in plot[: len(plot) * 2 // 5]), chart
    assert "psu_rail.volts.min_volts" not in chart  # the names are listed below it
    assert "- psu_rail.volts.min_volts: lowest 11.3 V at 1970-01-01 00:16:43 UTC" in report


def test_report_names_the_alarms_still_firing_whose_events_are_before_the_window() -> None:
    # GPU 3 fell off the bus two hours ago; `rigmon snapshot` (last hour) has none of its events.
    lost = Alarm(id="r-a4", rule="gpu_lost", rule_kind="state", severity="critical", node="v100", subject="gpu:3",
                 state="firing", message="GPU 3 is lost (fell off the bus)", started_at=1000.0, updated_at=1000.0)
    history = History(schema=1, node="v100", from_at=8200.0, to_at=11800.0, tier="60s", step_s=60.0, series={})
    report = render_report([NodePart(node="v100", source="x", history=history, alarms=(lost,))], 3600.0, 11800.0)
    assert "No events in the window." in report
    assert "| gpu_lost | critical | firing | gpu:3 | 1970-01-01 00:16:40 UTC | GPU 3 is lost (fell off the bus) |" in report
    quiet = render_report([NodePart(node="v100", source="x", history=history, alarms=())], 3600.0, 11800.0)
    assert "No alarm active when the snapshot was taken." in quiet


def test_report_carries_no_terminal_control_from_agents() -> None:
    part = NodePart(node="evil\x1b]0;pwned\x07", source="x", error="refused \x1b[2J\u202eboom")
    report = render_report([part], 60.0, 1000.0)
    assert "evil\\x1b]0;pwned\\x07" in report and "refused \\x1b[2J\\u202eboom" in report
    assert not any(c in report for c in "\x1b\x07\u202e")
    assert report.count("\n") > 5  # the report's own lines stay lines


def test_progress_bar_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    progress = Progress(2, stream, width=10)
    progress.step("n1", "info")
    progress.step("n1", "done")
    assert stream.getvalue() == "\r[#####-----] 1/2 n1: info\x1b[K\r[##########] 2/2 n1: done\x1b[K\n"


def test_progress_lines_carry_an_agents_words_as_text() -> None:
    # A node name and a reason come from the agent: an escape in either must not reach the terminal.
    stream = io.StringIO()
    progress = Progress(2, stream)
    progress.step("evil\x1b]0;pwned\x07", "refused \x1b[2J")
    progress.note("n\u202e2", "busy \x1b[31m")
    assert not any(c in stream.getvalue() for c in "\x1b\x07\u202e")
    assert "evil\\x1b]0;pwned\\x07" in stream.getvalue()


def small_history() -> History:
    return History(schema=1, node="n1", from_at=1000.0, to_at=1060.0, tier="60s", step_s=60.0, series={
        "gpus[0].power_w": HistorySeries(at=(1000.0, 1060.0), min=(1.0, 2.0), mean=(1.5, 2.5), max=(2, 3.0)),
        "host.cpu_pct": HistorySeries(at=(), min=(), mean=(), max=()),
    }, more=True)


def test_decode_history_matches_the_generic_decoder() -> None:
    raw = encode(small_history())
    assert decode_history(raw) == decode(History, raw)
    data = json.loads(raw)
    for bad in ([1.0, None], [1.0], [1.0, "2"], None):
        data["series"]["gpus[0].power_w"]["min"] = bad
        with pytest.raises(SchemaError, match="gpus"):
            decode_history(json.dumps(data).encode())
    with pytest.raises(SchemaError):
        decode_history(b'{"schema": 1, "series": []}')


def test_bundle_stores_frames_as_received_in_a_gzip_tar(tmp_path: Path) -> None:
    lines = [json.dumps({"seq": i}).encode() for i in range(5)]
    # Two members, as an agent sends them: a stored block, then recent frames.
    frames_gz = gzip.compress(b"".join(x + b"\n" for x in lines[:3])) + gzip.compress(
        b"".join(x + b"\n" for x in lines[3:]))
    part = NodePart(node="n1", source="x", history=small_history(), history_json=b'{"as":"received"}',
                    frames_gz=frames_gz, frame_count=5)
    assert part.frame_lines() == lines
    path = write_bundle(tmp_path / "b.tar.gz", [part], 60.0, "# report\n", created_at=1000.0)
    with tarfile.open(path, "r:gz") as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert members["nodes/n1/frames.jsonl.gz"] == frames_gz
    assert members["nodes/n1/series.json"] == b'{"as":"received"}\n'
    assert json.loads(members["manifest.json"])["nodes"][0]["frames"] == 5
    assert subprocess.run(["gzip", "-t", str(path)]).returncode == 0
    # Host names, command lines and configuration: readable by its owner only, whatever the umask.
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_bundles_of_format_1_still_read(tmp_path: Path) -> None:
    path = tmp_path / "old.tar.gz"
    manifest = {"format": 1, "nodes": [{"node": "n1", "dir": "nodes/n1"}]}
    with tarfile.open(path, "w:gz") as tar:
        for name, content in {"manifest.json": json.dumps(manifest).encode(),
                              "nodes/n1/frames.jsonl": b'{"schema": 2}\n'}.items():
            info = tarfile.TarInfo(f"top/{name}")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    with pytest.raises(BundleError, match="nodes/n1/frames.jsonl: schema version 2"):
        read_bundle(path)  # the old frames.jsonl member is read (and checked)
    manifest["nodes"] = []
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("top/manifest.json")
        content = json.dumps(manifest).encode()
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    assert read_bundle(path).manifest["format"] == 1


def test_report_lists_the_jobs_marks_among_the_warnings() -> None:
    from rigmon.schema import Event

    def event(n: int, kind: str, severity: str, message: str) -> Event:
        return Event(id=f"r-{n}", at=1000.0 + n, kind=kind, severity=severity, subject="node:v100",  # type: ignore[arg-type]
                     message=message)

    history = History(schema=1, node="v100", from_at=1000.0, to_at=2800.0, tier="frames", step_s=1.0, series={},
                      events=(event(1, "agent_started", "info", "agent started"),
                              event(2, "mark", "info", "epoch 3 checkpoint"),
                              event(3, "gpu_lost", "critical", "GPU 3 lost")))
    report = render_report([NodePart(node="v100", source="x", history=history)], 1000.0, 2800.0)
    assert "**info** `mark` node:v100: epoch 3 checkpoint" in report
    assert "**critical** `gpu_lost`" in report and "agent started" not in report
