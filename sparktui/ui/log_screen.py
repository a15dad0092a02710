"""The log view (``l`` on the node screen): every log of a node, merged in time order, following the end
until the reader scrolls up, searched (``/``, ``n``/``N``), wrapped or cut, one instance or all, with
the lines that match a known failure signature in the critical colour. The node's kernel log is one of
its logs (``[kernel]``): ``i`` reaches it in turn, ``b`` shows it alone and back.

``LogView`` draws a ``LogReader`` (``log_reader.py``: the lines, matches and follow state, pure) one
screen row at a time, so a node's 20,000 lines cost only the rows on screen; the node screen's log
tail is the same widget, following and wrapped.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input, Static

from sparktui.model.logbuffer import KERNEL_LOG
from sparktui.ui.base import SparkScreen, spark_app
from sparktui.ui.footer import KeyFooter
from sparktui.ui.keys import LOG_BINDINGS
from sparktui.ui.log_reader import LogReader, Match, hanging_indent, line_rows, locate_row, row_starts

NO_LOG = "no log yet: it is streamed over SSH from each instance's unit or container"
_CACHE_LINES = 2_000  # rendered lines kept between frames


class LogView(ScrollView, can_focus=False):
    """A ``LogReader``'s shown lines, one row each or wrapped to the width; only what is on screen is
    rendered. The screen that owns it changes the reader, then calls ``lines_changed``."""

    DEFAULT_CSS = """
    LogView { background: $surface; overflow-x: auto; overflow-y: scroll; }
    LogView.tail { scrollbar-size-vertical: 0; scrollbar-size-horizontal: 0; }
    """

    class Scrolled(Message):
        """The reader turned the mouse wheel: up stops following, down to the end follows again."""

        def __init__(self, up: bool) -> None:
            super().__init__()
            self.up = up

    def __init__(
        self, reader: LogReader, *, wrap: bool = False, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.reader = reader
        self.wrap = wrap
        self._starts: list[int] = [0]
        self._strips: dict[int, Strip] = {}  # by shown line, valid for one ``reader.generation``
        # Wrapped: the rows each shown line takes at ``_counted``'s (generation, width), and (cached) where
        # they cut it. Within a generation lines only arrive, so only new ones are worked out.
        self._row_counts: list[int] = []
        self._counted: tuple[int, int] = (-1, 0)
        self._rows: dict[int, list[tuple[int, int]]] = {}
        self._generation = reader.generation
        self._empty = NO_LOG

    # --- what the screen calls ----------------------------------------------------------------------

    def lines_changed(self, *, restyle: bool = False) -> None:
        """The reader's lines (or, with ``restyle``, their matches, colours or wrap) changed."""
        if restyle or self.reader.generation != self._generation:
            self._generation = self.reader.generation
            self._strips.clear()
        width = self._wrap_width()
        self._starts = row_starts(self._wrapped_counts(width) if self.wrap else [1] * len(self.reader.shown))
        size = Size(width if self.wrap else max(self.reader.widths, default=0), max(self._starts[-1], 1))
        if self.styles.scrollbar_size_vertical or self.styles.scrollbar_size_horizontal:
            self.virtual_size = size  # the scrollbars show it: a layout pass sizes them
        else:
            # Nothing on screen shows the size of a view without scrollbars (the node screen's tail):
            # the scroll extents read it as it is, and the layout pass that setting it asks for would
            # reflow the whole screen at every tick that brings a line (8 % of the node screen's CPU).
            self.set_reactive(LogView.virtual_size, size)
        self._follow_end()
        self.call_after_refresh(self._follow_end)  # again once a new size is laid out
        self.refresh()

    def _wrapped_counts(self, width: int) -> list[int]:
        reader = self.reader
        if self._counted != (reader.generation, width):
            self._counted = (reader.generation, width)
            self._row_counts, self._rows = [], {}
        cells = reader.widths
        for index in range(len(self._row_counts), len(reader.shown)):
            fits = cells[index] <= width
            self._row_counts.append(1 if fits else len(self._line_rows(index, width)))
        return self._row_counts

    def _line_rows(self, index: int, width: int) -> list[tuple[int, int]]:
        """Where a shown line's wrapped rows cut its text (``line_rows``), kept while its width holds."""
        rows = self._rows.get(index)
        if rows is None:
            if len(self._rows) >= _CACHE_LINES:
                self._rows.clear()
            reader = self.reader
            rows = line_rows(reader.shown[index], reader.widths[index], width, reader.measure)
            self._rows[index] = rows
        return rows

    def _follow_end(self) -> None:
        if self.reader.follow.on and self.is_attached:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def set_empty(self, text: str) -> None:
        """What the view says while it has no line."""
        self._empty = text
        self.refresh()

    def show_match(self, match: Match) -> None:
        """Scroll so that ``match`` is in the middle of the view (and in its columns when cut)."""
        width = self._wrap_width()
        part = 0
        if self.wrap:
            self._wrapped_counts(width)
            part = sum(1 for start, _ in self._line_rows(match.line, width)[1:] if start <= match.start)
        row = self._starts[match.line] + part
        x = None if self.wrap or match.end <= self.scroll_x + width else max(0, match.start - width // 4)
        if x is None and match.start < self.scroll_x:
            x = max(0, match.start - width // 4)
        self.scroll_to(x=x, y=max(0, row - self.scrollable_content_region.height // 2), animate=False, immediate=True)
        self._strips.clear()
        self.refresh()

    def bottom_line(self) -> int:
        """The shown line at the bottom of the view (the last one when the view is taller)."""
        bottom = int(self.scroll_y) + self.scrollable_content_region.height - 1
        found = locate_row(self._starts, min(bottom, self._starts[-1] - 1))
        return found[0] if found is not None else 0

    # --- drawing ------------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()  # a new theme or style: the lines are drawn again in its colours

    def _wrap_width(self) -> int:
        return max(1, self.scrollable_content_region.width)

    def on_resize(self) -> None:
        self.lines_changed(restyle=self.wrap)

    def on_mouse_scroll_up(self) -> None:
        self.post_message(self.Scrolled(up=True))

    def on_mouse_scroll_down(self) -> None:
        self.post_message(self.Scrolled(up=False))

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self._wrap_width()
        style = self.rich_style
        if not self.reader.shown:
            if y == 0:
                text = Text(self._empty)
                text.stylize(style)
                text.stylize(spark_app(self.app).colours["dim"])
                return Strip(text.render(self.app.console)).crop_extend(0, width, style)
            return Strip.blank(width, style)
        found = locate_row(self._starts, scroll_y + y)
        if found is None:
            return Strip.blank(width, style)
        line, part = found
        strip = self._line_strip(line)
        if not self.wrap:
            return strip.crop_extend(scroll_x, scroll_x + width, style)
        row = self._wrapped_row(strip, line, part, width)
        if y == 0 and part and self.has_class("tail"):  # the tail's top row is the end of a line: say so
            mark = Strip([Segment("…", style + Style.parse(spark_app(self.app).colours["dim"]))], 1)
            return Strip.join([mark, row.crop_extend(1, width, style)])
        return row

    def _wrapped_row(self, strip: Strip, line: int, part: int, width: int) -> Strip:
        """One wrapped row of a shown line: cut at a space or between tokens (``line_rows``), and after
        the first, under the line's message (``hanging_indent``)."""
        style = self.rich_style
        reader = self.reader
        text = reader.shown[line].text
        rows = self._line_rows(line, width)
        start, end = rows[min(part, len(rows) - 1)]
        piece = strip.crop(reader.measure(text[:start]), reader.measure(text[:end]))
        if part:
            indent = min(hanging_indent(reader.shown[line]), width // 2)
            piece = Strip.join([Strip.blank(indent, style), piece])
        return piece.crop_extend(0, width, style)

    def _line_strip(self, index: int) -> Strip:
        cached = self._strips.get(index)
        if cached is not None:
            return cached
        reader = self.reader
        entry = reader.shown[index]
        colours = spark_app(self.app).colours
        text = Text(entry.text, no_wrap=True)
        text.stylize(self.rich_style)  # a Text's own style is not in its segments: the widget's goes under all
        if entry.signature:
            text.stylize(f"bold {colours['status-crit']}")
        elif entry.line.gap:
            text.stylize(colours["dim"])
        current = reader.current_match
        for match in reader.matches_on(index):
            colour = colours["status-loading"] if match == current else colours["status-warn"]
            text.stylize(f"bold reverse {colour}", match.start, match.end)
        strip = Strip(text.render(self.app.console), cell_len(entry.text))
        if len(self._strips) >= _CACHE_LINES:
            self._strips.clear()
        self._strips[index] = strip
        return strip


class LogScreen(SparkScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = LOG_BINDINGS
    AUTO_FOCUS = None  # the keys are the screen's; the search field takes them only while it is open
    DEFAULT_CSS = """
    LogScreen { layout: vertical; }
    #log-title { height: auto; max-height: 2; padding: 0 1; background: $panel; }
    #log-view { height: 1fr; }
    #log-search { dock: bottom; display: none; margin-bottom: 1; }
    #log-search.shown { display: block; }
    """

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node
        self._reader: LogReader | None = None
        self._query_before = ""  # the search when ``/`` was pressed (escape goes back to it)

    @property
    def reader(self) -> LogReader:
        if self._reader is None:
            self._reader = LogReader(signatures=self.spark.signature_patterns, measure=cell_len)
        return self._reader

    @property
    def view(self) -> LogView:
        return self.query_one("#log-view", LogView)

    def compose(self) -> ComposeResult:
        yield Static(id="log-title")
        yield LogView(self.reader, id="log-view")
        yield Input(placeholder="search (enter: go, esc: cancel)", id="log-search", disabled=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        self._ready = True
        self.update_views(self.spark.views)

    def update_views(self, views: object = (), changed: frozenset[str] | None = None) -> None:
        """New lines from the node's buffers, drawn (the render tick calls it)."""
        if not self.drawable:
            return
        known = len(self.reader.instances)
        if self.reader.pull(self.spark.log_buffers(self.node)):
            self.view.lines_changed()
        if len(self.reader.instances) != known:
            self.refresh_bindings()  # a log appeared: "i" (and "b" for the kernel's) may be offered now
        self._title()

    def _title(self) -> None:
        reader = self.reader
        colours = self.spark.colours
        text = Text()
        text.append(f"{self.node} logs", style="bold")
        if len(reader.instances) > 1:
            text.append(f"   {reader.only or 'all instances'} (i: next)")
        elif reader.instances:
            text.append(f"   {reader.instances[0]}")
        if reader.follow.on:
            text.append("   ● following", style=colours["status-ok"])
        else:
            unseen = f", {reader.follow.unseen} new lines" if reader.follow.unseen else ""
            text.append(f"   ‖ paused{unseen} (End or F: follow)", style=colours["status-warn"])
        if reader.query:
            at = "" if reader.current is None else f"{reader.current + 1} of "
            text.append(f'   search "{reader.query}": {at}{len(reader.matches)} matches (n/N)')
        text.append(f"   wrap {'on' if self.view.wrap else 'off'}", style=colours["dim"])
        self.query_one("#log-title", Static).update(text)

    def on_log_view_scrolled(self, event: LogView.Scrolled) -> None:
        self.reader.follow.scrolled(up=event.up, at_end=self.view.is_vertical_scroll_end)
        self._title()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next_instance":
            return len(self.reader.instances) > 1  # the footer shows it only when there is a choice
        if action == "kernel_log":
            return KERNEL_LOG in self.reader.instances
        return True

    # --- actions ------------------------------------------------------------------------------------

    def action_back(self) -> None:
        search = self.query_one("#log-search", Input)
        if search.has_class("shown"):  # cancel the search being typed: the one before it is back
            self._close_search()
            self.reader.search(self._query_before)
        elif self.reader.query:
            self.reader.search("")
        else:
            self.dismiss()
            return
        self.view.lines_changed(restyle=True)
        self._title()

    def action_search(self) -> None:
        search = self.query_one("#log-search", Input)
        self._query_before = search.value = self.reader.query
        search.disabled = False
        search.add_class("shown")
        search.focus()

    def _close_search(self) -> None:
        search = self.query_one("#log-search", Input)
        search.remove_class("shown")
        search.disabled = True
        self.set_focus(None)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.reader.search(event.value)  # the matches light up as the query is typed
        self.view.lines_changed(restyle=True)
        self._title()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_search()
        self.reader.search(event.value)
        self._jump(forward=False)

    def _jump(self, forward: bool) -> None:
        match = self.reader.jump(forward, self.view.bottom_line())
        self.view.lines_changed(restyle=True)
        if match is not None:
            self.view.show_match(match)
        self._title()

    def action_next_match(self) -> None:
        self._jump(forward=True)

    def action_previous_match(self) -> None:
        self._jump(forward=False)

    def action_follow(self) -> None:
        self.reader.follow.resume()
        self.view.scroll_end(animate=False, immediate=True, x_axis=False)
        self._title()

    def action_toggle_wrap(self) -> None:
        self.view.wrap = not self.view.wrap
        self.view.scroll_to(x=0, animate=False, immediate=True)
        self.view.lines_changed(restyle=True)
        if not self.reader.follow.on and self.reader.current_match is not None:
            self.view.show_match(self.reader.current_match)
        self._title()

    def action_next_instance(self) -> None:
        self.reader.cycle_instance()
        self.view.lines_changed(restyle=True)
        self._title()

    def action_kernel_log(self) -> None:
        self.reader.toggle_kernel()
        self.view.lines_changed(restyle=True)
        self._title()

    def action_scroll_lines(self, rows: int) -> None:
        self._scroll(rows)

    def action_page_up(self) -> None:
        self._scroll_page(-1)

    def action_page_down(self) -> None:
        self._scroll_page(1)

    def _scroll_page(self, pages: int) -> None:
        self._scroll(pages * max(1, self.view.scrollable_content_region.height - 1))

    def action_first(self) -> None:
        self._scroll(-int(self.view.scroll_y))

    def action_scroll_columns(self, columns: int) -> None:
        self.view.scroll_relative(x=columns, animate=False, immediate=True)

    def _scroll(self, rows: int) -> None:
        view = self.view
        view.scroll_relative(y=rows, animate=False, immediate=True)
        self.reader.follow.scrolled(up=rows < 0, at_end=view.is_vertical_scroll_end)
        self._title()
