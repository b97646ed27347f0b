"""The incident story on the real `lab` demo: a simulated rig (`rigmon sim --scenario lab`, real
agents on loopback) and the dashboard over it, in a Pilot and under tmux at 80x24.

The lab's node01 sags to ~11.26 V and loses GPU 3 about 15 s after start, node02 has a loosely
seated GPU 2 and node03 a USB4 link at half speed (README, "Simulator").
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from rigmon.cli_sim import _read_urls
from rigmon.cluster.config import NodeTarget
from rigmon.tui.app import RigmonApp
from rigmon.tui.widgets.node_row import NodeRow
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.tmux_server import tmux_command

REPO = Path(__file__).resolve().parents[2]
NODES = 4

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """URLs of the lab's agents, started once for this module (the incident happens once, at the start)."""
    lab = tmp_path_factory.mktemp("lab")
    # Its temporary directory in this test's: a simulator too slow to stop is killed, which leaves it behind.
    proc = subprocess.Popen([sys.executable, "-m", "rigmon", "sim", "--scenario", "lab", "--nodes", str(NODES),
                             "--base-port", "0", "--seed", "7", "--log-file", str(lab / "sim.log")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(lab)})
    try:
        urls = _read_urls(proc, NODES, 60.0)
        assert urls is not None, "the simulated rig did not start"
        yield urls
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def row_of(app: RigmonApp, name: str) -> NodeRow | None:
    return next((r for r in app.screen.query(NodeRow) if r.view is not None and r.view.name == name), None)


def row_text(row: NodeRow) -> str:
    console = Console(width=row.size.width, record=True, color_system=None, file=io.StringIO())
    console.print(row.render())
    return console.export_text()


def critical_toast(app: RigmonApp) -> bool:
    # At 80x24 the toast is one line, title and all (`rigmon.tui.critical_toast.toast_line`).
    return any(n.title.startswith("CRITICAL") or n.message.startswith("CRITICAL") for n in app._notifications)


def rail_figure(text: str) -> float | None:
    match = re.search(r"(\d+\.\d{3}) V", text.splitlines()[0])
    return float(match.group(1)) if match else None


async def test_the_rail_figure_shows_the_sag_in_red_with_the_toast_and_every_row_says_why(lab: list[str]) -> None:
    app = RigmonApp([NodeTarget(url) for url in lab])
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_for(lambda: critical_toast(app), timeout_s=90.0)

        def rail_shown() -> bool:
            row = row_of(app, "node01")
            figure = rail_figure(row_text(row)) if row is not None else None
            return figure is not None and figure <= 11.5

        # The row's figure is the worst of its window, so it shows the sag while the toast is up: the
        # deadline only bounds a hang (tests assert on no wall-clock time).
        await wait_for(rail_shown, timeout_s=30.0)
        row = row_of(app, "node01")
        assert row is not None
        # In the error colour, the colour the theme gives critical.
        bad = row.get_component_rich_style("node-row--bad", partial=True)
        assert bad.color is not None and bad.color.triplet is not None
        assert bad.color.triplet.hex == app.theme_variables["error"].lower()
        from rigmon.tui.row_columns import figure_level
        assert row.view is not None and figure_level("rail", row.view.summary) == "bad"

        def reasons() -> dict[str, str]:
            out = {}
            for name in ("node01", "node02", "node03"):
                r = row_of(app, name)
                lines = row_text(r).splitlines() if r is not None else []
                out[name] = lines[2] if len(lines) > 2 else ""
            return out

        def all_say_why() -> bool:
            why = reasons()
            return (re.search(r"GPU 3 lost [\d.]+ s after rail 11\.\d{3} V", why["node01"]) is not None
                    and "GPU 2" in why["node02"] and ("NVLink" in why["node02"] or "PCIe x8 of x16" in why["node02"])
                    and "USB4 0-1 at 20 of 40 Gb/s" in why["node03"])

        try:
            await wait_for(all_say_why, timeout_s=60.0)
        except TimeoutError:
            pytest.fail(f"rows do not say why: {reasons()}")
        for name, line in reasons().items():
            assert len(line.rstrip()) <= 80, (name, line)
        await pilot.pause()


async def test_the_sag_alarm_keeps_its_worst_value_after_the_rail_recovers(lab: list[str]) -> None:
    async with httpx.AsyncClient(base_url=lab[0], timeout=5.0) as client:
        deadline = time.monotonic() + 120.0
        seen: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            answer = (await client.get("/v1/alarms")).json()
            assert answer["node"] == "node01"
            alarms = [a for a in answer["active"] + answer["recent"] if a["rule"] == "psu_rail_low_critical"]
            seen += alarms
            recovered = [a for a in alarms if isinstance(a.get("value_now"), (int, float))
                         and a["value_now"] >= 11.55 or a["state"] == "resolved"]
            if recovered:
                alarm = recovered[0]
                assert isinstance(alarm["value"], float) and alarm["value"] < 11.4
                assert f"{alarm['value']:.3f} V" in str(alarm["message"])
                # Never better than anything seen before of this episode.
                assert all(alarm["value"] <= a["value"] for a in seen if a["id"] == alarm["id"])
                return
            await asyncio.sleep(1.0)
        pytest.fail(f"the rail never recovered: {seen[-1:]}")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_node01_opens_on_the_sag_before_the_gpu_loss_at_80x24(tmp_path: Path) -> None:
    session = f"rigmon-lab-{os.getpid()}"
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                                                  "XDG_STATE_HOME", "XDG_CACHE_HOME",
                                                                  "RIGMON_AGENT_STATE_DIR") if k in os.environ)
    command = f"cd {REPO} && env {env} PYTHONPATH={REPO} {sys.executable} -m rigmon demo --seed 11"
    subprocess.run(tmux_command("new-session", "-d", "-s", session, "-x", "80", "-y", "24", command), check=True)

    def capture() -> list[str]:
        return subprocess.run(tmux_command("capture-pane", "-p", "-t", session), check=True, capture_output=True,
                              text=True).stdout.splitlines()

    try:
        deadline = time.monotonic() + 120.0
        lines: list[str] = []
        while time.monotonic() < deadline:
            lines = capture()
            if any("GPU 3 lost" in line for line in lines) and any("node01" in line for line in lines[:4]):
                break
            time.sleep(0.5)
        else:
            pytest.fail("node01 never lost its GPU on the cluster screen:\n" + "\n".join(lines))
        # node01 is in the most trouble: it is the first row, focused; Enter opens it.
        subprocess.run(tmux_command("send-keys", "-t", session, "Enter"), check=True)
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            lines = capture()
            sag = next((i for i, line in enumerate(lines) if "11.5 V: GPUs fall off" in line), None)
            lost = next((i for i, line in enumerate(lines) if re.search(r"\d\d:\d\d:\d\d . GPU 3 lost", line)), None)
            if sag is not None and lost is not None:
                break
            time.sleep(0.5)
        else:
            pytest.fail("no timeline with the sag and the loss:\n" + "\n".join(lines))
        assert len(lines) <= 24
        assert sag < lost, "\n".join(lines)
        assert "Incident" in lines[1]
        assert re.search(r"after rail 11\.\d{3} V", lines[lost]), "\n".join(lines)
    finally:
        subprocess.run(tmux_command("send-keys", "-t", session, "q"), capture_output=True)
        time.sleep(1.0)
        subprocess.run(tmux_command("kill-session", "-t", session), capture_output=True)
