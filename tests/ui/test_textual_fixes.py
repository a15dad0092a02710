"""The workarounds for bugs of the pinned Textual (``sparktui/ui/textual_fixes.py``), each on the dashboard:
an operator opens a node screen and comes back, a few times, and nothing of the gone screens stays."""

from __future__ import annotations

import gc
from importlib import metadata

import pytest
from textual._styles_cache import StylesCache
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from sparktui.ui.app import SparkApp
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.node_screen import NodeScreen
from sparktui.ui.textual_fixes import WATCHERS
from tests.support.ui_data import fed_app


async def _visit_nodes(app: SparkApp, pilot: Pilot[None], numbers: tuple[int, ...] = (1, 2, 3)) -> None:
    for number in numbers:
        await pilot.press(str(number))
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.pause()  # the footer recomposes after the refresh that follows
    assert isinstance(app.screen, FleetScreen)


def _gone_render_caches(app: SparkApp) -> int:
    """``StylesCache``s alive whose widget is in no screen of the app (shown or kept)."""
    gc.collect()
    screens = {*app.screen_stack, *(child for child in app.children if isinstance(child, Screen))}
    shown = {id(w._styles_cache) for screen in screens for w in (screen, *screen.walk_children(Widget))}
    return sum(1 for o in gc.get_objects() if isinstance(o, StylesCache) and id(o) not in shown)


@pytest.mark.slow
async def test_visiting_nodes_leaves_no_dead_footer_keys_behind() -> None:
    """textual#6666: each recompose of the fleet screen's footer left its old keys reachable."""
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        footer = app.screen.query_one(Footer)
        await _visit_nodes(app, pilot, (1, 2, 3, 1, 2, 3))
        keys = list(footer.query(FooterKey))
        assert keys  # the footer shows its keys
        watchers: dict[str, list[object]] = getattr(footer, WATCHERS, {})
        # Every key it binds is one it shows: none of the ~26 per visit the bug kept.
        assert len(watchers.get("compact", [])) <= len(keys)


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
    """On a Textual upgrade, check whether textual#6665 and #6666 are fixed, and drop the workarounds if so."""
    assert metadata.version("textual") == "8.2.8"
