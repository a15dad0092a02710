"""What a screen may ask of the app is one typed interface (``sparktui.ui.base.Dashboard``), and no
module of ``sparktui.ui`` but the entry points imports the app: screens draw, the app dispatches."""

from __future__ import annotations

import ast
from pathlib import Path

from sparktui.ui.app import make_app
from sparktui.ui.base import Dashboard
from tests.support.ui_data import fleet_spec

UI = Path(__file__).resolve().parents[2] / "sparktui" / "ui"
# The modules that start an app: the app itself, the commands' runner, the screenshot maker and the
# replay dashboard (an app of its own, built on the dashboard's).
ENTRY_POINTS = frozenset({"app.py", "run.py", "screenshot.py", "replay.py"})


def _members(protocol: type) -> set[str]:
    own = set(vars(protocol)) | set(protocol.__annotations__)
    return {name for name in own if not name.startswith("_")}


def test_the_app_is_a_dashboard_with_every_member_a_screen_may_use() -> None:
    app = make_app(fleet_spec(), collect=False)
    dashboard: Dashboard = app  # the type checker holds the app to the protocol, member by member
    missing = sorted(name for name in _members(Dashboard) if not hasattr(dashboard, name))
    assert missing == []


def test_no_screen_imports_the_app() -> None:
    offenders: list[str] = []
    for path in sorted(UI.glob("*.py")):
        if path.name in ENTRY_POINTS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if "sparktui.ui.app" in names:  # at run time or for the type checker alike
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
    assert len(list(UI.glob("*.py"))) > len(ENTRY_POINTS) + 5  # the scan saw the screens
