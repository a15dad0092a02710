"""``update_panel``: a panel's new content reflows the screen only when the panel's height changes
with it (a reflow measures every auto-height panel of the screen again: the cost of a tick)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from sparktui.ui.base import update_panel


class Panels(App[None]):
    CSS = """
    #auto { height: auto; border: round $panel; }
    #clamped { height: auto; max-height: 3; }
    #fixed { height: 2; }
    """

    def compose(self) -> ComposeResult:
        yield Static("one line", id="auto")
        yield Static("a\nb\nc\nd", id="clamped")
        yield Static("fixed", id="fixed")


def spy_layouts(panel: Static) -> list[bool]:
    """The ``layout`` of every refresh the panel is asked for from now on."""
    asked: list[bool] = []

    def refresh(*regions: Any, **options: Any) -> Static:
        asked.append(bool(options.get("layout")))
        return Static.refresh(panel, *regions, **options)

    panel.refresh = refresh  # type: ignore[method-assign]
    return asked


async def test_the_same_height_repaints_and_another_height_lays_the_screen_out_again() -> None:
    app = Panels()
    async with app.run_test(size=(60, 20)) as pilot:
        auto = app.query_one("#auto", Static)
        asked = spy_layouts(auto)
        update_panel(auto, Text("another line"))
        await pilot.pause()
        assert asked and not any(asked), asked  # repainted, not laid out
        assert "another line" in str(auto.render()) and auto.region.height == 1 + 2

        asked.clear()
        update_panel(auto, Text("two\nlines"))
        await pilot.pause()
        assert any(asked) and auto.region.height == 2 + 2

        asked.clear()
        update_panel(auto, Text("x" * 120))  # wraps to 3 lines at the panel's 56 columns
        await pilot.pause()
        assert any(asked) and auto.region.height == 3 + 2


async def test_a_fixed_height_panel_never_asks_for_a_layout_and_a_clamped_one_only_when_its_height_moves() -> None:
    app = Panels()
    async with app.run_test(size=(60, 20)) as pilot:
        fixed = app.query_one("#fixed", Static)
        asked = spy_layouts(fixed)
        update_panel(fixed, Text("now\nthree\nlines"))
        await pilot.pause()
        assert asked and not any(asked) and fixed.region.height == 2

        clamped = app.query_one("#clamped", Static)
        asked = spy_layouts(clamped)
        update_panel(clamped, Text("1\n2\n3\n4"))  # four lines again, clamped to three
        await pilot.pause()
        assert not any(asked) and clamped.region.height == 3
        update_panel(clamped, Text("1"))
        await pilot.pause()
        assert any(asked) and clamped.region.height == 1
