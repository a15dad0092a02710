"""A panel of one line of figures over a column chart, drawn line by line.

The fleet screen's two charts change every render tick (a new point shifts every column). As a
``Static``, each new chart went through Textual's content pipeline (``Text`` to ``Content``, wrapped,
aligned, styled into strips): about 3 ms a chart of 20 rows of 76 columns, every tick, twice. Its rows
are plain strings of one colour, so this widget keeps them as they are and draws each line through the
Line API as one segment: about 0.13 ms (``benchmarks/bench_frames.py``; ``docs/performance.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget


class ChartPanel(Widget):
    """A head line (``Text``) over rows of one colour; ``show`` replaces them, and redraws only on change."""

    DEFAULT_CSS = """
    ChartPanel { height: 100%; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._head = Text()
        self._rows: tuple[str, ...] = ()
        self._colour = ""
        self._style = Style()
        self._strips: dict[int, Strip] = {}

    @property
    def plain(self) -> str:
        """What the panel shows, as text: the head line, then the rows."""
        return "\n".join((self._head.plain, *self._rows)) if self._rows else self._head.plain

    def show(self, head: Text, rows: Sequence[str] = (), colour: str = "") -> None:
        rows = tuple(rows)
        if head == self._head and rows == self._rows and colour == self._colour:
            return
        self._head, self._rows, self._colour, self._style = head, rows, colour, Style.parse(colour)
        self._strips.clear()
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()  # a theme's colours: the base style of every line changed

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        strip = self._strips.get(y)
        if strip is None or strip.cell_length != width:
            base = self.rich_style
            if y == 0:
                segments = list(Segment.apply_style(self._head.render(self.app.console), base))
            elif y <= len(self._rows):
                segments = [Segment(self._rows[y - 1], base + self._style)]
            else:
                segments = []
            strip = self._strips[y] = Strip(segments).crop_extend(0, width, base)
        return strip
