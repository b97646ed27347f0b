"""`ReplayKeys` declares `refresh_screen` as the hook an app on it must provide: type checkers see it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rigmon.tui.app import RigmonApp
from rigmon.tui.replay_keys import ReplayKeys

REPO = Path(__file__).resolve().parents[2]


def test_mypy_refuses_an_app_on_the_keys_that_does_not_draw(tmp_path: Path) -> None:
    snippet = tmp_path / "apps.py"
    snippet.write_text(textwrap.dedent("""
        from rigmon.tui.replay_keys import ReplayKeys


        class Forgetful(ReplayKeys):
            pass


        class Drawing(ReplayKeys):
            def refresh_screen(self) -> None:
                pass


        Forgetful()
        Drawing()
    """))
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
                          str(snippet)], capture_output=True, text=True, cwd=REPO, timeout=600)
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and 'abstract class "Forgetful"' in errors[0] and "refresh_screen" in errors[0], out.stdout


def test_at_run_time_the_hook_is_the_apps_and_raises_when_missing() -> None:
    class Forgetful(ReplayKeys):
        pass

    with pytest.raises(NotImplementedError):
        Forgetful().refresh_screen()
    assert "refresh_screen" not in getattr(RigmonApp, "__abstractmethods__", frozenset())
    assert RigmonApp.refresh_screen is not ReplayKeys.refresh_screen
