"""What a terminal shows of a running app's screen, as text: one string per row."""

from __future__ import annotations

from typing import Any

from textual.app import App


def screen_rows(app: App[Any]) -> list[str]:
    """The rows of the screen on top as the terminal draws them (a dialog's own rows, without what it
    covers), each as wide as the terminal."""
    return [strip.text for strip in app.screen._compositor.render_strips()]
