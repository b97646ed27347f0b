"""Themes as data: load ``themes/*.toml`` into Textual `Theme`s, reporting files that fail."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

#: Theme fields holding a colour.
_COLOR_FIELDS = ("primary", "secondary", "warning", "error", "success", "accent",
                 "foreground", "background", "surface", "panel", "boost")


def builtin_theme_dir() -> Path:
    """The directory of the themes shipped with rigmon.

    ``rigmon/themes`` is a symlink to the repository's top-level ``themes/`` in a checkout,
    and a real directory once installed (pyproject lists ``themes/*.toml`` as package data).
    """
    package = Path(__file__).resolve().parent.parent
    installed = package / "themes"
    return installed if installed.is_dir() else package.parent / "themes"


@dataclass(frozen=True, slots=True)
class ThemeFailure:
    """A theme file that could not be loaded, and why."""

    path: Path
    reason: str


@dataclass(frozen=True, slots=True)
class LoadedThemes:
    """Result of `load_themes`: themes in file-name order, and the files that failed."""

    themes: tuple[Theme, ...] = ()
    failed: tuple[ThemeFailure, ...] = field(default_factory=tuple)


def parse_theme(text: str) -> Theme:
    """Build a `Theme` from TOML text whose keys are `Theme` fields.

    Raises:
        ValueError: bad TOML, an unknown or missing key, or a value that is not a colour.
    """
    data = tomllib.loads(text)
    known = {f.name for f in dataclasses.fields(Theme)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}")
    for key in ("name", "primary"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ValueError(f"{key} must be a non-empty string")
    for key in _COLOR_FIELDS:
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"{key} must be a colour string, got {value!r}")
        try:
            Color.parse(value)
        except ColorParseError:
            raise ValueError(f"{key}: {value!r} is not a colour") from None
    for key in ("dark", "ansi"):
        if key in data and not isinstance(data[key], bool):
            raise ValueError(f"{key} must be true or false")
    for key in ("luminosity_spread", "text_alpha"):
        if key in data and not isinstance(data[key], (int, float)):
            raise ValueError(f"{key} must be a number")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ValueError("variables must be a table of strings")
    theme = Theme(**data)
    # Generating the colour system catches what single fields do not show.
    theme.to_color_system().generate()
    return theme


def load_themes(directory: Path) -> LoadedThemes:
    """Load every ``*.toml`` of ``directory``; a missing directory loads nothing.

    Never raises for a bad file: it lands in ``failed`` with the reason.
    """
    themes: list[Theme] = []
    failed: list[ThemeFailure] = []
    if not directory.is_dir():
        return LoadedThemes()
    for path in sorted(directory.glob("*.toml")):
        try:
            themes.append(parse_theme(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError, TypeError) as exc:
            failed.append(ThemeFailure(path, str(exc)))
    return LoadedThemes(tuple(themes), tuple(failed))
