"""Theme files: the shipped ones load, broken ones are reported with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.tui.themes import builtin_theme_dir, load_themes, parse_theme


def test_shipped_themes_load() -> None:
    loaded = load_themes(builtin_theme_dir())
    assert loaded.failed == ()
    names = {t.name for t in loaded.themes}
    assert {"rigmon-dark", "rigmon-light", "rigmon-high-contrast"} <= names
    assert {t.name: t.dark for t in loaded.themes}["rigmon-light"] is False


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('name = "x"\nprimary = "#123456"\ncolour = "#fff"\n', "unknown key 'colour'"),
        ('primary = "#123456"\n', "name must be a non-empty string"),
        ('name = "x"\nprimary = "blurple"\n', "primary: 'blurple' is not a colour"),
        ('name = "x"\nprimary = "#123456"\ndark = "yes"\n', "dark must be true or false"),
        ('name = "x"\nprimary = "#123456"\nvariables = { a = 1 }\n', "variables must be a table of strings"),
        ('name = "x"\nprimary = ', "Invalid value"),
    ],
)
def test_bad_theme_text(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_theme(text)


def test_a_broken_file_does_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('name = "a"\nprimary = "#112233"\n')
    (tmp_path / "b.toml").write_bytes(b"\xff\xfe not utf-8")
    loaded = load_themes(tmp_path)
    assert [t.name for t in loaded.themes] == ["a"]
    assert [f.path.name for f in loaded.failed] == ["b.toml"]
    assert load_themes(tmp_path / "missing").themes == ()
