"""The help screen (``?``): the key reference of docs/keys.md, rendered from the one keymap."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Markdown

from sparktui.ui.base import SparkModal
from sparktui.ui.keys import HELP_BINDINGS, keys_markdown


class HelpScreen(SparkModal[None]):
    BINDINGS: ClassVar[list[BindingType]] = HELP_BINDINGS
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 80; max-width: 95%; height: 80%; border: round $primary;
                                   background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(keys_markdown())
        yield Footer()
