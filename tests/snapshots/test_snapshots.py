"""SVG snapshots of the fleet and node screens, in two themes and two sizes, from deterministic data
(``tests/support/ui_data.py``). Update with ``pytest tests/snapshots/test_snapshots.py --snapshot-update`` after a
deliberate change, and look at the report before committing."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
from textual.pilot import Pilot

from sparktui.model.drift import DriftReport
from sparktui.ui.fleet_views import DriftScreen
from tests.support.ui_data import fed_app
from tests.ui.test_views import app_with_a_slow_node_down_rule
from tests.unit.test_drift import ROWS

SnapCompare = Callable[..., bool]


async def _open_node(pilot: Pilot[None]) -> None:
    await pilot.press("enter")
    await pilot.pause()


@pytest.mark.parametrize("theme", ["spark-dark", "spark-light"])
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("screen", ["fleet", "node"])
def test_screens(snap_compare: SnapCompare, theme: str, size: tuple[int, int], screen: str) -> None:
    app = fed_app(theme=theme)
    assert snap_compare(app, terminal_size=size, run_before=_open_node if screen == "node" else None)


async def _open_view(pilot: Pilot[None], view: str) -> None:
    if view == "drift":  # the fed fleet has no two instances that disagree: a report that has
        pilot.app.push_screen(DriftScreen(DriftReport(ROWS, {})))
    else:
        await pilot.press({"help": "question_mark", "alerts": "exclamation_mark"}[view])
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("view", ["help", "alerts", "drift"])
def test_views(snap_compare: SnapCompare, size: tuple[int, int], view: str) -> None:
    app = app_with_a_slow_node_down_rule() if view == "alerts" else fed_app()  # firing, pending and quiet rules
    assert snap_compare(app, terminal_size=size, run_before=partial(_open_view, view=view))
