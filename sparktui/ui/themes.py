"""Themes as files (``themes/*.toml``, shipped as ``sparktui/_themes``), validated and turned into
Textual themes. Every colour the UI draws comes from a theme variable; ``STATUS_VARIABLES`` and
``MEMORY_VARIABLES`` are the app's own, with defaults for themes that do not set them."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

from sparktui.model.status import State

DEFAULT_THEME = "spark-dark"
THEME_FIELDS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
STATUS_VARIABLES: dict[State, str] = {
    State.UP: "status-ok",
    State.DEGRADED: "status-warn",
    State.LOADING: "status-loading",
    State.UNKNOWN: "status-stale",
    State.FAILING: "status-crit",
    State.STALE: "status-stale",
    State.DOWN: "status-crit",
}
MEMORY_VARIABLES = {
    "vLLM": "mem-vllm",
    "models held": "mem-held",
    "other": "mem-other",
    "reclaimable cache": "mem-cache",
    "shmem": "mem-shmem",
    "free": "mem-free",
}
VARIABLE_DEFAULTS = {
    "status-ok": "#4EBF00",
    "status-warn": "#E5B444",
    "status-crit": "#F0625D",
    "status-stale": "#8B919A",
    "status-loading": "#4F9DFF",
    "mem-vllm": "#4EBF00",
    "mem-held": "#2FB8AC",
    "mem-other": "#B07CD8",
    "mem-cache": "#4F9DFF",
    "mem-shmem": "#E5B444",
    "mem-free": "#39404A",
    "dim": "#8B919A",
}


class ThemeFileError(ValueError):
    """A theme file that cannot be used; the message is one line naming the file and the key."""


@dataclass(frozen=True, slots=True)
class LoadedThemes:
    themes: tuple[Theme, ...]
    errors: tuple[str, ...]


def _color(source: str, key: str, value: object) -> str:
    if not isinstance(value, str):
        raise ThemeFileError(f'{source}: {key}: must be a colour string like "#76B900"')
    try:
        Color.parse(value)
    except ColorParseError as exc:
        raise ThemeFileError(f"{source}: {key}: {value!r} is not a colour ({exc})") from None
    return value


def theme_from_toml(text: str, source: str) -> Theme:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThemeFileError(f"{source}: TOML syntax error: {exc}") from None
    except RecursionError:
        raise ThemeFileError(f"{source}: arrays or tables are nested too deeply to read") from None
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ThemeFileError(f"{source}: name: required, a string")
    unknown = set(data) - {"name", "dark", "variables", *THEME_FIELDS}
    if unknown:
        raise ThemeFileError(f"{source}: unknown key(s): {', '.join(sorted(unknown))}")
    if "primary" not in data:
        raise ThemeFileError(f"{source}: primary: required")
    colours = {key: _color(source, key, data[key]) for key in THEME_FIELDS if key in data}
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ThemeFileError(f"{source}: variables: must be a table")
    checked = {key: _color(source, f"variables.{key}", value) for key, value in variables.items()}
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeFileError(f"{source}: dark: must be true or false")
    return Theme(
        name=name,
        dark=dark,
        variables={**VARIABLE_DEFAULTS, **checked},
        primary=colours["primary"],
        secondary=colours.get("secondary"),
        warning=colours.get("warning"),
        error=colours.get("error"),
        success=colours.get("success"),
        accent=colours.get("accent"),
        foreground=colours.get("foreground"),
        background=colours.get("background"),
        surface=colours.get("surface"),
        panel=colours.get("panel"),
        boost=colours.get("boost"),
    )


def _builtin_files() -> Iterable[tuple[str, str]]:
    root = resources.files("sparktui") / "_themes"
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            yield f"themes/{entry.name}", entry.read_text(encoding="utf-8")


def load_themes(extra_dirs: Iterable[Path] = ()) -> LoadedThemes:
    """The built-in themes, then any ``*.toml`` in ``extra_dirs``; bad files are reported, not fatal."""
    themes: list[Theme] = []
    errors: list[str] = []
    files = list(_builtin_files())
    for folder in extra_dirs:
        if folder.is_dir():
            files.extend((str(p), p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.toml")))
    for source, text in files:
        try:
            themes.append(theme_from_toml(text, source))
        except ThemeFileError as exc:
            errors.append(str(exc))
    return LoadedThemes(tuple(themes), tuple(errors))


def palette(variables: Mapping[str, str]) -> dict[str, str]:
    """The app's variables resolved for Rich text (cells of a table, bars) under the current theme."""
    return {key: variables.get(key, default) for key, default in VARIABLE_DEFAULTS.items()}
