"""``rigmon check`` finds the running agent of its state directory where that agent recorded its address
(the lock file), not only at the address its own configuration names: an agent started with
``--listen 127.0.0.1:PORT`` was asked at the default port 9871."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.check_rail import agent_to_ask, rail_from_agent
from rigmon.agent.server import serve
from rigmon.agent.state_lock import LOCK_FILE, Listening, StateLock, listening_agent
from rigmon.config import AgentConfig, AgentSection, load_agent_config
from rigmon.schema import PsuRailReading
from rigmon.sim.rig import running_rig
from tests.agent.test_check_rail import first_rail_window


def test_the_lock_file_says_where_its_live_agent_listens_until_released(tmp_path: Path) -> None:
    lock = StateLock(tmp_path)
    assert listening_agent(tmp_path) is None  # locked, not yet serving
    where = Listening("https://127.0.0.1:9999", "/etc/rigmon/token", "/etc/rigmon/cert.pem")
    lock.record_listening(where)
    assert listening_agent(tmp_path) == where
    assert (tmp_path / LOCK_FILE).read_text().splitlines()[0] == str(os.getpid())
    lock.release()
    assert listening_agent(tmp_path) is None
    assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"


def test_a_record_left_by_a_dead_agent_is_not_asked(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    (tmp_path / LOCK_FILE).write_text(f"{dead.stdout.strip()}\n" '{"url": "http://127.0.0.1:9999"}\n')
    assert listening_agent(tmp_path) is None
    config = AgentConfig(agent=AgentSection(state_dir=str(tmp_path), listen="127.0.0.1:9871"))
    assert agent_to_ask(config).url == "http://127.0.0.1:9871"


async def test_an_agent_started_on_another_port_is_the_one_the_check_asks(tmp_path: Path) -> None:
    # `rigmon agent --listen 127.0.0.1:0`: the configuration file says nothing of that port.
    state = tmp_path / "state"
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o600)
    agent = Agent(AgentConfig(agent=AgentSection(node="n1", listen="127.0.0.1:0", root=str(tmp_path),
                                                 state_dir=str(state), token_file=str(token))))
    bound: list[str] = []
    found: list[object] = []

    async def ask_when_serving() -> None:
        while not bound or listening_agent(state) is None:
            await asyncio.sleep(0.01)
        found.append(agent_to_ask(AgentConfig(agent=AgentSection(node="n1", state_dir=str(state)))))
        task.cancel()

    task = asyncio.create_task(serve(agent, "127.0.0.1:0", on_bound=bound.append))
    asker = asyncio.create_task(ask_when_serving())
    try:
        await asyncio.wait_for(asyncio.shield(asker), 60)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    (to_ask,) = found
    assert to_ask.url == f"http://{bound[0]}" and to_ask.token_file == str(token)  # type: ignore[attr-defined]
    assert listening_agent(state) is None  # stopped: its record went with its lock


async def test_the_check_reads_the_rail_from_its_state_directory_s_agent() -> None:
    async with running_rig("healthy-v100", 1, base_port=0, speed=1.0) as rig:
        agent = rig.agents[0]
        await first_rail_window(agent)
        # The configuration's address is nobody's; the state directory is the running agent's.
        config = AgentConfig(agent=AgentSection(node="node01", root=str(rig.rig.nodes[0].tree.root),
                                                listen="127.0.0.1:1", state_dir=agent.config.agent.state_dir))
        rail = await asyncio.to_thread(rail_from_agent, config)
    assert isinstance(rail, PsuRailReading), rail


def test_a_token_file_the_check_cannot_read_is_named_by_the_key_that_set_it(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "missing.token"
    file = tmp_path / "agent.toml"
    file.write_text(f'[agent]\ntoken_file = "{missing}"\nstate_dir = "{tmp_path / "state"}"\n')
    monkeypatch.delenv("RIGMON_AGENT_TOKEN_FILE", raising=False)
    config = load_agent_config(file, environ={})
    said = rail_from_agent(config, config_path=str(file))
    assert isinstance(said, str) and f"{file}: agent.token_file {missing}" in said, said
    monkeypatch.setenv("RIGMON_AGENT_TOKEN_FILE", str(missing))
    said = rail_from_agent(config, config_path=str(file))
    assert isinstance(said, str) and f"environment RIGMON_AGENT_TOKEN_FILE {missing}" in said, said
