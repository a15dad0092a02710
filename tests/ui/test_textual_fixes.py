"""The workaround for a bug of the pinned Textual (``sparktui/ui/textual_fixes.py``), on the dashboard:
an operator opens a node screen and comes back, a few times, and nothing of the gone screens stays."""

from __future__ import annotations

import gc
from importlib import metadata

import pytest
from textual._styles_cache import StylesCache
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget

from sparktui.ui.app import SparkApp
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.node_screen import NodeScreen
from tests.support.ui_data import fed_app


async def _visit_nodes(app: SparkApp, pilot: Pilot[None], numbers: tuple[int, ...] = (1, 2, 3)) -> None:
    for number in numbers:
        await pilot.press(str(number))
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        await pilot.press("escape")
        await pilot.pause()
    assert isinstance(app.screen, FleetScreen)


def _gone_render_caches(app: SparkApp) -> int:
    """``StylesCache``s alive whose widget is in no screen of the app (shown or kept)."""
    gc.collect()
    screens = {*app.screen_stack, *(child for child in app.children if isinstance(child, Screen))}
    shown = {id(w._styles_cache) for screen in screens for w in (screen, *screen.walk_children(Widget))}
    return sum(1 for o in gc.get_objects() if isinstance(o, StylesCache) and id(o) not in shown)


@pytest.mark.slow
async def test_gone_widgets_leave_no_render_cache_behind() -> None:
    """textual#6665: an lru_cache on an instance method kept the rendered lines of 1024 gone widgets."""
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await _visit_nodes(app, pilot)
        after_three = _gone_render_caches(app)
        await _visit_nodes(app, pilot, (1, 2, 3, 1, 2, 3))
        assert _gone_render_caches(app) <= after_three  # the bug kept ~40 more per visit


def test_the_workarounds_are_for_the_pinned_textual() -> None:
    """On a Textual upgrade, check whether textual#6665 is fixed, and drop the workaround if so."""
    assert metadata.version("textual") == "8.2.8"
