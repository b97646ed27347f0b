"""`rigmon sim --agent-config FILE`: a user's notifier fires on a simulated incident."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.notify.receiver import receiver

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def rigmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rigmon", *args], capture_output=True, text=True, timeout=60,
                          env=ENV, cwd=REPO)


def test_a_webhook_from_agent_config_receives_the_simulated_undervolt(tmp_path: Path) -> None:
    with receiver() as rec:
        config = tmp_path / "notify.toml"
        config.write_text(f'[[notify]]\nkind = "webhook"\nurl = "{rec.url}"\nmin_severity = "critical"\n'
                          "dedup_s = 0.0\n")
        proc = subprocess.Popen([sys.executable, "-m", "rigmon", "sim", "--scenario", "undervolt-bus-drop",
                                 "--nodes", "1", "--speed", "5", "--base-port", "0", "--duration", "120",
                                 "--agent-config", str(config)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
        lines: list[str] = []
        assert proc.stderr is not None
        pump = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
        pump.start()

        def seen() -> bool:
            sent = any(r.json()["rule"] == "psu_rail_low_critical" for r in rec.ok())
            return sent and any("psu_rail_low_critical" in line for line in list(lines))

        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not seen():
                assert proc.poll() is None, "".join(lines)
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(20)
            pump.join(5)
        err = "".join(lines)
        payloads = [r.json() for r in rec.ok()]
        rail = [p for p in payloads if p["rule"] == "psu_rail_low_critical"]
        assert rail, (payloads, err)
        assert rail[0]["status"] == "firing" and rail[0]["node"] == "node01" and rail[0]["severity"] == "critical"
        # min_severity from the file is honoured: the warning-level rule is not sent.
        assert all(p["severity"] == "critical" for p in payloads)
        # The simulated agent logs the incident's events (warning and above by default).
        logged = [line for line in err.splitlines() if "alarm_firing" in line and "psu_rail_low_critical" in line]
        assert logged and "CRITICAL rigmon.sim: node01:" in logged[0], err[-2000:]


def test_agent_config_errors_name_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[[notify]]\nkind = "carrier-pigeon"\nurl = "http://127.0.0.1:9/"\n')
    out = rigmon("sim", "--agent-config", str(config), "--duration", "1")
    assert out.returncode == 2 and "--agent-config" in out.stderr and "notify[0].kind" in out.stderr
    config.write_text('[agent]\nlisten = "0.0.0.0:1"\n')
    out = rigmon("demo", "--agent-config", str(config))
    assert out.returncode == 2 and "agent.listen: set by the simulator" in out.stderr
    out = rigmon("sim", "--agent-config", str(tmp_path / "missing.toml"), "--duration", "1")
    assert out.returncode == 2 and "cannot read" in out.stderr


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[alarms]\ndisable = ["psu_rail_low_warnin"]\n', "alarms.disable: no rule named 'psu_rail_low_warnin'"),
        ("[collectors.gpuz]\nenabled = true\n", "collectors.gpuz: unknown collector"),
        ('[guard]\nenabled = true\nalarm_rules = ["rail_low"]\n', "guard.alarm_rules: no alarm rule named 'rail_low'"),
    ],
)
def test_what_only_an_agent_finds_in_the_file_is_said_not_a_traceback(tmp_path: Path, text: str, says: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    out = rigmon("sim", "--agent-config", str(config), "--duration", "1", "--base-port", "0")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"rigmon: --agent-config: {config}: {says}"), out.stderr


def test_a_control_token_file_the_agents_refuse_is_named_by_the_file_and_key(tmp_path: Path) -> None:
    # Every simulated agent refused it at its start: a traceback naming the bare key `control_token_file`.
    token = tmp_path / "control.token"
    token.write_text("sim-control-token-0123456789\n")
    token.chmod(0o644)
    config = tmp_path / "sim.toml"
    config.write_text(f'[agent]\ncontrol_token_file = "{token}"\n')
    out = rigmon("sim", "--agent-config", str(config), "--duration", "1", "--base-port", "0")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"rigmon: --agent-config: {config}: agent.control_token_file {token} is readable "
                                 "or writable by other users; chmod 600 it"), out.stderr


async def test_the_rig_names_its_control_token_file_as_it_was_given(tmp_path: Path) -> None:
    from rigmon.agent.server import StartupError
    from rigmon.sim.rig import running_rig

    token = tmp_path / "control.token"
    token.write_text("sim-control-token-0123456789\n")
    token.chmod(0o644)
    extra: dict[str, object] = {"agent": {"control_token_file": str(token)}}
    with pytest.raises(StartupError, match=f"^--control-token-file {token} is readable"):
        async with running_rig("healthy-v100", 1, base_port=0, workdir=tmp_path / "rig", extra_config=extra,
                               control_token_origin="--control-token-file"):
            pass
    with pytest.raises(StartupError, match=f"^agent.control_token_file {token} is readable"):
        async with running_rig("healthy-v100", 1, base_port=0, workdir=tmp_path / "rig2", extra_config=extra):
            pass


@pytest.mark.parametrize(("lines", "key"), [
    ('token_file = "{d}/read.token"', "token_file"),
    ('tls_cert_file = "{d}/agent.pem"\ntls_key_file = "{d}/agent.key"', "tls_cert_file"),
    ('user = "rigmon"', "user"),
])
def test_a_read_token_tls_or_user_for_simulated_agents_is_refused_saying_what_to_run(tmp_path: Path, lines: str,
                                                                                    key: str) -> None:
    """They served HTTPS behind the ``http://`` URL printed, or ignored the read token: refused instead."""
    config = tmp_path / "sim.toml"
    config.write_text("[agent]\n" + lines.format(d=tmp_path) + "\n")
    out = rigmon("sim", "--agent-config", str(config), "--base-port", "0", "--duration", "1")
    assert out.returncode == 2 and out.stdout == "", out.stdout
    assert out.stderr.startswith(f"rigmon: --agent-config: {config}: agent.{key}: not for a simulated agent: "
                                 "simulated agents serve plain HTTP on 127.0.0.1 without a read token; "), out.stderr
    assert "rigmon sim --tree-only DIR" in out.stderr
