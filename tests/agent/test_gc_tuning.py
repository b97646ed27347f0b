"""The agent's garbage-collector settings."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from rigmon.agent.gc_tuning import AGENT_YOUNG_THRESHOLD, tune_agent_gc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_start_up_objects_are_frozen_and_young_collections_are_rarer(restored_gc: None) -> None:
    built_at_start = [object() for _ in range(3)], {"kept": []}
    gc.unfreeze()
    tune_agent_gc()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == AGENT_YOUNG_THRESHOLD > 700
    # What existed when the agent was tuned is no longer among the objects collections walk.
    assert not any(obj is built_at_start[1] for obj in gc.get_objects())


@pytest.mark.parametrize("fails", [False, True])
def test_agent_command_builds_without_collections_then_restores_them(monkeypatch: pytest.MonkeyPatch,
                                                                    fails: bool) -> None:
    import argparse

    import rigmon.cli_agent

    seen: list[bool] = []

    def agent(args: argparse.Namespace) -> int:
        # Stands for the imports and the build: no collection runs meanwhile.
        seen.append(gc.isenabled())
        if fails:
            raise RuntimeError("start-up failed")
        return 0

    monkeypatch.setattr(rigmon.cli_agent, "_agent", agent)
    assert gc.isenabled()
    if fails:
        with pytest.raises(RuntimeError):
            rigmon.cli_agent.cmd_agent(argparse.Namespace())
    else:
        assert rigmon.cli_agent.cmd_agent(argparse.Namespace()) == 0
    assert seen == [False] and gc.isenabled()


def test_rigmon_agent_parses_without_collections_and_restores_them(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    import rigmon.cli_agent
    from rigmon.cli import main

    seen: list[bool] = []

    def agent(args: argparse.Namespace) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(rigmon.cli_agent, "_agent", agent)
    assert main(["agent", "--root", "/nonexistent"]) == 0 and seen == [False] and gc.isenabled()
    with pytest.raises(SystemExit):
        main(["agent", "--no-such-option"])
    assert gc.isenabled()
    capsys.readouterr()
