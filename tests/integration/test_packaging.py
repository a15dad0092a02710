"""Every package ships: each folder of Python modules under sparktui/ is a regular package."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sparktui"


def test_every_module_folder_has_an_init() -> None:
    folders = {p.parent for p in PACKAGE.rglob("*.py")}
    missing = sorted(str(f.relative_to(PACKAGE)) for f in folders if not (f / "__init__.py").exists())
    assert missing == []


def test_theme_files_are_reachable_from_the_package() -> None:
    themes = PACKAGE / "_themes"
    names = sorted(p.name for p in themes.glob("*.toml"))
    assert names == ["high-contrast.toml", "spark-dark.toml", "spark-light.toml"]
