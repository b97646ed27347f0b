"""Every benchmark script runs in its short ``--smoke`` form and prints figures of the right shape (not timed)."""

from __future__ import annotations

import gzip
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: Memory the simulated node's /proc/meminfo reports: a tool showing it read the tree.
MEM = "274877906944"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--smoke", *args],
                          capture_output=True, text=True, timeout=120, cwd=BENCHMARKS.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def row(text: str, name: str, second: str | None = None) -> list[str]:
    """Cells of the first markdown table row whose first cell starts with ``name`` (and second is ``second``)."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(name) and (second is None or cells[1:2] == [second]):
            return cells
    raise AssertionError(f"no row {name!r} {second or ''} in:\n{text}")


def number(cell: str) -> float:
    match = re.search(r"-?\d+(\.\d+)?", cell)
    assert match, cell
    return float(match.group())


def test_agent_cost_measures_every_available_tool() -> None:
    out = run("agent_cost.py")
    for name in ("rigmon (node_exporter's sources)", "rigmon (all, as deployed)"):
        cells = row(out, name)
        assert number(cells[3]) > 0  # peak RSS
        assert cells[4].endswith("/0")  # no failed pull
    assert row(out, "rigmon (all, as deployed)", MEM)[6] == "yes"  # it read the tree and the ADC
    if shutil.which("prometheus-node-exporter") or shutil.which("node_exporter"):
        exporter = row(out, "node_exporter")
        assert exporter[4].endswith("/0") and row(out, "node_exporter", MEM)
        if number(exporter[1]) > 0:
            # A smoke run is a second or two: CPU ticks of 10 ms may all fall to one tool.
            assert row(out, "rigmon (node_exporter's sources) / node_exporter")
    if importlib.util.find_spec("glances") is not None:
        assert row(out, "glances (comparable plugins)", MEM)
        # glances refreshes on every pull and its samples are counted only when fresh.
        assert "glances with --cached-time 0" in out
        assert re.fullmatch(r"\d+/\d+", row(out, "glances (comparable plugins)")[5])


def test_agent_cost_refuses_to_compare_stale_samples() -> None:
    sys.path.insert(0, str(BENCHMARKS.parent))
    from benchmarks import agent_cost

    assert agent_cost.rigmon_seq({"seq": 7}) == 7
    assert agent_cost.FRESH_SHARE >= 0.9


def test_agent_full_node_separates_the_simulator() -> None:
    out = run("agent_full_node.py", "--gpus", "2")
    assert "gpu=ok" in out and "psu=ok" in out and "raid=ok" in out
    assert re.search(r"^health: (ok \(|NOT OK: )", out, re.MULTILINE), out
    if shutil.which("prometheus-node-exporter") or shutil.which("node_exporter"):
        assert row(out, "node_exporter (host, disks, md, nvme, hwmon")  # the peer ran in the same run
    assert "GPUs in the last frame: 2" in out
    # Every collector is on bench-node or absent by design: a new source must be added to the
    # node (or named absent), else every full run is refused as unhealthy.
    sys.path.insert(0, str(BENCHMARKS.parent))
    from benchmarks.agent_full_node import ABSENT_BY_DESIGN

    line = re.search(r"^collectors: (.*)$", out, re.MULTILINE)
    assert line is not None, out
    states = dict(item.split("=", 1) for item in line[1].split(", "))
    assert {name for name, state in states.items() if state == "absent"} <= ABSENT_BY_DESIGN, states
    whole = number(row(out, "whole process")[1])
    sim = number(row(out, "simulator physics thread")[1])
    assert whole > 0 and sim > 0
    assert row(out, "agent = whole - simulator - fake NVML")
    # The fake NVML's calls were timed at its dispatch point (FakeNvmlLibrary.system_call) and subtracted.
    assert number(row(out, "fake NVML library (")[0].removeprefix("fake NVML library (")) > 0
    assert row(out, "thread") == ["thread", "CPU ms per second", "fake NVML and its timing in it", "agent's, ms per second"]
    assert row(out, "(threads that exited in the window)")


def test_benchmarks_pass_mypy_strict(tmp_path: Path) -> None:
    # Every script, not one: agent_full_node.py's measurement is a typed record (`Measured`), not a dict of
    # mixed values read through casts. The folder is no package, so its modules are named from the root
    # (`benchmarks.common`), as the scripts import them.
    out = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"),
                          "--explicit-package-bases", "benchmarks"], capture_output=True, text=True,
                         cwd=BENCHMARKS.parent, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_agent_full_node_puts_the_simulated_files_where_told(tmp_path: Path) -> None:
    out = run("agent_full_node.py", "--gpus", "2", "--no-peer", "--tree-dir", str(tmp_path))
    assert f"simulated node's files in {tmp_path} (" in out and "gpu=ok" in out
    assert list(tmp_path.iterdir()) == []  # its temporary tree removed at the end


def test_agent_full_node_health_check_names_what_is_wrong() -> None:
    import argparse

    from dataclasses import replace

    sys.path.insert(0, str(BENCHMARKS.parent))
    from benchmarks.agent_full_node import EVERY_SOURCE, Measured, health_problems

    healthy = Measured(elapsed=60.0, frames=60, frames_span_s=60.0, windows=600, gpus=8, lost=0,
                       statuses={**dict.fromkeys(EVERY_SOURCE, "ok"), "rail_path": "absent", "amd_gpu": "absent"})
    args = argparse.Namespace(gpus=8, still=False)
    assert health_problems(healthy, args) == []
    # A source missing from the frame (switched off) makes a smaller node.
    assert health_problems(replace(healthy, statuses={k: v for k, v in healthy.statuses.items() if k != "raid"}),
                           args) == ["collector raid is not in the frame (switched off?)"]
    # The recorded 15.0 ms figure: 6.9 windows a second instead of 10.
    assert health_problems(replace(healthy, windows=414), args) == ["6.9 ADC windows/s received, 10 configured"]
    # Counted between the window's first and last frames: a 30 s window holding 31 frames spans 31 s of
    # sample time and is healthy (its wall-clock window would have read 10.3 windows/s).
    assert health_problems(replace(healthy, elapsed=30.0, frames=31, frames_span_s=31.0, windows=310), args) == []
    # A sagging node pushes a frame per sag window and fires alarms.
    assert health_problems(replace(healthy, pulls=30), args) == [
        "30 pulls answered 200 for a 60 s window (one a second expected)"]
    sick = replace(healthy, frames=96, firing="psu_rail_low_critical", lost=1,
                   statuses={**healthy.statuses, "gpu": "error"})
    problems = " ".join(health_problems(sick, args))
    for part in ("96 frames", "collector gpu is error", "1 lost", "psu_rail_low_critical"):
        assert part in problems
    # A still node (--still): no ADC line may arrive, and only the ADC's staleness rule fires.
    still = argparse.Namespace(gpus=8, still=True)
    assert health_problems(replace(healthy, windows=0, firing="psu_adc_silent"), still) == []
    assert health_problems(replace(healthy, firing="psu_adc_silent"), still) == [
        "10.0 ADC windows/s received, 0 expected on a still node"]
    assert health_problems(replace(healthy, windows=0), still) == ["alarms firing: none"]


def test_adc_ingest_drops_nothing() -> None:
    out = run("adc_ingest.py")
    assert re.search(r"valid lines received: \d+, dropped: 0,", out), out


def test_probe_cost_measures_cpu_and_accuracy() -> None:
    out = run("probe_cost.py")
    assert row(out, "probing (difference)")
    for delay in ("direct (no relay)", "0", "20", "300", "2000"):
        cells = row(out, delay)
        received, sent = (int(n) for n in cells[2].split("/"))
        assert sent > 0 and received == sent, cells  # nothing is lost on loopback
        assert number(cells[3]) >= number(delay) if delay[0].isdigit() else number(cells[3]) > 0


def test_alarm_latency_goes_through_the_pty() -> None:
    out = run("alarm_latency.py")
    fired = row(out, "sag line on the pty -> alarm firing in the agent")
    hook = row(out, "sag line on the pty -> webhook request at the receiver")
    assert 0 < number(fired[1]) <= number(hook[1]) * 1.5 + 50


def test_tick_profile_covers_collectors_and_frame_work() -> None:
    out = run("tick_profile.py", "--gpus", "2")
    for name in ("collector host", "collector gpu", "collector raid", "alarm engine", "encode(frame)"):
        assert number(row(out, name)[1]) >= 0


def test_tick_profile_live_times_each_collector_and_the_tick() -> None:
    out = run("tick_profile.py", "--gpus", "2", "--live")
    assert "the simulator stepping between them" in out
    parts = [number(row(out, f"collector {name}: collect(), live")[1]) for name in ("host", "gpu", "raid", "psu_hwmon")]
    assert all(ms > 0 for ms in parts)
    assert number(row(out, "all collectors of a tick, live")[1]) >= sum(parts) - 0.005  # printed rounded
    assert "alarm engine" not in out


def test_gpu_collector() -> None:
    out = run("gpu_collector.py", "--gpus", "2")
    assert "| wall mean | p50 |" in out and "NVML calls per GPU" in out


def test_real_root_reads_times_both_ways() -> None:
    out = run("real_root_reads.py")
    host = row(out, "host")  # /proc/stat and friends exist wherever the tests run
    assert number(host[1]) > 0 and number(host[2]) > 0
    assert row(out, "**all of them**")


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py")))
def test_every_script_has_a_smoke_mode(script: str) -> None:
    if script == "common.py":
        pytest.skip("shared helpers, not a benchmark")
    assert "--smoke" in (BENCHMARKS / script).read_text()


def test_journal_writes_blocks_and_exports_every_node() -> None:
    out = run("journal.py")
    size = re.search(r"^journal: ([\d.]+) MB per node per day at 1 Hz \(frame JSON ([\d.]+) kB, in blocks (\d+) B\)$",
                     out, re.MULTILINE)
    assert size and float(size[1]) > 0 and float(size[2]) > 0 and int(size[3]) > 0, out
    assert '"block_frames": 300,' in out  # the size part reached the blocks
    export = re.search(r"^export: 60 s of 2 nodes \((\d+) frames, \d+ MB of frame JSON\) in [\d.]+ s \(median of 1 runs\)$",
                       out, re.MULTILINE)
    assert export and int(export[1]) >= 2 * 60, out  # every journaled frame of both nodes
    assert '"errors": []' in out


def test_decode_frames_reports_a_cost() -> None:
    out = run("decode_frames.py")
    assert number(row(out, "decode CPU ms per frame")[1]) > 0
    assert number(row(out, "summary record (`view=summary` SSE data) to record, dashboard decode")[1]) > 0
    assert re.search(r"their summary records: JSON \d+-\d+ bytes", out), out


def test_decode_frames_self_check_catches_a_record_of_another_frame() -> None:
    spec = importlib.util.spec_from_file_location("decode_frames", BENCHMARKS / "decode_frames.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    from rigmon.schema import Frame, decode, encode
    from rigmon.summary import summary_record

    recorded = sorted(BENCHMARKS.parent.joinpath("tests", "fixtures", "frames").glob("*.jsonl.gz"))
    raw = gzip.decompress(recorded[0].read_bytes()).splitlines()[:2]
    frames = [decode(Frame, line) for line in raw]
    records = [summary_record(frame) for frame in frames]
    events = [encode(record).decode() for record in records]
    assert script._self_check(raw, frames, records, events) == []
    swapped = script._self_check(raw, frames, records, events[::-1])
    assert len(swapped) == 2 and "does not decode to what the agent built" in swapped[0]


def test_dash_64_nodes_follows_live_nodes() -> None:
    out = run("dash_64_nodes.py")
    assert re.search(r"recorded \d+ frames .* GPUs 2; collectors .*gpu=ok.*psu=ok", out), out
    assert re.search(r"live nodes: 2 before, 2 after", out), out
    assert re.search(r"dashboard peak RSS: \d+ MB", out), out
    assert re.search(r"frame-to-screen latency: median \d+ ms, p99 \d+ ms, max \d+ ms over [1-9]\d* frames on screen", out), out
    for part in ("agent -> filed in the store", "filed -> drawn (screen refresh)", "drawn -> rendered"):
        assert number(row(out, part)[1]) >= 0


def test_frame_replay_serves_recorded_frames() -> None:
    out = run("frame_replay.py")
    assert re.search(r"node01: seq \d+, GPUs 2, collectors .*gpu.*psu", out), out
    assert re.search(r"node02: seq \d+, GPUs 2", out), out


def test_soak_reports_memory_descriptors_and_threads() -> None:
    out = run("soak.py")
    assert "rss_mb" in out and "fds" in out and "threads" in out and "failures 0, gaps 0" in out, out
    assert "dashboard's process" in out and "live at end 1/1" in out, out


def test_startup_times_both_commands_against_the_bare_interpreter() -> None:
    out = run("startup.py")
    for name in ("`rigmon dash` to its first screen", "`rigmon agent` to its first frame", "bare interpreter"):
        cells = row(out, name)
        assert number(cells[1]) > 0 and cells[5].endswith("x")


def test_journal_cpu_times_every_part_of_the_writer() -> None:
    out = run("journal_cpu.py")
    for part in ("write", "downsample", "retain", "compact"):
        assert number(row(out, part)[1]) >= 0
    assert number(row(out, "**total**")[1]) > 0


def test_psu_reader_counts_every_line() -> None:
    out = run("psu_reader.py")
    windows = row(out, "windows the collector counted")[1]
    got, sent = windows.split("/")
    assert got == sent and int(sent) > 0
    assert number(row(out, "reader thread CPU per line")[1]) > 0


def test_tp_rtt_breakdown_times_each_leg_of_a_round_trip() -> None:
    out = run("tp_rtt_breakdown.py", "--wire-thread")
    for name in ("roce (12 us): kernel rtt", "roce: responder hold", "roce: measured", "mgmt: measured",
                 "relay wake, request leg", "relay wake, reply leg"):
        cells = row(out, name)
        assert int(cells[1]) >= 10 and number(cells[2]) >= 0, cells
    assert "node01's readings" in out


def test_agent_full_node_measures_the_settings_it_is_given(tmp_path: Path) -> None:
    # A trade-off measured (issue 19's option b): the agent runs with the settings, and says so.
    settings = tmp_path / "tradeoff.toml"
    settings.write_text("[collectors.nvme]\ninterval_s = 5.0\n")
    out = run("agent_full_node.py", "--gpus", "2", "--no-peer", "--agent-config", str(settings))
    assert "agent settings over the node's own (--agent-config): {'collectors': {'nvme': {'interval_s': 5.0}}}" in out
    assert "nvme=ok" in out
    # The settings reach the agent: a source switched off is missing, and the node is no full node.
    settings.write_text("[collectors.nvme]\nenabled = false\n")
    out = run("agent_full_node.py", "--gpus", "2", "--no-peer", "--agent-config", str(settings))
    assert "nvme=" not in out and "collector nvme is not in the frame (switched off?)" in out
    settings.write_text("[collectors.nvme]\ninterval_s = 5.0\nbogus = 1\n")
    failed = subprocess.run([sys.executable, str(BENCHMARKS / "agent_full_node.py"), "--smoke", "--no-peer",
                             "--agent-config", str(settings)], capture_output=True, text=True, timeout=300)
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert "collectors.nvme.bogus: unknown key" in failed.stderr
