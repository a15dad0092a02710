"""A keyed table for the fleet screen that renders each row once per change.

Textual's DataTable renders every cell of every row through its own Rich render pass after any cell
changes (one update invalidates the whole table's line cache). On the fleet screen every row changes
every poll (age, sparkline), so at 8 nodes the table cost about a quarter of the idle dashboard's CPU
(py-spy, ``benchmarks/bench_ui.py``; before/after in ``docs/performance.md``). This widget builds one
Rich ``Text`` per row, keeps the rendered ``Strip`` per row until that row's cells change, and draws
through Textual's Line API. It does what the fleet screen needs of a table: fixed columns with a header,
zebra stripes, a row cursor (keys, mouse) that stays on its row's key when rows move, and the
``RowHighlighted``/``RowSelected`` messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from sparktui.ui.keys import TABLE_BINDINGS

Cell = Text | str
PADDING = 1  # cells of padding each side of a column


@dataclass(frozen=True, slots=True)
class TableColumn:
    key: str
    label: str
    width: int  # content width; the column takes width + 2 * PADDING cells


class RowTable(ScrollView, can_focus=True, inherit_bindings=False):  # its keys: keys.TABLE_BINDINGS
    """Rows of cells under a fixed header; a row cursor. Rows are replaced whole with ``set_rows``."""

    BINDINGS: ClassVar[list[BindingType]] = TABLE_BINDINGS
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "row-table--header",
        "row-table--cursor",
        "row-table--even-row",
    }
    DEFAULT_CSS = """
    RowTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        & > .row-table--header { text-style: bold; background: $panel; color: $foreground; }
        & > .row-table--even-row { background: $surface-lighten-1 50%; }
        &:dark > .row-table--even-row { background: $surface-darken-1 40%; }
        /* A neutral cursor: a lighter band and bold text under the cells' own colours, so a red
           "down" stays red on the cursor (a coloured cursor painted every row the colour of "up"). */
        & > .row-table--cursor { background: $foreground 12%; text-style: bold; }
        &:focus {
            background-tint: $foreground 5%;
            & > .row-table--cursor { background: $foreground 20%; text-style: bold; }
        }
    }
    """

    cursor_row: reactive[int] = reactive(0, always_update=False, repaint=False, init=False)

    class _RowMessage(Message):
        def __init__(self, table: RowTable, row: int, key: str) -> None:
            super().__init__()
            self.table = table
            self.row = row
            self.key = key

        @property
        def control(self) -> RowTable:
            return self.table

    class RowHighlighted(_RowMessage):
        """The cursor moved to ``row`` (its ``key``)."""

    class RowSelected(_RowMessage):
        """Enter or a click on the highlighted row: ``row`` (its ``key``) was chosen."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._columns: tuple[TableColumn, ...] = ()
        self._keys: list[str] = []
        self._cells: list[tuple[Cell, ...]] = []
        self._content: dict[str, Strip] = {}  # row key -> its cells rendered, no row style
        self._lines: dict[tuple[str, int, bool], Strip] = {}  # (key, parity, cursor) -> the styled line
        self._header: Strip | None = None
        self._width = 0

    # --- data ---------------------------------------------------------------------------------------

    @property
    def columns(self) -> tuple[TableColumn, ...]:
        return self._columns

    @property
    def row_count(self) -> int:
        return len(self._keys)

    @property
    def row_keys(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def get_row_at(self, index: int) -> tuple[Cell, ...]:
        return self._cells[index]

    def set_columns(self, columns: Sequence[TableColumn]) -> None:
        """New columns: every row is dropped (callers set rows again)."""
        self._columns = tuple(columns)
        self._width = sum(c.width + 2 * PADDING for c in self._columns)
        self._keys, self._cells = [], []
        self._invalidate()
        self._resize()

    def set_rows(self, rows: Sequence[tuple[str, Sequence[Cell]]]) -> None:
        """Replace the rows (key, cells in column order). Rows whose cells are unchanged are not
        rendered again; the cursor stays on its row's key when that row is still there."""
        old_key = self._keys[self.cursor_row] if 0 <= self.cursor_row < len(self._keys) else None
        keys = [key for key, _ in rows]
        cells = [tuple(values) for _, values in rows]
        previous = dict(zip(self._keys, self._cells, strict=True))
        changed = [i for i, (key, values) in enumerate(zip(keys, cells, strict=True)) if previous.get(key) != values]
        for i in changed:
            self._content.pop(keys[i], None)
        for stale in set(self._content) - set(keys):
            del self._content[stale]
        moved = keys != self._keys
        if moved or changed:
            self._lines = {k: v for k, v in self._lines.items() if k[0] in self._content}
        self._keys, self._cells = keys, cells
        if moved:
            self._resize()
            target = keys.index(old_key) if old_key in keys else min(self.cursor_row, max(0, len(keys) - 1))
            self._set_cursor(target, force=target != self.cursor_row or old_key not in keys)
            self.refresh()
        else:
            scroll_y = round(self.scroll_offset.y)
            for i in changed:
                self.refresh(Region(0, i - scroll_y + 1, self.size.width, 1))

    # --- rendering ----------------------------------------------------------------------------------

    def _invalidate(self) -> None:
        self._content.clear()
        self._lines.clear()
        self._header = None
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._content.clear()
        self._lines.clear()
        self._header = None

    def _on_focus(self, event: events.Focus) -> None:
        self._lines.clear()  # the cursor's style differs with focus
        self.refresh()

    def _on_blur(self, event: events.Blur) -> None:
        self._lines.clear()
        self.refresh()

    def _resize(self) -> None:
        self.virtual_size = Size(self._width, len(self._keys) + 1)

    def _render_cells(self, values: Sequence[Cell] | None, style: Style) -> Strip:
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        pad = " " * PADDING
        for column, value in zip(self._columns, values or [c.label for c in self._columns], strict=False):
            cell = value if isinstance(value, Text) else Text(value)
            if cell.cell_len > column.width:
                cell = cell.copy()
                cell.truncate(column.width, overflow="ellipsis")
            text.append(pad)
            text.append_text(cell)
            text.append(" " * (column.width - cell.cell_len) + pad)
        segments = list(Segment.apply_style(text.render(self.app.console), style))
        return Strip(segments, self._width)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x = round(self.scroll_offset.x)
        base = self.rich_style
        if y == 0:
            if self._header is None:
                header = self.get_component_rich_style("row-table--header")
                self._header = self._render_cells(None, base + header).extend_cell_length(
                    max(width + scroll_x, self._width), base + header
                )
            return self._header.crop(scroll_x, scroll_x + width)
        index = round(self.scroll_offset.y) + y - 1
        if index >= len(self._keys):
            return Strip.blank(width, base)
        key = self._keys[index]
        cursor = index == self.cursor_row
        parity = index % 2
        line = self._lines.get((key, parity, cursor))
        if line is None or line.cell_length < width + scroll_x:
            content = self._content.get(key)
            if content is None:
                content = self._content[key] = self._render_cells(self._cells[index], Style())
            style = base
            if parity:
                style += self.get_component_rich_style("row-table--even-row")
            # The cursor lays its band under the cells: their own colours (a status, a bar) stay on top.
            if cursor:
                style += self.get_component_rich_style("row-table--cursor")
            line = Strip(Segment.apply_style(content, style), content.cell_length)
            line = line.extend_cell_length(max(width + scroll_x, self._width), style)
            self._lines[(key, parity, cursor)] = line
        return line.crop(scroll_x, scroll_x + width)

    # --- cursor -------------------------------------------------------------------------------------

    def move_cursor(self, row: int) -> None:
        self._set_cursor(row)

    def _set_cursor(self, row: int, force: bool = False) -> None:
        if not self._keys:
            return
        row = max(0, min(row, len(self._keys) - 1))
        old = self.cursor_row
        if row == old and not force:
            return
        self.cursor_row = row
        scroll_y = round(self.scroll_offset.y)
        for index in (old, row):
            self.refresh(Region(0, index - scroll_y + 1, self.size.width, 1))
        self.call_after_refresh(self._scroll_to_cursor)  # after any new rows' layout
        self.post_message(self.RowHighlighted(self, row, self._keys[row]))

    def _scroll_to_cursor(self) -> None:
        """Keep the cursor's row in view (the header takes the first line)."""
        row, scroll_y = self.cursor_row, round(self.scroll_offset.y)
        visible = max(1, self.scrollable_content_region.height - 1)
        if row < scroll_y:
            self.scroll_to(y=row, animate=False)
        elif row >= scroll_y + visible:
            self.scroll_to(y=row - visible + 1, animate=False)

    def action_cursor_up(self) -> None:
        self._set_cursor(self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self._set_cursor(self.cursor_row + 1)

    def action_page_up(self) -> None:
        self._set_cursor(self.cursor_row - max(1, self.scrollable_content_region.height - 2))

    def action_page_down(self) -> None:
        self._set_cursor(self.cursor_row + max(1, self.scrollable_content_region.height - 2))

    def action_first(self) -> None:
        self._set_cursor(0)

    def action_last(self) -> None:
        self._set_cursor(len(self._keys) - 1)

    def action_select(self) -> None:
        if 0 <= self.cursor_row < len(self._keys):
            self.post_message(self.RowSelected(self, self.cursor_row, self._keys[self.cursor_row]))

    async def _on_click(self, event: events.Click) -> None:
        if event.y == 0:
            return  # the header
        index = round(self.scroll_offset.y) + event.y - 1
        if not 0 <= index < len(self._keys):
            return
        if index == self.cursor_row or event.chain > 1:
            self._set_cursor(index)
            self.action_select()
        else:
            self._set_cursor(index)
