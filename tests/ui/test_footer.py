"""The footer shows whole hints only (a key and its full label), as many as fit: at 80, 120 and 160
columns, on the fleet and the node screens, none is cut, and the recovery actions come first."""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App

from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.footer import Hint, KeyFooter, fit_hints, gap_for, screen_hints
from sparktui.ui.node_screen import NodeScreen
from tests.support.screen_text import screen_rows
from tests.support.ui_data import fed_app

SIZES = [(80, 24), (120, 40), (160, 48)]


def _hint(key: str, label: str, *, first: bool = False) -> Hint:
    return Hint(key, label, key, first=first)


def test_fit_hints_leaves_out_what_does_not_fit_whole_and_never_a_more_important_one() -> None:
    hints = [
        _hint("esc", "Fleet"),
        _hint("r", "Restart", first=True),
        _hint("x", "Fix", first=True),
        _hint("q", "Quit"),
    ]
    # "r Restart x Fix" is 15 columns: the screen's own "esc Fleet" (9 more with the gap) does not fit in 20,
    # so nothing after it shows either, though "q Quit" alone would.
    assert fit_hints(hints, 20, 1) == (hints[1], hints[2])
    assert fit_hints(hints, 25, 1) == (hints[0], hints[1], hints[2])  # in the screen's order
    assert fit_hints(hints, 32, 1) == tuple(hints)
    assert fit_hints(hints, 32, 2) == (hints[0], hints[1], hints[2])  # the wider gap takes 3 more columns
    assert fit_hints(hints, 8, 1) == ()  # "r Restart" is 9 columns: nothing rather than a cut "r Resta"


def test_a_hint_without_a_label_is_its_key_alone() -> None:
    assert _hint("!", "").width == 1 and _hint("!", "Alerts").width == 8


def _footer_row(app: App[Any]) -> tuple[KeyFooter, str]:
    footer = app.screen.query_one(KeyFooter)
    return footer, screen_rows(app)[footer.region.y]


def _assert_whole(app: App[Any], width: int) -> list[str]:
    """Every hint the footer row shows is a binding of the screen, key and full label; nothing else is on it."""
    footer, row = _footer_row(app)
    assert len(row) == width
    bindings = {f"{h.key} {h.label}" for h in screen_hints(app.screen)}
    shown = []
    rest = list(row)
    for start, end, hint in footer._spans:
        text = row[start:end]
        assert text == f"{hint.key} {hint.label}" and text in bindings, (text, row)
        shown.append(text)
        rest[start:end] = " " * (end - start)
    assert "".join(rest).strip() == "", f"something beside the hints: {row!r}"
    assert row.rstrip() == (" " * gap_for(width)).join(shown)
    return shown


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_footer_hint_on_the_fleet_screen_is_whole(size: tuple[int, int]) -> None:
    app = fed_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        shown = _assert_whole(app, size[0])
        assert {"r Restart", "x Fix"} <= set(shown)
        if size[0] >= 160:
            assert "! Alerts" in shown  # 160 columns hold every key of the fleet screen but ^p


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_footer_hint_on_the_node_screen_is_whole(size: tuple[int, int]) -> None:
    app = fed_app()
    async with app.run_test(size=size) as pilot:
        await pilot.press("1")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        shown = _assert_whole(app, size[0])
        assert "x Fix" in shown  # the recovery actions come before the screen's own keys at 80
        if size[0] >= 120:
            assert "esc Fleet" in shown


async def test_the_footer_follows_a_resize_and_a_click_presses_the_key() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        wide = _assert_whole(app, 160)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        narrow = _assert_whole(app, 80)
        assert len(narrow) < len(wide) and narrow == [h for h in wide if h in narrow]
        footer = app.screen.query_one(KeyFooter)
        start = next(s for s, _, hint in footer._spans if hint.label == "Actions")
        await pilot.click(KeyFooter, offset=(start + 1, 0))
        await pilot.pause()
        assert type(app.screen).__name__ == "ActionLogScreen"
