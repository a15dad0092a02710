"""What a user would see of the dashboard run headless (``App.run_test``): every frame the app hands to
its terminal, drawn into a virtual terminal, with the time it was handed over.

Textual composes a frame (``CompositorUpdate``) and gives it to ``App._display``, which, headless,
drops it. ``ScreenRecorder`` wraps ``_display``: it turns each frame into terminal bytes, as a real
terminal's ``_display`` does on the event loop (so the app pays that cost here too), stamps it with
``time.monotonic()`` and keeps it. ``drain()`` then draws the kept frames into a grid of cells (text
and background colour) outside the timed path, so a benchmark can ask what the screen showed at the
moment of each frame: a highlighted row, a screen's title, a cell's new value. Not counted: writing
the bytes to a tty and the terminal emulator painting them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.color import Color
from rich.console import RenderableType
from textual._compositor import ChopsUpdate, CompositorUpdate, LayoutUpdate
from textual.app import App
from textual.screen import Screen
from textual.strip import Strip


@dataclass(frozen=True, slots=True)
class Frame:
    t: float  # time.monotonic() when the frame was ready to write
    update: CompositorUpdate
    screen: Screen[Any]


class ScreenRecorder:
    """Every frame ``app`` renders, and a virtual terminal of ``width`` x ``height`` they are drawn into."""

    def __init__(self, app: App[Any], width: int, height: int) -> None:
        self.width, self.height = width, height
        self.text = [[" "] * width for _ in range(height)]
        self.background: list[list[Color | None]] = [[None] * width for _ in range(height)]
        self.frames: list[Frame] = []
        self._drawn = 0
        display = app._display

        def recording_display(screen: Screen[Any], renderable: RenderableType | None) -> None:
            display(screen, renderable)
            # The same conditions as a real terminal's _display: nothing is written inside a batch.
            if isinstance(renderable, CompositorUpdate) and not app._batch_count:
                renderable.render_segments(app.console)
                self.frames.append(Frame(time.monotonic(), renderable, screen))

        app._display = recording_display  # type: ignore[method-assign]

    def drain(self) -> Iterator[Frame]:
        """Draw the frames not drawn yet, in order, yielding each once the grid shows it."""
        while self._drawn < len(self.frames):
            frame = self.frames[self._drawn]
            self._drawn += 1
            self._draw(frame.update)
            yield frame

    def line(self, y: int) -> str:
        """Line ``y`` as text (a wide character's second cell adds nothing)."""
        return "".join(self.text[y])

    def cells(self, x: int, y: int, width: int) -> str:
        """The text of ``width`` cells from column ``x`` of line ``y``."""
        return "".join(self.text[y][x : x + width])

    def lines(self) -> list[str]:
        return [self.line(y) for y in range(self.height)]

    def background_at(self, x: int, y: int) -> Color | None:
        return self.background[y][x]

    def _draw(self, update: CompositorUpdate) -> None:
        if isinstance(update, LayoutUpdate):
            for y, strips in enumerate(update.strips, update.region.y):
                x = update.region.x
                for strip in strips:
                    x = self._put(x, y, strip)
        elif isinstance(update, ChopsUpdate):
            # As ChopsUpdate.render_segments: each line's chops that fall inside its span.
            for y, x1, x2 in update.spans:
                for end, (x, chop) in zip(update.chop_ends[y], update.chops[y].items(), strict=False):
                    if chop is None or x > x2 or end <= x1:
                        continue
                    inside = x2 > x >= x1 and end <= x2
                    self._put(x, y, chop if inside else chop.crop(0, min(end, x2) - x))

    def _put(self, x: int, y: int, strip: Strip) -> int:
        if not 0 <= y < self.height:
            return x + strip.cell_length
        row, colours = self.text[y], self.background[y]
        for segment in strip:
            if segment.control:
                continue
            colour = segment.style.bgcolor if segment.style is not None else None
            for char in segment.text:
                width = cell_len(char)
                if 0 <= x < self.width:
                    row[x], colours[x] = char, colour
                if width == 2 and 0 <= x + 1 < self.width:
                    row[x + 1], colours[x + 1] = "", colour
                x += width
        return x
