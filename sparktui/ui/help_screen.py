"""The help screen (``?``): every key of every context on one screen, in as many columns as fit, with
the config's remapping applied. Generated from the one keymap (``keys.help_sections``); docs/keys.md
is the long form, with the binding ids."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Static

from sparktui.ui.base import SparkModal
from sparktui.ui.footer import KeyFooter
from sparktui.ui.keys import HELP_BINDINGS, HelpSection, help_sections, pack_columns
from sparktui.ui.lists import KeyedScroll

COLUMN_WIDTH = 32  # cells a column of the reference needs: keys, a gap and a short description
KEYS_WIDTH = 10  # the keys part of a row, at most ("esc q ?", "unlock_key")


def columns_for(width: int, sections: int) -> int:
    return max(1, min(sections, width // COLUMN_WIDTH))


class KeyReference(Widget):
    """The sections packed into columns for the width it is given."""

    DEFAULT_CSS = "KeyReference { height: auto; }"

    def __init__(self, sections: tuple[HelpSection, ...], colours: dict[str, str]) -> None:
        super().__init__()
        self.sections = sections
        self.colours = colours

    def _packed(self, width: int) -> list[list[HelpSection]]:
        return pack_columns(self.sections, columns_for(width, len(self.sections)))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(sum(s.lines for s in column) + len(column) - 1 for column in self._packed(width))

    def render(self) -> Table:
        packed = self._packed(self.size.width)
        grid = Table.grid(expand=True, padding=(0, 1))
        for _ in packed:
            grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_row(*(self._column(column) for column in packed))
        return grid

    def _column(self, column: list[HelpSection]) -> Group:
        keys_width = min(KEYS_WIDTH, max(len(keys) for section in column for keys, _ in section.rows))
        parts: list[Text | Table] = []
        for index, section in enumerate(column):
            if index:
                parts.append(Text(""))
            parts.append(Text(section.title, style=f"bold {self.colours['status-loading']}", no_wrap=True))
            rows = Table.grid(padding=(0, 2, 0, 0), expand=True)
            rows.add_column(width=keys_width, no_wrap=True, overflow="ellipsis", style="bold")
            rows.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
            for keys, description in section.rows:
                rows.add_row(keys, description)
            parts.append(rows)
        return Group(*parts)


class HelpScreen(SparkModal[None]):
    BINDINGS: ClassVar[list[BindingType]] = HELP_BINDINGS
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > KeyedScroll { width: 100%; max-width: 172; height: auto; max-height: 100%;
                               border: round $primary; background: $surface; padding: 0 1; }
    HelpScreen #help-title { color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        spark = self.spark
        with KeyedScroll():
            title = "Every key · remap by id in the config's [keymap] (ids: docs/keys.md)"
            yield Static(Text(title), id="help-title")
            yield KeyReference(help_sections(spark.fleet.keymap), spark.colours)
        yield KeyFooter()
